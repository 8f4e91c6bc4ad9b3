/* app.c -- a user program of an installed tensorscope (tests/test_install.sh):
 * builds a tiny model, compiles it and counts its tensors. */
#include <stdio.h>
#include <tensorscope.h>
int main(void) {
    ts_graph *g = ts_graph_new(1);
    int64_t s[] = {2, 3};
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, s);
    ts_tensor *loss = ts_mean(g, ts_relu(g, ts_linear(g, x, 4, "fc")));
    ts_tensor_set_name(loss, "loss");
    ts_model *m = NULL;
    if (ts_model_training(&m, g, loss, NULL, ts_sgd(0.1f, 0, 0)) || ts_model_compile(m)) {
        fprintf(stderr, "%s\n", ts_last_error());
        return 1;
    }
    const char *const *names;
    size_t n;
    ts_model_tensor_names(m, &names, &n);
    printf("tensorscope %s: %zu tensors\n", ts_version(), n);
    ts_model_free(m);
    ts_graph_free(g);
    return 0;
}
