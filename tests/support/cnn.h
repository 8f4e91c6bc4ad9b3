/* cnn.h -- the LeNet+BN CNN of `tensorscope train --model cnn` for tests and
 * benchmarks, built with the public API:
 * x [B,1,28,28] -> conv1 5x5 same (6, no bias) -> bn1 -> Relu -> MaxPool2d 2
 * -> conv2 5x5 (16, no bias) -> bn2 -> Relu -> MaxPool2d 2 -> Flatten
 * -> fc1 120 -> Relu -> fc2 84 -> Relu -> fc3 10 -> LogSoftmax -> NllLoss
 * "loss". */
#ifndef TS_TEST_CNN_H
#define TS_TEST_CNN_H

#include "tensorscope.h"

typedef struct cnn {
    ts_graph *g;
    ts_tensor *logp, *loss;
} cnn;

/* Builds it at micro-batch `batch`, parameters initialised from `seed`; the
 * graph's status (m->g may be NULL when out of memory). */
ts_status test_cnn_build(cnn *m, int64_t batch, uint64_t seed);

#endif
