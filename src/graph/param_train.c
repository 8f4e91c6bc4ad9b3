/* param_train.c -- what a program says about training beyond its ops:
 * the stop-gradient op's builder, parameters left alone, and a parameter's
 * own optimizer settings (compile/compile.c and exec/exec.c read them). */
#include "graph/graph.h"
#include "graph/ops.h"
#include "graph/optim.h"

ts_tensor *ts_stop_gradient(ts_graph *g, ts_tensor *x) {
    const ts_tensor *ins[1] = {x};
    return ts_graph_add_node(g, TS_OP_STOP_GRADIENT, ins, 1, NULL, NULL, NULL);
}

/* A parameter whose settings may still change: its graph has no model. */
static ts_status settable(const ts_tensor *t, const char *what) {
    if (!t) return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: the parameter is NULL", what);
    if (t->op != TS_OP_PARAM)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: '%s' is not a parameter (op %s)", what, t->name,
                        t->op == TS_OP_BUFFER ? "Buffer" : ts_op_get(t->op)->name);
    if (t->g->n_models > 0)
        return ts_error(TS_ERR_STATE, "%s: '%s' belongs to a graph with a model already; set it before making the model", what, t->name);
    return TS_OK;
}

ts_status ts_param_set_trainable(ts_tensor *param, int trainable) {
    ts_status st = settable(param, "ts_param_set_trainable");
    if (st) return st;
    param->frozen = !trainable;
    return TS_OK;
}

int ts_param_trainable(const ts_tensor *param) { return param && param->op == TS_OP_PARAM && !param->frozen; }

ts_status ts_param_set_optimizer(ts_tensor *param, const ts_optimizer *opt) {
    ts_status st = settable(param, "ts_param_set_optimizer");
    if (st) return st;
    if (opt && (st = ts_optimizer_check(opt))) return ts_error_wrap(st, "ts_param_set_optimizer: '%s'", param->name);
    param->has_opt = opt != NULL;
    if (opt) param->opt = *opt;
    return TS_OK;
}
