/* onnx_rnn.h -- ONNX's recurrent ops (LSTM, GRU) unrolled over their static
 * sequence into graph ops that already have gradients (onnx_rnn.c).
 * Internal: nothing here is API. */
#ifndef TS_ONNX_RNN_H
#define TS_ONNX_RNN_H

#include "import/onnx_consts.h"

struct TensorscopeOnnx__NodeProto;

#define TS_ONNX_RNN_INPUTS 8 /* X W R B sequence_lens initial_h initial_c P */

/* One LSTM or GRU node: its inputs as graph tensors (t[i]), or for a host
 * constant that is not an initializer its values (c[i], t[i] NULL); both
 * NULL for an absent input. */
typedef struct ts_onnx_rnn_node {
    const struct TensorscopeOnnx__NodeProto *node;
    ts_tensor *t[TS_ONNX_RNN_INPUTS];
    const ts_const *c[TS_ONNX_RNN_INPUTS];
} ts_onnx_rnn_node;

/* Builds the node's outputs Y, Y_h (and LSTM's Y_c) into out[0..2] (NULL
 * for an output the node does not name); every gate of every step is a
 * named tensor `<scope>/<node>/t<k>/<gate>`. An error (ts_error) for what
 * is not available: clip, input_forget, activations other than Sigmoid,
 * Tanh and Relu. */
ts_status ts_onnx_rnn(ts_graph *g, const ts_onnx_rnn_node *n, ts_tensor *out[3]);

#endif
