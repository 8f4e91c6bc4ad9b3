/* bench_compile.c -- compile time of a large graph: N tensors in scopes of
 * 10 layers (a parameter, a matmul-free chain of add and relu per layer),
 * trained with SGD so gradients, accumulators and updated weights are named
 * too. Prints `tensorscope tensors=N graph_ms=.. compile_ms=.. compile_cpu_ms=.. names=..`
 * (CPU time as well as wall time: on a loaded machine the wall time says little).
 *
 *   bench_compile [N]   (default 100000) */
#include <stdio.h>
#include <time.h>

#include "bench_common.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long n = arg_or(argc, argv, 1, 100000);
    double t0 = now_s();
    ts_graph *g = ts_graph_new(1);
    ts_tensor *h = ts_input(g, "x", TS_F32, 2, (int64_t[]){4, 8});
    char scope[64];
    for (long i = 0; (long)ts_graph_tensor_count(g) < n - 2; i++) {
        snprintf(scope, sizeof scope, "layer%ld", i);
        ts_scope_push(g, scope);
        snprintf(scope, sizeof scope, "layer%ld.bias", i);
        ts_tensor *b = ts_param(g, scope, 1, (int64_t[]){8});
        h = ts_relu(g, ts_add(g, h, b));
        ts_scope_pop(g);
    }
    ts_tensor *loss = ts_mean(g, h);
    ts_tensor_set_name(loss, "loss");
    double t1 = now_s(), c1 = cpu_s();
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    if (ts_graph_status(g) || ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f)) || ts_model_compile(m)) {
        fprintf(stderr, "bench_compile: %s\n", ts_last_error());
        return 1;
    }
    double t2 = now_s(), c2 = cpu_s();
    const char *const *names;
    size_t nn = 0;
    ts_model_tensor_names(m, &names, &nn);
    printf("tensorscope tensors=%zu graph_ms=%.1f compile_ms=%.1f compile_cpu_ms=%.1f names=%zu\n", ts_graph_tensor_count(g),
           (t1 - t0) * 1e3, (t2 - t1) * 1e3, (c2 - c1) * 1e3, nn);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return 0;
}
