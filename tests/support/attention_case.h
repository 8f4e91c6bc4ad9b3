/* attention_case.h -- what the attention tests share: q, k and v
 * parameters of one shape set from one buffer (q's values, then k's, then
 * v's), so that a graph and its twin start alike; whether a run timed an
 * op (the one pass times Attention and no Softmax). Header-only. */
#ifndef TS_TEST_ATTENTION_CASE_H
#define TS_TEST_ATTENTION_CASE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

static inline void qkv_params(ts_graph *g, const int64_t shape[4], const float *init, ts_tensor *x[3]) {
    static const char *const names[3] = {"q", "k", "v"};
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    for (int i = 0; i < 3; i++) {
        x[i] = ts_param(g, names[i], 4, shape);
        ts_array a = ts_array_f32((float *)(init + i * n), 4, shape);
        CHECK_OK(ts_param_set(x[i], &a), "set %s", names[i]);
    }
}

/* whether the metrics since the last reset time op `op` */
static inline bool timed(const char *op) {
    char *r = ts_metrics_report(), name[64];
    snprintf(name, sizeof name, "OpTime.%s", op);
    bool yes = r && strstr(r, name) != NULL;
    free(r);
    return yes;
}

#endif
