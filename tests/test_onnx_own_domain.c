/* test_onnx_own_domain.c -- the importer's reading of tensorscope's own
 * ONNX domain, `ai.tensorscope`: a StopGradient node (what the Python
 * wrapper writes for a torch detach()) becomes the StopGradient op, whose
 * input gets no gradient through it; the same op type in the default
 * domain, and an op of another domain, are refused. */
/* needs: onnx */
#include "onnx_model.h"

/* x [2,3] @ a [3,3] -> (StopGradient of `domain`) -> @ b [3,1] -> ReduceMean: the loss */
static ts_status stop_model(const char *name, const char *op, const char *domain, ts_graph **out) {
    model_begin();
    input("x", 2, (int64_t[]){2, 3});
    float a[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, b[3] = {0.5f, -1, 2};
    push((void ***)&graph->initializer, &graph->n_initializer, init_f32("a", 2, (int64_t[]){3, 3}, a));
    push((void ***)&graph->initializer, &graph->n_initializer, init_f32("b", 2, (int64_t[]){3, 1}, b));
    node("MatMul", "/first/MatMul", "x,a", "h");
    Node *s = node(op, "/StopGradient", "h", "held");
    if (domain) s->domain = str(domain);
    node("MatMul", "/second/MatMul", "held,b", "y");
    attr_int(node("ReduceMean", "/ReduceMean", "y", "loss"), "keepdims", 0);
    output("loss");
    return import_as(name, out);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_own_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    ts_graph *g = NULL;
    ts_status st = stop_model("stop", "StopGradient", "ai.tensorscope", &g);
    CHECK(st == TS_OK, "a StopGradient of ai.tensorscope imports: %s", st ? ts_last_error() : "");
    if (g) {
        ts_tensor *s = ts_graph_find(g, "StopGradient:0"), *loss = ts_graph_find(g, "loss");
        CHECK(s && strcmp(ts_tensor_op(s), "StopGradient") == 0 && ts_graph_find(g, "held") == s,
              "as the StopGradient op, found by its file name too");
        ts_model *m = NULL;
        CHECK_OK(ts_model_training(&m, g, loss, NULL, ts_sgd(0.5f, 0.0f, 0.0f)), "training model");
        float x[6] = {1, 2, 3, 2, 0.5f, 2};
        ts_array in = ts_array_f32(x, 2, (int64_t[]){2, 3});
        const char *names[1] = {"x"};
        CHECK_OK(ts_model_run(m, names, &in, 1), "one step");
        ts_array a, b;
        ts_tensor_info(ts_graph_find(g, "a"), &a);
        ts_tensor_info(ts_graph_find(g, "b"), &b);
        const float *av = a.data, *bv = b.data;
        CHECK(av[0] == 1 && av[1] == 0 && av[4] == 1 && av[8] == 1, "the parameter before it is not trained");
        CHECK(bv[0] != 0.5f, "the one after it is (b[0] %g)", (double)bv[0]);
        ts_model_free(m);
        ts_graph_free(g);
    }
    expect("StopGradient of the default domain", stop_model("default", "StopGradient", NULL, NULL), TS_ERR_UNSUPPORTED,
           "op type StopGradient is not supported yet");
    expect("an op of another domain", stop_model("other", "StopGradient", "com.example", NULL), TS_ERR_UNSUPPORTED,
           "of domain 'com.example' is not supported");
    remove_dir();
    return check_summary("test_onnx_own_domain");
}
