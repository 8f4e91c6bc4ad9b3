/* cnn.c -- see cnn.h. */
#include "cnn.h"

ts_status test_cnn_build(cnn *m, int64_t batch, uint64_t seed) {
    ts_graph *g = m->g = ts_graph_new(seed);
    m->loss = m->logp = NULL;
    if (!g) return TS_ERR_OUT_OF_MEMORY;
    int64_t xs[] = {batch, 1, 28, 28}, ys[] = {batch};
    const ts_pool2d_params pool2 = {.kernel_h = 2, .kernel_w = 2};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_conv2d_layer(g, x, 6, 5, 5, &(ts_conv2d_params){.same = 1}, 0, "conv1");
    h = ts_max_pool2d(g, ts_relu(g, ts_batch_norm_layer(g, h, "bn1")), &pool2);
    h = ts_conv2d_layer(g, h, 16, 5, 5, NULL, 0, "conv2");
    h = ts_max_pool2d(g, ts_relu(g, ts_batch_norm_layer(g, h, "bn2")), &pool2);
    h = ts_flatten(g, h, 1);
    h = ts_relu(g, ts_linear(g, h, 120, "fc1"));
    h = ts_relu(g, ts_linear(g, h, 84, "fc2"));
    m->logp = ts_log_softmax(g, ts_linear(g, h, 10, "fc3"), 1);
    m->loss = ts_nll_loss(g, m->logp, y);
    if (m->loss) ts_tensor_set_name(m->loss, "loss");
    return ts_graph_status(g);
}
