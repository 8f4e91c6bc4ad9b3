/* optim.h -- one optimizer step of one parameter, as every backend
 * computes it: the state a parameter keeps, the constants of a step and the
 * CPU's update (graph/optim.c); a device's twin is its backend's
 * opt_update. Plain C, readable by a device compiler. */
#ifndef TS_OPTIM_H
#define TS_OPTIM_H

#include "tensorscope.h"

#include <stdbool.h>
#include <stdint.h>

struct ts_stats_stream;
struct ts_stats_partial;

typedef struct ts_opt_state { /* per parameter, survives recompiles */
    int node;
    float *accl, *accl1, *accl2; /* momentum / moments */
    float step;
} ts_opt_state;

/* One step of one parameter: ts_opt_begin once, then ts_opt_update over
 * [0, n) in one call or in pieces (the executor interleaves summaries and
 * splits big parameters over its pool). */
typedef struct ts_opt_consts {
    bool first;                 /* the first step (SGD momentum starts from g) */
    float step_size, bc2_sqrt;  /* Adam's bias corrections */
    float bc1;                  /* 1 - beta1^t */
} ts_opt_consts;
ts_opt_consts ts_opt_begin(const ts_optimizer *o, ts_opt_state *s);
void ts_opt_update(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, const float *grad, int64_t begin,
                   int64_t end);
/* ts_opt_update over [begin, end) that also summarises, from registers, the
 * gradient before the update (into gs, then gp at the flush) and the
 * parameter after it (ps, pp), and zeroes the gradient when `clear`. The
 * parameter comes out bit-identical to ts_opt_update's. gp or pp NULL: that
 * summary is not wanted. sq non-NULL: in the same pass, adds the sums of
 * squares ts_opt_update_norms adds (a stability watch beside the
 * summaries pays for one pass, not two). */
void ts_opt_update_summarised(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, float *grad, int64_t begin,
                              int64_t end, bool clear, struct ts_stats_stream *gs, struct ts_stats_partial *gp,
                              struct ts_stats_stream *ps, struct ts_stats_partial *pp, double sq[4]);

/* ts_opt_update over [begin, end) that also adds, from registers, the
 * sums of squares of the gradient (sq[0]), of the parameter before the
 * update (sq[1]), of the update w_after - w_before (sq[2]) and, for Adam,
 * of its direction m^ / (sqrt(v^) + eps) (sq[3]); zeroes the gradient when
 * `clear` (stability signals, compile/stability.h). The parameter comes out
 * as ts_opt_update's. */
void ts_opt_update_norms(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, float *grad, int64_t begin, int64_t end,
                         bool clear, double sq[4]);

/* The settings `param` is updated with: its own (ts_param_set_optimizer)
 * or the model's `model`. The rate in its own is its base rate, which the
 * model's schedule scales (the executor's update_param). */
const ts_optimizer *ts_param_optimizer(const ts_optimizer *model, const ts_tensor *param);
/* TS_OK, or an error that says which setting is out of range. */
ts_status ts_optimizer_check(const ts_optimizer *o);
/* "SGD", "Adam", "AdamW". */
const char *ts_optimizer_name(ts_optimizer_kind k);

#endif
