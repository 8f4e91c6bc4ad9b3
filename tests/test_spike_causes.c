/* test_spike_causes.c -- the spike detector (ts_options_detect_spikes) on a
 * 3-layer MLP learning a fixed teacher, with causes planted at step N = 41
 * after 40 clean steps; each must be found within two steps (at step N or
 * N + 1) and name the layer the cause is in:
 * - a learning-rate jump (x300) on fc2's parameters alone (fc1 and fc3
 *   keep their own rate, ts_param_set_optimizer; fc2 follows the model's
 *   base rate, raised by ts_model_set_base_lr): layer fc2;
 * - an input batch scaled by 1e4: the input x;
 * - fc2.weight scaled by 30 between two runs (ts_param_set): layer fc2;
 * - clean runs of 1000 steps from three initialisations: no spike at all
 *   (the false-positive check, at the default k and window).
 * And what is done at a spike:
 * - skip: the weights after the spike's run are bit-identical to before it,
 *   while the clean run's steps change them; training goes on after it;
 * - stop: the run returns TS_ERR_SPIKE naming the step and the tensor, the
 *   weights untouched;
 * - npz (with libarchive): the held tensors written, the scaled batch
 *   among them with its values.
 * - with 2 steps a run, the watched (last) step's scaled batch is found
 *   once, and the run's other steps repeat nothing; a step stopped at and
 *   run again on a clean batch is judged afresh (no stale spike).
 * Every spike's step, signal, tensor, layer and z-score are printed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/check.h"

enum { B = 32, IN = 16, H = 32, OUT = 4, BATCHES = 64, N = 41 };

static float data_x[BATCHES][B * IN];
static int32_t data_y[BATCHES][B];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double gaussian(void) { return sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform()); }

/* Inputs from N(0, 1), labels the argmax of a fixed linear teacher. */
static void make_data(void) {
    double teacher[OUT][IN];
    for (int o = 0; o < OUT; o++)
        for (int i = 0; i < IN; i++) teacher[o][i] = gaussian();
    for (int b = 0; b < BATCHES; b++)
        for (int s = 0; s < B; s++) {
            double best = -1e300;
            for (int i = 0; i < IN; i++) data_x[b][s * IN + i] = (float)gaussian();
            for (int o = 0; o < OUT; o++) {
                double z = 0;
                for (int i = 0; i < IN; i++) z += teacher[o][i] * data_x[b][s * IN + i];
                if (z > best) best = z, data_y[b][s] = o;
            }
        }
}

typedef enum plant { PLANT_NONE, PLANT_LR, PLANT_INPUT, PLANT_WEIGHT } plant;
static const char *const plant_names[] = {"none", "a learning-rate jump on fc2", "an input batch x1e4", "fc2.weight x30"};

typedef struct outcome {
    int64_t spikes;        /* found over the whole run */
    int64_t first_step;    /* the first spike's step, 0: none */
    char tensor[128], layer[64], signal[16];
    double z;
    ts_status stop;        /* the status of the run the spike stopped (stop, npz) */
    char stop_message[2048];
    int weights_same;      /* skip/stop: fc2.weight and fc1.weight after the spike's run are those before it */
    int clean_moves;       /* the run before the plant changed fc2.weight */
    int64_t steps_after;   /* steps completed after the spike's run (training went on) */
    float x_npz0;          /* the npz's x[0] (npz action) */
} outcome;

static int64_t numel_of(const ts_array *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
    return n;
}

/* A copy of the parameter's values. */
static float *snapshot(ts_graph *g, const char *name, int64_t *n) {
    ts_array a;
    if (ts_tensor_info(ts_graph_find(g, name), &a)) return NULL;
    *n = numel_of(&a);
    float *c = malloc((size_t)*n * sizeof *c);
    if (c) memcpy(c, a.data, (size_t)*n * sizeof *c);
    return c;
}

static int same_as(ts_graph *g, const char *name, const float *was, int64_t n) {
    ts_array a;
    return was && ts_tensor_info(ts_graph_find(g, name), &a) == TS_OK && numel_of(&a) == n && memcmp(a.data, was, (size_t)n * sizeof *was) == 0;
}

static outcome train(plant what, ts_spike_action action, const char *npz, int steps, uint64_t seed) {
    outcome r = {0};
    const float lr = 0.05f;
    ts_graph *g = ts_graph_new(seed);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, H, "fc1"));
    h = ts_relu(g, ts_linear(g, h, H, "fc2"));
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, OUT, "fc3"), y);
    ts_tensor_set_name(loss, "loss");
    if (what == PLANT_LR) { /* fc1 and fc3 at their own rate: the base rate moves fc2's alone */
        ts_optimizer own = ts_sgd(lr, 0, 0);
        const char *others[] = {"fc1.weight", "fc1.bias", "fc3.weight", "fc3.bias"};
        for (int i = 0; i < 4; i++) ts_param_set_optimizer(ts_graph_find(g, others[i]), &own);
    }
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    CHECK_OK(ts_options_detect_spikes(o, TS_SPIKE_K, TS_SPIKE_WINDOW, action, npz), "detect spikes (%s, %s)", plant_names[what],
             ts_spike_action_name(action));
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(lr, 0, 0));
    ts_options_free(o);
    if (st) {
        CHECK_OK(st, "a training model");
        ts_graph_free(g);
        return r;
    }
    const char *names[2] = {"x", "labels"};
    float batch[B * IN];
    for (int step = 1; step <= steps; step++) {
        int b = (step - 1) % BATCHES;
        memcpy(batch, data_x[b], sizeof batch);
        if (step == N && what == PLANT_INPUT)
            for (int i = 0; i < B * IN; i++) batch[i] *= 1e4f;
        if (step == N && what == PLANT_LR) ts_model_set_base_lr(m, lr * 300.0);
        if (step == N + 1 && what == PLANT_LR) ts_model_set_base_lr(m, lr);
        if (step == N && what == PLANT_WEIGHT) {
            ts_array a;
            ts_tensor *w = ts_graph_find(g, "fc2.weight");
            ts_tensor_info(w, &a);
            int64_t n = numel_of(&a);
            float *v = malloc((size_t)n * sizeof *v);
            for (int64_t i = 0; i < n; i++) v[i] = 30.0f * ((const float *)a.data)[i];
            ts_array nv = ts_array_f32(v, a.ndim, a.shape);
            CHECK_OK(ts_param_set(w, &nv), "fc2.weight x30 before step %d", N);
            free(v);
        }
        int64_t n1 = 0, n2 = 0;
        float *w1 = snapshot(g, "fc1.weight", &n1), *w2 = snapshot(g, "fc2.weight", &n2);
        int64_t before = ts_model_spike(m, NULL);
        ts_array in[2] = {ts_array_f32(batch, 2, (int64_t[]){B, IN}), {.dtype = TS_I32, .ndim = 1, .shape = {B}, .data = data_y[b]}};
        st = ts_model_run(m, names, in, 2);
        if (step == N - 1) r.clean_moves = !same_as(g, "fc2.weight", w2, n2);
        ts_spike sp;
        int64_t now = ts_model_spike(m, &sp);
        if (now > before && !r.first_step) {
            r.first_step = sp.step;
            snprintf(r.tensor, sizeof r.tensor, "%s", sp.tensor);
            snprintf(r.layer, sizeof r.layer, "%s", sp.layer);
            snprintf(r.signal, sizeof r.signal, "%s", sp.signal);
            r.z = sp.z;
            r.weights_same = same_as(g, "fc1.weight", w1, n1) && same_as(g, "fc2.weight", w2, n2);
            printf("     %s, %s: spike at step %lld (planted at %d): %s of '%s' (layer %s), z %.3g, %d signals crossed\n", plant_names[what],
                   ts_spike_action_name(action), (long long)sp.step, N, sp.signal, sp.tensor, sp.layer, sp.z, sp.crossed);
        }
        free(w1), free(w2);
        if (st == TS_ERR_SPIKE) {
            r.stop = st;
            snprintf(r.stop_message, sizeof r.stop_message, "%s", ts_last_error());
            break;
        }
        if (st) {
            CHECK_OK(st, "run %d", step);
            break;
        }
    }
    r.spikes = ts_model_spike(m, NULL);
    r.steps_after = r.first_step ? ts_model_steps(m) - r.first_step : 0;
    ts_model_free(m);
    ts_graph_free(g);
    return r;
}

/* The same MLP with D optimizer steps a run, plain SGD; NULL on failure. */
static ts_model *model_with(ts_graph **g, int D, ts_spike_action action) {
    *g = ts_graph_new(7);
    ts_tensor *x = ts_input(*g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(*g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(*g, ts_linear(*g, x, H, "fc1"));
    h = ts_relu(*g, ts_linear(*g, h, H, "fc2"));
    ts_tensor *loss = ts_cross_entropy(*g, ts_linear(*g, h, OUT, "fc3"), y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_options_set_device_iterations(o, D);
    ts_options_detect_spikes(o, TS_SPIKE_K, TS_SPIKE_WINDOW, action, NULL);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, *g, loss, o, ts_sgd(0.05f, 0, 0)), "a training model of %d steps a run", D);
    ts_options_free(o);
    return m;
}

/* Run r of D steps: batches r*D .. r*D + D - 1, the first of them x `scale`. */
static ts_status run_steps(ts_model *m, int D, int r, float scale) {
    static float xs[4 * B * IN];
    static int32_t ys[4 * B];
    for (int d = 0; d < D; d++) {
        int b = (r * D + d) % BATCHES;
        for (int i = 0; i < B * IN; i++) xs[d * B * IN + i] = data_x[b][i] * (d == 0 ? scale : 1.0f);
        memcpy(ys + d * B, data_y[b], sizeof data_y[b]);
    }
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){D * B, IN}), {.dtype = TS_I32, .ndim = 1, .shape = {D * B}, .data = ys}};
    return ts_model_run(m, names, in, 2);
}

/* With 2 steps a run the watches summarise each run's last step: it is
 * judged, once; the run's other step has nothing new and repeats nothing.
 * After a stop, the step run again on a clean batch is judged afresh. */
static void runs_and_restarts(void) {
    ts_graph *g;
    ts_model *m = model_with(&g, 2, TS_SPIKE_SKIP);
    int r = 0;
    for (; m && r < 30; r++) CHECK(run_steps(m, 2, r, 1.0f) == TS_OK && ts_model_spike(m, NULL) == 0, "2 steps a run: run %d clean", r + 1);
    ts_spike sp;
    if (m) {
        int b = (r * 2 + 1) % BATCHES; /* the run's last step's batch, which its watches summarise, x1e4 */
        float keep[B * IN];
        memcpy(keep, data_x[b], sizeof keep);
        for (int i = 0; i < B * IN; i++) data_x[b][i] *= 1e4f;
        CHECK_OK(run_steps(m, 2, r, 1.0f), "a run whose last step's batch is x1e4");
        memcpy(data_x[b], keep, sizeof keep);
        int64_t n = ts_model_spike(m, &sp);
        CHECK(n == 1 && sp.step == 2 * (r + 1) && strcmp(sp.tensor, "x") == 0,
              "2 steps a run: the scaled batch of step %d found once, at that step (%lld spikes, step %lld, '%s')", 2 * (r + 1), (long long)n,
              (long long)sp.step, sp.tensor);
        CHECK_OK(run_steps(m, 2, ++r, 1.0f), "a clean run after it (the spike's update skipped)");
        CHECK(ts_model_spike(m, NULL) == 1, "nothing repeated at the steps after it (%lld spikes)", (long long)ts_model_spike(m, NULL));
    }
    ts_model_free(m);
    ts_graph_free(g);

    m = model_with(&g, 1, TS_SPIKE_STOP);
    for (r = 0; m && r < 40; r++) run_steps(m, 1, r, 1.0f);
    if (m) {
        CHECK(run_steps(m, 1, r, 1e4f) == TS_ERR_SPIKE && ts_model_spike(m, &sp) == 1 && sp.step == 41, "stop at the scaled batch of step 41");
        CHECK(run_steps(m, 1, r, 1.0f) == TS_OK && ts_model_spike(m, NULL) == 1 && ts_model_steps(m) == 41,
              "step 41 again on its clean batch: judged afresh, no spike, trained (%lld spikes, %lld steps)", (long long)ts_model_spike(m, NULL),
              (long long)ts_model_steps(m));
    }
    ts_model_free(m);
    ts_graph_free(g);
}

static void expect(const outcome *r, plant what, const char *layer, const char *tensor) {
    CHECK(r->first_step >= N && r->first_step <= N + 1, "%s: found within two steps of step %d (at step %lld)", plant_names[what], N,
          (long long)r->first_step);
    CHECK(strcmp(r->layer, layer) == 0 && (!tensor || strcmp(r->tensor, tensor) == 0) && fabs(r->z) >= TS_SPIKE_K,
          "%s: the first mover is in layer %s (%s of '%s', layer %s, z %.3g)", plant_names[what], layer, r->signal, r->tensor, r->layer, r->z);
}

int main(void) {
    make_data();
    for (uint64_t seed = 1; seed <= 3; seed++) {
        outcome clean = train(PLANT_NONE, TS_SPIKE_CONTINUE, NULL, 1000, seed);
        CHECK(clean.spikes == 0, "a clean run of 1000 steps (initialisation seed %d): no spike (%lld found; the first at step %lld, %s of '%s', z %.3g)",
              (int)seed, (long long)clean.spikes, (long long)clean.first_step, clean.signal, clean.tensor, clean.z);
    }

    outcome lr = train(PLANT_LR, TS_SPIKE_CONTINUE, NULL, N + 4, 7);
    expect(&lr, PLANT_LR, "fc2", NULL);
    outcome in = train(PLANT_INPUT, TS_SPIKE_CONTINUE, NULL, N + 4, 7);
    expect(&in, PLANT_INPUT, "x", "x");
    outcome wt = train(PLANT_WEIGHT, TS_SPIKE_CONTINUE, NULL, N + 4, 7);
    expect(&wt, PLANT_WEIGHT, "fc2", "fc2.weight");

    outcome skip = train(PLANT_INPUT, TS_SPIKE_SKIP, NULL, N + 4, 7);
    expect(&skip, PLANT_INPUT, "x", "x");
    CHECK(skip.clean_moves && skip.weights_same, "skip: a clean step moves fc2.weight (%d); the spike's step leaves fc1 and fc2 bit-identical (%d)",
          skip.clean_moves, skip.weights_same);
    CHECK(skip.stop == TS_OK && skip.steps_after == 4, "skip: training goes on after it (%lld more steps)", (long long)skip.steps_after);

    outcome stop = train(PLANT_WEIGHT, TS_SPIKE_STOP, NULL, N + 4, 7);
    expect(&stop, PLANT_WEIGHT, "fc2", "fc2.weight");
    CHECK(stop.stop == TS_ERR_SPIKE && strstr(stop.stop_message, "spike at step 41") && strstr(stop.stop_message, "'fc2.weight'") &&
              stop.weights_same,
          "stop: TS_ERR_SPIKE before the update, the weights as they were: %s", stop.stop_message);

    if (ts_has_feature("npz")) {
        char path[] = "/tmp/test_spike_causes_XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0) close(fd);
        outcome np = train(PLANT_INPUT, TS_SPIKE_NPZ, path, N + 4, 7);
        expect(&np, PLANT_INPUT, "x", "x");
        ts_npz *z = NULL;
        const ts_array *hx = NULL;
        CHECK(np.stop == TS_ERR_SPIKE && ts_npz_load(path, &z) == TS_OK && (hx = ts_npz_find(z, "x")) && numel_of(hx) == B * IN &&
                  ((const float *)hx->data)[0] == 1e4f * data_x[(N - 1) % BATCHES][0] && ts_npz_find(z, "Gradient___fc2.weight") &&
                  ts_npz_find(z, "fc2.weight"),
              "npz: the step's held tensors written (x is the batch x1e4, the gradients and weights beside it): %s", np.stop_message);
        ts_npz_free(z);
        unlink(path);
    } else {
        printf("skip the npz action: this build has no npz (libarchive)\n");
    }

    runs_and_restarts();

    ts_options *o = ts_options_new();
    CHECK(ts_options_detect_spikes(o, -1, 32, TS_SPIKE_CONTINUE, NULL) == TS_ERR_INVALID_ARGUMENT &&
              ts_options_detect_spikes(o, 8, 1, TS_SPIKE_CONTINUE, NULL) == TS_ERR_INVALID_ARGUMENT &&
              ts_options_detect_spikes(o, 8, 32, TS_SPIKE_NPZ, NULL) == TS_ERR_INVALID_ARGUMENT &&
              ts_options_detect_spikes(o, 8, 32, TS_SPIKE_STOP, "a.npz") == TS_ERR_INVALID_ARGUMENT,
          "a negative k, a window under 2, npz without a file, a file without npz: refused (%s)", ts_last_error());
    ts_spike_action a;
    CHECK(ts_spike_action_parse("SKIP", &a) == TS_OK && a == TS_SPIKE_SKIP && ts_spike_action_parse("hop", &a) == TS_ERR_INVALID_ARGUMENT,
          "actions parse by name: %s", ts_last_error());
    ts_options_free(o);
    return check_summary("test_spike_causes");
}
