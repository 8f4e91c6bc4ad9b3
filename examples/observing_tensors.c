/* observing_tensors.c -- PopTorch's "observing tensors" tutorial in C.
 *
 * Builds the tutorial MLP (784-320-100-10), lists every tensor name of the
 * compiled model, anchors the gradients of the six parameters, trains one
 * epoch of MNIST with SGD (lr 0.01, batch 1000) and plots the histogram of
 * log2|gradient| of the last step to ./GradientHistogram.png.
 *
 *     example_observing_tensors [MNIST_DIR]     (default: the repository's data/mnist) */
#include <stdio.h>
#include <stdlib.h>

#include "tensorscope.h"

/* the MNIST files shipped with the repository (the build passes their path) */
#ifndef TS_EXAMPLE_MNIST
#define TS_EXAMPLE_MNIST "data/mnist"
#endif

#define BATCH 1000

static const char *const GRADIENTS[] = {"Gradient___fc1.weight", "Gradient___fc1.bias", "Gradient___fc2.weight",
                                        "Gradient___fc2.bias",   "Gradient___fc3.weight", "Gradient___fc3.bias"};
#define N_GRADIENTS ((int)(sizeof GRADIENTS / sizeof GRADIENTS[0]))

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, ts_last_error());
    return 1;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : TS_EXAMPLE_MNIST;
    int rc = 1;
    ts_dataset *data = NULL;
    ts_loader *loader = NULL;
    ts_graph *g = NULL;
    ts_options *opts = NULL;
    ts_model *model = NULL;

    if (ts_dataset_load_mnist(&data, dir)) return fail("loading MNIST");
    ts_loader_config lc = {.batch_size = BATCH, .shuffle = 1, .seed = 0};
    if (ts_loader_new(&loader, data, lc)) {
        rc = fail("loader");
        goto done;
    }

    /* the tutorial's network: fc1..fc3 with relu, log_softmax and nll_loss */
    g = ts_graph_new(0);
    int64_t xs[] = {BATCH, 1, 28, 28}, ys[] = {BATCH};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *labels = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_flatten(g, x, 1);
    h = ts_relu(g, ts_linear(g, h, 320, "fc1"));
    h = ts_relu(g, ts_linear(g, h, 100, "fc2"));
    h = ts_log_softmax(g, ts_linear(g, h, 10, "fc3"), 1);
    ts_tensor *loss = ts_nll_loss(g, h, labels);
    if (loss) ts_tensor_set_name(loss, "loss");
    if (ts_graph_status(g)) {
        rc = fail("building the model");
        goto done;
    }

    opts = ts_options_new();
    if (!opts || ts_model_training(&model, g, loss, opts, ts_sgd(0.01f, 0.0f, 0.0f)) || ts_model_compile(model)) {
        rc = fail("compiling");
        goto done;
    }

    /* every tensor of the compiled model, the names anchors refer to */
    const char *const *names;
    size_t n_names;
    if (ts_model_tensor_names(model, &names, &n_names)) {
        rc = fail("tensor names");
        goto done;
    }
    printf("Tensor names (%zu):\n", n_names);
    for (size_t i = 0; i < n_names; i++) printf("  %s\n", names[i]);

    /* anchoring after compile recompiles once, before the first run */
    for (int i = 0; i < N_GRADIENTS; i++)
        if (ts_model_anchor(model, GRADIENTS[i], GRADIENTS[i], TS_OUTPUT_DEFAULT, 0)) {
            rc = fail(GRADIENTS[i]);
            goto done;
        }

    int64_t batches = ts_loader_batches(loader);
    double loss_sum = 0.0;
    int steps = 0;
    ts_array images, targets;
    while (ts_loader_next(loader, 1, &images, &targets) == TS_OK) {
        const char *in_names[2] = {"x", "labels"};
        ts_array in[2] = {images, targets};
        ts_array l;
        if (ts_model_run(model, in_names, in, 2) || ts_model_anchored(model, "loss", &l)) {
            rc = fail("training");
            goto done;
        }
        float value = *(const float *)l.data;
        loss_sum += value;
        steps++;
        printf("batch %d/%lld loss %.4f\n", steps, (long long)batches, (double)value);
    }
    printf("epoch 1: mean loss %.4f over %d batches\n", loss_sum / (steps ? steps : 1), steps);

    /* the gradients of the last step, as the tutorial plots them */
    ts_array grads[N_GRADIENTS];
    printf("Anchored gradients:\n");
    for (int i = 0; i < N_GRADIENTS; i++) {
        char shape[64];
        if (ts_model_anchored(model, GRADIENTS[i], &grads[i])) {
            rc = fail(GRADIENTS[i]);
            goto done;
        }
        printf("  %s %s\n", GRADIENTS[i], ts_array_shape_str(&grads[i], shape, sizeof shape));
    }
    if (ts_plot_gradient_histogram("GradientHistogram.png", grads, N_GRADIENTS)) {
        rc = fail("plotting");
        goto done;
    }
    printf("Saved histogram to ./GradientHistogram.png\n");
    rc = 0;

done:
    ts_model_free(model);
    ts_options_free(opts);
    ts_graph_free(g);
    ts_loader_free(loader);
    ts_dataset_free(data);
    return rc;
}
