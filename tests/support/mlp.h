/* mlp.h -- the header's worked example (the tutorial MLP) for tests:
 * x [B,1,28,28] -> Flatten -> fc1 320 -> Relu -> fc2 100 -> Relu -> fc3 10
 * -> LogSoftmax -> NllLoss named "loss", with labels [B]. */
#ifndef TS_TEST_MLP_H
#define TS_TEST_MLP_H

#include "tensorscope.h"

typedef struct mlp {
    ts_graph *g;
    ts_tensor *loss;
} mlp;

/* Builds it at micro-batch `batch` with parameters initialised from `seed`;
 * the graph's status (m->g may be NULL when out of memory). */
ts_status test_mlp_build(mlp *m, int64_t batch, uint64_t seed);

#endif
