/* mlp.c -- see mlp.h. */
#include "mlp.h"

ts_status test_mlp_build(mlp *m, int64_t batch, uint64_t seed) {
    ts_graph *g = m->g = ts_graph_new(seed);
    m->loss = NULL;
    if (!g) return TS_ERR_OUT_OF_MEMORY;
    int64_t xs[] = {batch, 1, 28, 28}, ys[] = {batch};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_flatten(g, x, 1);
    h = ts_relu(g, ts_linear(g, h, 320, "fc1"));
    h = ts_relu(g, ts_linear(g, h, 100, "fc2"));
    h = ts_log_softmax(g, ts_linear(g, h, 10, "fc3"), 1);
    m->loss = ts_nll_loss(g, h, y);
    if (m->loss) ts_tensor_set_name(m->loss, "loss");
    return ts_graph_status(g);
}
