/* outfeed.c -- Graphcore's outfeed example in C: two outfeed queues stream
 * tensors out of training while it runs.
 *
 *   - "activations": the layers' outputs, marked on the graph with
 *     ts_outfeed_add under keys fc1/Relu, fc2/Relu, fc3/LogSoftmax; LAST
 *     mode keeps only the latest record of each key.
 *   - "gradients": every parameter gradient `<param>_grad`, either as
 *     computed for each micro-batch (pre-accumulated: D x A records per
 *     parameter per run) or once per optimizer step (accumulated: D).
 *
 * After each run the host drains both queues and prints the stats table of
 * every record; each epoch ends with its mean loss.
 *
 *     example_outfeed [--pre-accumulated | --accumulated] [--data DIR]
 *
 * DIR defaults to the repository's data/mnist, from any directory.
 *
 * Without a mode flag both modes run in turn, a few steps each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorscope.h"

/* the MNIST files shipped with the repository (the build passes their path) */
#ifndef TS_EXAMPLE_MNIST
#define TS_EXAMPLE_MNIST "data/mnist"
#endif

enum { BATCH = 32, D = 2, A = 2, RUNS_PER_EPOCH = 3, EPOCHS = 2, MAX_KEYS = 16 };

typedef struct keyset {
    char key[MAX_KEYS][64];
    char shape[MAX_KEYS][64];
    int n;
} keyset;

static void keyset_add(keyset *k, const ts_outfeed_record *r) {
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->key[i], r->key) == 0) return;
    if (k->n == MAX_KEYS) return;
    snprintf(k->key[k->n], sizeof k->key[0], "%s", r->key);
    ts_array_shape_str(&r->array, k->shape[k->n], sizeof k->shape[0]);
    k->n++;
}

/* Drains a queue: one table row per record; returns the number of records. */
static int print_records(ts_outfeed *q, keyset *keys, int *index) {
    ts_outfeed_record r;
    int n = 0;
    char name[96], row[256];
    while (ts_outfeed_dequeue(q, &r, 0) == TS_OK) {
        ts_summary s;
        if (r.array.dtype != TS_F32 || ts_summarize_f32(r.array.data, ts_array_numel(&r.array), TS_WATCH_STATS, &s)) continue;
        keyset_add(keys, &r);
        snprintf(name, sizeof name, "%s[%lld]", r.key, (long long)r.sample);
        printf("%s\n", ts_stats_table_row((*index)++, name, &s.stats, row, sizeof row));
        n++;
    }
    return n;
}

static void print_keys(const char *title, const keyset *k) {
    printf("%s:\n", title);
    for (int i = 0; i < k->n; i++) printf("  %s %s\n", k->key[i], k->shape[i]);
}

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, ts_last_error());
    return 1;
}

/* Trains a fresh model for EPOCHS x RUNS_PER_EPOCH runs, streaming
 * gradients the way `pre_accumulated` says. */
static int train(const ts_dataset *data, int pre_accumulated) {
    const char *mode = pre_accumulated ? "pre-accumulated" : "accumulated";
    printf("=== gradient capture: %s (D=%d, A=%d: %d gradient records per parameter per run) ===\n", mode, D, A,
           pre_accumulated ? D * A : D);
    int rc = 1;
    ts_outfeed *acts = NULL, *grads = NULL;
    ts_graph *g = NULL;
    ts_options *o = NULL;
    ts_model *m = NULL;
    ts_loader *loader = NULL;
    ts_outfeed_config ac = {.name = "activations", .mode = TS_OUTFEED_LAST, .depth = 8};
    ts_outfeed_config gc = {.name = "gradients", .mode = TS_OUTFEED_ALL, .depth = 64};
    if (ts_outfeed_new(&acts, &ac) || ts_outfeed_new(&grads, &gc)) {
        rc = fail("outfeed queues");
        goto done;
    }

    g = ts_graph_new(1);
    int64_t xs[] = {BATCH, 1, 28, 28}, ys[] = {BATCH};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *labels = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_relu(g, ts_linear(g, ts_flatten(g, x, 1), 256, "fc1"));
    ts_outfeed_add(g, acts, "fc1/Relu", h);
    h = ts_relu(g, ts_linear(g, h, 128, "fc2"));
    ts_outfeed_add(g, acts, "fc2/Relu", h);
    h = ts_log_softmax(g, ts_linear(g, h, 10, "fc3"), 1);
    ts_outfeed_add(g, acts, "fc3/LogSoftmax", h);
    ts_tensor *loss = ts_nll_loss(g, h, labels);
    if (loss) ts_tensor_set_name(loss, "loss");
    if (ts_graph_status(g)) {
        rc = fail("building the model");
        goto done;
    }

    o = ts_options_new();
    if (!o || ts_options_set_device_iterations(o, D) || ts_options_set_gradient_accumulation(o, A) ||
        ts_options_outfeed_gradients(o, grads, pre_accumulated) || ts_options_anchor(o, "losses", "loss", TS_OUTPUT_ALL, 0) ||
        ts_model_training(&m, g, loss, o, ts_sgd(0.05f, 0.9f, 0.0f)) || ts_model_compile(m)) {
        rc = fail("compiling");
        goto done;
    }
    /* a small slice of the data set: a few seconds for both modes */
    ts_loader_config lc = {.batch_size = BATCH, .count = BATCH * D * A * RUNS_PER_EPOCH, .shuffle = 1, .seed = 0, .drop_last = 1};
    if (ts_loader_new(&loader, data, lc)) {
        rc = fail("loader");
        goto done;
    }

    keyset act_keys = {.n = 0}, grad_keys = {.n = 0};
    char header[256];
    for (int epoch = 1; epoch <= EPOCHS; epoch++) {
        double loss_sum = 0.0;
        int n_loss = 0, run = 0;
        ts_array images, targets;
        while (ts_loader_next(loader, D * A, &images, &targets) == TS_OK) {
            const char *names[2] = {"x", "labels"};
            ts_array in[2] = {images, targets}, losses;
            if (ts_model_run(m, names, in, 2) || ts_model_anchored(m, "losses", &losses)) {
                rc = fail("training");
                goto done;
            }
            for (int64_t i = 0; i < losses.shape[0]; i++, n_loss++) loss_sum += ((const float *)losses.data)[i];
            run++;
            printf("epoch %d run %d (steps %lld):\n%s\n", epoch, run, (long long)ts_model_steps(m),
                   ts_stats_table_header(header, sizeof header));
            int index = 0;
            int na = print_records(acts, &act_keys, &index);
            int ng = print_records(grads, &grad_keys, &index);
            printf("(%d activation records, %d gradient records)\n", na, ng);
            if (epoch == 1 && run == 1) {
                print_keys("Activation keys", &act_keys);
                print_keys(pre_accumulated ? "Gradient keys (pre-accumulated)" : "Gradient keys (accumulated)", &grad_keys);
            }
        }
        printf("epoch %d: mean loss %.4f\n", epoch, loss_sum / (n_loss ? n_loss : 1));
    }
    ts_outfeed_counts c = ts_outfeed_get_counts(grads);
    printf("gradients queue: %lld records enqueued, %lld dequeued, %lld dropped\n", (long long)c.enqueued, (long long)c.dequeued,
           (long long)c.dropped);
    rc = 0;

done:
    ts_loader_free(loader);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    ts_outfeed_free(acts);
    ts_outfeed_free(grads);
    return rc;
}

int main(int argc, char **argv) {
    const char *dir = TS_EXAMPLE_MNIST;
    int pre = 1, acc = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pre-accumulated") == 0) pre = 1, acc = 0;
        else if (strcmp(argv[i], "--accumulated") == 0) pre = 0, acc = 1;
        else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) dir = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--pre-accumulated | --accumulated] [--data DIR]\n", argv[0]);
            return 2;
        }
    }
    ts_dataset *data = NULL;
    if (ts_dataset_load_mnist(&data, dir)) return fail("loading MNIST");
    int rc = 0;
    if (pre) rc |= train(data, 1);
    if (acc) rc |= train(data, 0);
    ts_dataset_free(data);
    return rc;
}
