/* model_pair.h -- what the tests that train one built-in model twice and
 * compare the two share (test_gpu_train: on the CPU and on a device;
 * test_replay: recorded and call by call): the device the test runs on,
 * the model built twice from the same seed with the same random inputs,
 * and how far the two copies' weights are apart. */
#ifndef TS_TEST_MODEL_PAIR_H
#define TS_TEST_MODEL_PAIR_H

#include "tensorscope.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct model_pair {
    const char *name;
    ts_graph *g[2];    /* the same model twice, the same initial weights */
    ts_tensor *loss[2];
    const char *in_names[2];
    ts_array in[2];    /* one set of inputs and labels for both (owned) */
} model_pair;

/* The device of TS_TEST_DEVICE ("cuda" unless set), or NULL when this
 * build or machine lacks it: the test then prints why and exits 77
 * (ctest's skip). */
const char *pair_device(const char *test);

/* The tutorial MLP at micro-batch `batch` with inputs for `samples`
 * samples; LeNet+BN likewise; the char GPT (2 layers, 2 heads, 32
 * channels, T 16, B 4, vocabulary 65). Random inputs from `seed`. */
ts_status pair_mlp(model_pair *p, int64_t batch, int64_t samples, uint64_t seed);
ts_status pair_cnn(model_pair *p, int64_t batch, int64_t samples, uint64_t seed);
ts_status pair_gpt(model_pair *p, uint64_t seed);
void pair_free(model_pair *p);

/* The largest max |a - b| / (max |a| + 1e-6) over the parameters and
 * buffers of the two copies (Inf where a NaN differs), its tensor's name
 * in worst. */
double pair_weights_error(const model_pair *p, char *worst, size_t n);

#endif
