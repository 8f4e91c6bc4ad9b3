/* state.c -- each parameter's optimizer state (momentum, Adam's moments
 * and step count), made at a model's first compile and kept across
 * recompiles; the update that uses it is graph/optim.c's (the CPU's) or a
 * device's. */
#include "compile/program.h"

ts_status ts_opt_state_init(const ts_model_def *m) {
    if (*m->state) return TS_OK;
    ts_graph *g = m->g;
    for (size_t i = 0; i < g->n; i++) /* one optimizer: a parameter's own settings are of its kind */
        if (g->t[i]->op == TS_OP_PARAM && g->t[i]->has_opt && g->t[i]->opt.kind != m->opt->kind)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "parameter '%s' has its own %s settings (ts_param_set_optimizer) but the model trains with %s: "
                            "give it settings of the model's optimizer", g->t[i]->name, ts_optimizer_name(g->t[i]->opt.kind),
                            ts_optimizer_name(m->opt->kind));
    int n = 0;
    for (size_t i = 0; i < g->n; i++) n += g->t[i]->op == TS_OP_PARAM;
    ts_opt_state *state = *m->state = ts_calloc((size_t)(n ? n : 1), sizeof *state);
    if (!state) return TS_ERR_OUT_OF_MEMORY;
    *m->n_state = 0;
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        if (t->op != TS_OP_PARAM) continue;
        ts_opt_state *s = &state[(*m->n_state)++];
        s->node = t->id;
        size_t numel = (size_t)ts_shape_numel(&t->shape);
        const ts_optimizer *o = ts_param_optimizer(m->opt, t);
        if (o->kind == TS_OPT_SGD && o->momentum != 0.0f) {
            if (!(s->accl = ts_calloc(numel, sizeof(float)))) return TS_ERR_OUT_OF_MEMORY;
        } else if (o->kind != TS_OPT_SGD) {
            if (!(s->accl1 = ts_calloc(numel, sizeof(float))) || !(s->accl2 = ts_calloc(numel, sizeof(float))))
                return TS_ERR_OUT_OF_MEMORY;
        }
    }
    return TS_OK;
}

void ts_opt_state_free(ts_opt_state **state, int *n_state) {
    for (int i = 0; i < *n_state; i++) {
        ts_free((*state)[i].accl);
        ts_free((*state)[i].accl1);
        ts_free((*state)[i].accl2);
    }
    ts_free(*state);
    *state = NULL;
    *n_state = 0;
}
