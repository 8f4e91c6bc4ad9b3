/* test_print.c -- the print op (docs/observation.md#print-op): an identity in the forward
 * pass that logs its input with title and shape each time it runs, logs
 * the gradient in the backward pass as `<title>_gradient` (or
 * `Gradient___<name>` for an empty title), summarises past 1000 values with
 * `...` and edge items, and is never optimised away.
 *
 * The log is captured with ts_set_log_callback; printed numbers are parsed
 * back and compared with the anchored values of the same tensors. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

enum { B = 2, IN = 4, HID = 3, CLS = 2, D = 2, MAXV = 2048 };

/* ---- log capture */

typedef struct logbook {
    char **msg;
    int n, cap;
} logbook;
static logbook book;

static void capture(void *user, int level, const char *message) {
    logbook *lb = user;
    (void)level;
    if (lb->n == lb->cap) {
        lb->cap = lb->cap ? 2 * lb->cap : 64;
        lb->msg = realloc(lb->msg, sizeof *lb->msg * (size_t)lb->cap);
    }
    lb->msg[lb->n++] = strdup(message);
}

static void book_clear(void) {
    for (int i = 0; i < book.n; i++) free(book.msg[i]);
    book.n = 0;
}

/* The k-th message printed under `title` ("title: f32[..] values"), or NULL. */
static const char *printed(const char *title, int k) {
    size_t len = strlen(title);
    for (int i = 0; i < book.n; i++)
        if (strncmp(book.msg[i], title, len) == 0 && book.msg[i][len] == ':' && book.msg[i][len + 1] == ' ' && k-- == 0) return book.msg[i];
    return NULL;
}
static int count_printed(const char *title) {
    int n = 0;
    while (printed(title, n)) n++;
    return n;
}

/* Splits a print line into its shape text and the numbers after it. */
typedef struct parsed {
    char shape[64];
    float v[MAXV];
    int n;
    int ellipsis;
} parsed;

static int parse(const char *msg, const char *title, parsed *p) {
    memset(p, 0, sizeof *p);
    if (!msg) return 0;
    const char *s = msg + strlen(title) + 2, *sp = strchr(s, ' ');
    if (!sp || (size_t)(sp - s) >= sizeof p->shape) return 0;
    memcpy(p->shape, s, (size_t)(sp - s));
    for (s = sp; *s;) {
        if (strncmp(s, "...", 3) == 0) {
            p->ellipsis = 1;
            s += 3;
        } else if ((*s >= '0' && *s <= '9') || *s == '-') {
            char *end;
            double v = strtod(s, &end);
            if (end == s) return 0;
            if (p->n < MAXV) p->v[p->n++] = (float)v;
            s = end;
        } else
            s++;
    }
    return 1;
}

/* Printed values carry 4 decimals. */
static int values_match(const float *got, const float *want, int n) {
    for (int i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= 5.1e-5 + 1e-6 * fabs(want[i]))) return 0;
    return 1;
}

/* ---- models */

typedef struct net {
    ts_graph *g;
    ts_tensor *loss;
    const char *hidden_print, *logits_print; /* names of print nodes */
} net;

/* x -> [print "input"] -> fc1 -> [print "hidden"] -> relu (-> print "unused",
 * feeding nothing) -> fc2 -> [print ""] -> cross entropy. */
static int net_build(net *n, int with_prints) {
    memset(n, 0, sizeof *n);
    ts_graph *g = n->g = ts_graph_new(3);
    int64_t xs[] = {B, IN}, ys[] = {B};
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, xs), *y = ts_input(g, "labels", TS_I32, 1, ys);
    if (with_prints) x = ts_print(g, x, "input");
    ts_tensor *h = ts_linear(g, x, HID, "fc1");
    if (with_prints) {
        h = ts_print(g, h, "hidden");
        n->hidden_print = h ? ts_tensor_name(h) : NULL;
    }
    ts_tensor *r = ts_relu(g, h);
    if (with_prints) ts_print(g, r, "unused");
    ts_tensor *logits = ts_linear(g, r, CLS, "fc2");
    if (with_prints) {
        logits = ts_print(g, logits, "");
        n->logits_print = logits ? ts_tensor_name(logits) : NULL;
    }
    n->loss = ts_cross_entropy(g, logits, y);
    if (n->loss) ts_tensor_set_name(n->loss, "loss");
    return ts_graph_status(g) == TS_OK;
}

static ts_model *train_model(net *n, ts_options *o) {
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, n->g, n->loss, o, ts_sgd(0.0f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "compile a training model");
    if (st) ts_model_free(m), m = NULL;
    return m;
}

static ts_status run(ts_model *m, float *x, int32_t *y) {
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(x, 2, (int64_t[]){D * B, IN}), ts_array_i32(y, 1, (int64_t[]){D * B})};
    return ts_model_run(m, names, in, 2);
}

static const float *anchored(const ts_model *m, const char *name) {
    ts_array a;
    ts_status st = ts_model_anchored(m, name, &a);
    if (st) CHECK_OK(st, "anchored %s", name);
    return st ? NULL : a.data;
}

/* The k-th print of `title` has `shape` and the values want[0..n). */
static void expect_print(const char *title, int k, const char *shape, const float *want, int n) {
    parsed p;
    int ok = parse(printed(title, k), title, &p);
    CHECK(ok, "'%s' printed (#%d)", title, k);
    if (!ok || !want) return;
    CHECK(strcmp(p.shape, shape) == 0, "'%s' #%d shape %s (want %s)", title, k, p.shape, shape);
    CHECK(p.n == n && !p.ellipsis && values_match(p.v, want, n), "'%s' #%d prints the %d values of the tensor (got %d)", title, k, n, p.n);
}

static void test_training_prints(void) {
    net plain, pr;
    if (!net_build(&plain, 0) || !net_build(&pr, 1)) {
        CHECK(0, "build nets: %s", ts_last_error());
        return;
    }
    CHECK(pr.hidden_print && pr.logits_print && strcmp(pr.hidden_print, pr.logits_print) != 0, "print nodes are named ops (%s, %s)",
          pr.hidden_print ? pr.hidden_print : "?", pr.logits_print ? pr.logits_print : "?");
    /* same parameters in both graphs */
    const char *params[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    for (int k = 0; k < 4; k++) {
        ts_array a;
        ts_tensor_info(ts_graph_find(plain.g, params[k]), &a);
        CHECK_OK(ts_param_set(ts_graph_find(pr.g, params[k]), &a), "copy %s", params[k]);
    }
    char ghidden[128], glogits[128];
    snprintf(ghidden, sizeof ghidden, "Gradient___%s", pr.hidden_print);
    snprintf(glogits, sizeof glogits, "Gradient___%s", pr.logits_print);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_anchor(o, "loss_all", "loss", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "gw", "Gradient___fc1.weight", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "x", "x", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "relu", "Relu:0", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "h", "fc1/Add:0", TS_OUTPUT_ALL, 0);
    ts_model *mp = train_model(&plain, o);
    ts_options_anchor(o, "gh", ghidden, TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "gl", glogits, TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "l", pr.logits_print, TS_OUTPUT_ALL, 0);
    ts_model *mq = train_model(&pr, o);
    float x[D * B * IN];
    int32_t y[D * B];
    for (int i = 0; i < D * B * IN; i++) x[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    for (int i = 0; i < D * B; i++) y[i] = i % CLS;
    book_clear();
    if (!mp || !mq || run(mp, x, y) || run(mq, x, y)) {
        CHECK(0, "run: %s", ts_last_error());
        goto done;
    }
    /* identity */
    const float *l0 = anchored(mp, "loss_all"), *l1 = anchored(mq, "loss_all");
    const float *g0 = anchored(mp, "gw"), *g1 = anchored(mq, "gw");
    CHECK(l0 && l1 && memcmp(l0, l1, sizeof(float) * D) == 0, "loss with prints = loss without (%g, %g)", l0 ? (double)l0[0] : 0.0,
          l1 ? (double)l1[0] : 0.0);
    CHECK(g0 && g1 && memcmp(g0, g1, sizeof(float) * D * HID * IN) == 0, "Gradient___fc1.weight with prints = without");
    /* forward prints, once per micro-batch */
    const float *xa = anchored(mq, "x"), *ha = anchored(mq, "h"), *ra = anchored(mq, "relu"), *la = anchored(mq, "l");
    const float *gh = anchored(mq, "gh"), *gl = anchored(mq, "gl");
    CHECK(count_printed("input") == D && count_printed("hidden") == D && count_printed("unused") == D && count_printed(pr.logits_print) == D,
          "each forward print appears once per micro-batch (%d)", D);
    for (int k = 0; k < D; k++) {
        expect_print("input", k, "f32[2,4]", xa ? xa + k * B * IN : NULL, B * IN);
        expect_print("hidden", k, "f32[2,3]", ha ? ha + k * B * HID : NULL, B * HID);
        expect_print("unused", k, "f32[2,3]", ra ? ra + k * B * HID : NULL, B * HID);
        expect_print(pr.logits_print, k, "f32[2,2]", la ? la + k * B * CLS : NULL, B * CLS);
    }
    /* backward prints: the gradient of the print's output */
    CHECK(count_printed("hidden_gradient") == D, "'hidden_gradient' printed once per micro-batch");
    CHECK(count_printed(glogits) == D, "empty title: the gradient is printed as '%s'", glogits);
    for (int k = 0; k < D; k++) {
        expect_print("hidden_gradient", k, "f32[2,3]", gh ? gh + k * B * HID : NULL, B * HID);
        expect_print(glogits, k, "f32[2,2]", gl ? gl + k * B * CLS : NULL, B * CLS);
    }
    /* the backward print follows its forward prints of the same micro-batch */
    int first_fwd = -1, first_bwd = -1;
    for (int i = 0; i < book.n; i++) {
        if (first_fwd < 0 && strncmp(book.msg[i], "hidden: ", 8) == 0) first_fwd = i;
        if (first_bwd < 0 && strncmp(book.msg[i], "hidden_gradient: ", 17) == 0) first_bwd = i;
    }
    CHECK(first_fwd >= 0 && first_bwd > first_fwd, "'hidden_gradient' comes after 'hidden' (lines %d, %d)", first_fwd, first_bwd);
    /* in the order they were made: micro-batch k's lines before k + 1's
     * (a device's recorded run logs them after the run) */
    int order = 0, seen[2] = {0, 0};
    for (int i = 0; i < book.n; i++) {
        bool fwd = strncmp(book.msg[i], "hidden: ", 8) == 0, bwd = strncmp(book.msg[i], "hidden_gradient: ", 17) == 0;
        if (fwd && seen[0]++ != seen[1]) order++; /* a forward before the last one's backward */
        if (bwd && ++seen[1] != seen[0]) order++;
    }
    CHECK(order == 0 && seen[0] == D && seen[1] == D, "each micro-batch's 'hidden' and 'hidden_gradient' before the next one's");
    const char *dev = getenv("TS_DEVICE");
    if (dev && strcmp(dev, "cpu") != 0 && !getenv("TS_CUDA_GRAPHS")) { /* a device records runs with the print op */
        int64_t before = ts_counter_get("GraphCaptures") + ts_counter_get("GraphReplays"), refused = ts_counter_get("StepsNotRecorded.Print");
        book_clear();
        ts_status rst = run(mq, x, y);
        CHECK(rst == TS_OK && ts_counter_get("GraphCaptures") + ts_counter_get("GraphReplays") == before + 1 &&
                  ts_counter_get("StepsNotRecorded.Print") == refused && count_printed("hidden") == D && count_printed("hidden_gradient") == D,
              "on %s a run with print ops is recorded (one launch) and logs its %d lines after it", dev, 6 * D);
        const float *gh2 = anchored(mq, "gh"), *la2 = anchored(mq, "l");
        for (int k = 0; k < D; k++) { /* this run's values (the weights moved) */
            expect_print("hidden_gradient", k, "f32[2,3]", gh2 ? gh2 + k * B * HID : NULL, B * HID);
            expect_print(pr.logits_print, k, "f32[2,2]", la2 ? la2 + k * B * CLS : NULL, B * CLS);
        }
    }
    /* logs off: nothing printed, values unchanged */
    int level = ts_get_log_level();
    ts_set_log_level(TS_LOG_OFF);
    book_clear();
    ts_status st = run(mq, x, y);
    ts_set_log_level(level);
    CHECK(st == TS_OK && book.n == 0, "with logs off the print op prints nothing (%d lines)", book.n);
done:
    ts_model_free(mp);
    ts_model_free(mq);
    ts_options_free(o);
    ts_graph_free(plain.g);
    ts_graph_free(pr.g);
}

/* Inference of print(x) for x of `shape`: the printed line, parsed. */
static int print_inference(int ndim, const int64_t *shape, const float *x, parsed *p) {
    ts_graph *g = ts_graph_new(1);
    ts_tensor *in = ts_input(g, "x", TS_F32, ndim, shape);
    ts_tensor *out = ts_mean(g, ts_print(g, in, "big"));
    ts_model *m = NULL;
    ts_status st = ts_model_inference(&m, g, &out, 1, NULL);
    if (!st) st = ts_model_compile(m);
    book_clear();
    const char *names[1] = {"x"};
    ts_array a = ts_array_f32((float *)x, ndim, shape);
    if (!st) st = ts_model_run(m, names, &a, 1);
    CHECK_OK(st, "inference of print(x) over %lld values", (long long)ts_array_numel(&a));
    int ok = !st && count_printed("big") == 1 && parse(printed("big", 0), "big", p);
    ts_model_free(m);
    ts_graph_free(g);
    return ok;
}

static void test_summarised(void) {
    static float x[40 * 30];
    for (int i = 0; i < 40 * 30; i++) x[i] = (float)(i % 97) * 0.01f - 0.3f;
    parsed p;
    /* exactly 1000 values: all printed */
    if (print_inference(2, (int64_t[]){10, 100}, x, &p)) {
        CHECK(strcmp(p.shape, "f32[10,100]") == 0 && !p.ellipsis && p.n == 1000 && values_match(p.v, x, 1000),
              "1000 values: shape %s, all %d printed, no '...'", p.shape, p.n);
    } else
        CHECK(0, "print of 1000 values captured");
    /* 1200 values: summarised with 3 edge items per dimension */
    if (print_inference(2, (int64_t[]){40, 30}, x, &p)) {
        const float *last = x + 39 * 30 + 27;
        CHECK(strcmp(p.shape, "f32[40,30]") == 0 && p.ellipsis, "1200 values: shape %s and '...'", p.shape);
        CHECK(p.n < 1200 && p.n >= 12 && values_match(p.v, x, 3) && values_match(p.v + p.n - 3, last, 3),
              "1200 values: %d printed, starting with x[0,0..2] and ending with x[39,27..29]", p.n);
        int rows_ok = p.n == 36;
        for (int r = 0; rows_ok && r < 6; r++) {
            int row = r < 3 ? r : 34 + r;
            rows_ok = values_match(p.v + r * 6, x + row * 30, 3) && values_match(p.v + r * 6 + 3, x + row * 30 + 27, 3);
        }
        CHECK(rows_ok, "1200 values: rows 0-2 and 37-39, each with its first and last 3 values");
    } else
        CHECK(0, "print of 1200 values captured");
    /* 1001 values in one dimension */
    if (print_inference(1, (int64_t[]){1001}, x, &p)) {
        CHECK(p.ellipsis && p.n == 6 && values_match(p.v, x, 3) && values_match(p.v + 3, x + 998, 3),
              "1001 values: '...' between x[0..2] and x[998..1000] (%d printed)", p.n);
    } else
        CHECK(0, "print of 1001 values captured");
}

int main(void) {
    ts_set_log_callback(capture, &book);
    test_training_prints();
    test_summarised();
    ts_set_log_callback(NULL, NULL);
    book_clear();
    free(book.msg);
    return check_summary("test_print");
}
