/* fuzz_py_api.c -- the library calls that take strings and array
 * descriptors straight from Python (python/tensorscope): output-mode,
 * numeric-check, schedule and size names; anchor and watch specs; outfeed
 * names, filters and keys; pipeline split names; tensor names and scopes;
 * tensor lookups; array descriptors (dtype, ndim, shape) given to
 * ts_param_set, ts_array_shape_str, ts_compare_arrays and
 * ts_dataset_from_arrays. Then an inference model of a small graph is made
 * with the fuzzed anchors and watch, compiled, run once, and the fuzzed
 * anchor read back. Any input gives a result or an error with a message,
 * never a crash.
 *
 * Input: one byte of numbers (bits 0-2: anchor mode index, 3-5: watch
 * what, 6-7: periods), then NUL-separated strings: output mode, numeric
 * check, schedule, size, anchor short name, anchor pattern, watch pattern,
 * outfeed name, outfeed filter, outfeed key, pipeline split, tensor lookup,
 * scope name, then the rest as two ts_array descriptors (dtype, ndim, shape
 * bytes). A missing string is NULL where the API allows it, else "". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensorscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void quiet(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

enum { N_STR = 13, BUF_VALUES = 512 };

static ts_graph *g;
static ts_tensor *out, *w;
static double values[BUF_VALUES]; /* room for any array a checked call accepts */

/* A descriptor from the fuzzer's bytes, its data the zeroed buffer; NULL
 * when the shape (all dims positive) holds more than the buffer does:
 * reading past caller-owned memory is the caller's contract, not a bug. */
static ts_array *descriptor(const uint8_t **p, const uint8_t *end, ts_array *a) {
    memset(a, 0, sizeof *a);
    if (end - *p < 2) return NULL;
    a->dtype = (ts_dtype)((*p)[0] % 7); /* 5 and 6 are not dtypes */
    a->ndim = (int)((int8_t)(*p)[1]) % 10;
    *p += 2;
    int64_t elems = 1;
    for (int i = 0; i < TS_MAX_DIMS; i++) {
        if (end - *p < 2) break;
        a->shape[i] = (int16_t)((*p)[0] | (*p)[1] << 8);
        *p += 2;
    }
    for (int i = 0; i < a->ndim && i < TS_MAX_DIMS; i++) {
        if (a->shape[i] > 0 && __builtin_mul_overflow(elems, a->shape[i], &elems)) return NULL;
    }
    if (elems > BUF_VALUES) return NULL;
    a->data = values;
    return a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g) {
        ts_set_log_callback(quiet, NULL);
        g = ts_graph_new(1);
        ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){2, 3});
        out = ts_log_softmax(g, ts_relu(g, ts_linear(g, x, 4, "fc")), 1);
        ts_tensor_set_name(out, "out");
        w = ts_graph_find(g, "fc.weight");
        if (!w || ts_graph_status(g) != TS_OK) __builtin_trap();
    }
    if (size < 1 || size > 4096) return 0;
    char buf[4097];
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    const char *s[N_STR] = {0};
    char *p = buf, *end = buf + size - 1;
    int n = 0;
    for (; n < N_STR && p < end; n++) {
        s[n] = p;
        p += strlen(p) + 1;
    }
    const uint8_t *rest = (const uint8_t *)(p < end ? p : end);
    uint8_t nums = data[0];
    ts_status st;
#define CHECKED(call)                                             \
    do {                                                          \
        st = (call);                                              \
        if (st != TS_OK && !ts_last_error()[0]) __builtin_trap(); \
    } while (0)

    /* names parsed from strings */
    ts_output_mode mode = TS_OUTPUT_DEFAULT;
    ts_check_numerics cn;
    ts_lr_schedule_kind lk;
    uint64_t bytes;
    CHECKED(ts_output_mode_parse(s[0] ? s[0] : "", &mode));
    CHECKED(ts_check_numerics_parse(s[1] ? s[1] : "", &cn));
    CHECKED(ts_lr_schedule_parse(s[2] ? s[2] : "", &lk));
    CHECKED(ts_parse_size(s[3] ? s[3] : "", &bytes));

    /* options: anchors, watches, pipeline split names */
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    static const ts_output_mode modes[] = {TS_OUTPUT_DEFAULT, TS_OUTPUT_FINAL, TS_OUTPUT_EVERY_N,
                                           TS_OUTPUT_ALL, TS_OUTPUT_SUM, (ts_output_mode)5,
                                           (ts_output_mode)-1, TS_OUTPUT_ALL};
    int period = (nums >> 6) - 1; /* -1 .. 2 */
    CHECKED(ts_options_anchor(o, s[4], s[5] ? s[5] : "", modes[nums & 7], period));
    CHECKED(ts_options_watch(o, s[6] ? s[6] : "", (nums >> 3) & 7, period));
    const char *split[1] = {s[10] ? s[10] : ""};
    ts_options *po = ts_options_new();
    CHECKED(ts_options_set_pipeline(po, 2, split, 1));
    ts_options_free(po);

    /* outfeed queues: names, filters, keys */
    ts_outfeed *q = NULL;
    const char *filters[1] = {s[8] ? s[8] : ""};
    ts_outfeed_config qc = {s[7], TS_OUTFEED_LAST, 2, s[8] ? filters : NULL, s[8] ? 1 : 0, 1};
    CHECKED(ts_outfeed_new(&q, &qc));
    if (q) {
        ts_outfeed_accepts(q, s[9] ? s[9] : "");
        ts_outfeed_free(q);
    }
    ts_name_matches(s[5] ? s[5] : "", s[9] ? s[9] : "");

    /* the graph: lookups, scopes and names checked before anything is made */
    ts_tensor *found = ts_graph_find(g, s[11] ? s[11] : "");
    if (found && strcmp(ts_tensor_name(found), s[11]) != 0) __builtin_trap();
    char names[256];
    ts_graph_closest_names(g, s[11] ? s[11] : "", names, sizeof names);
    ts_graph *g2 = ts_graph_new(2);
    CHECKED(ts_scope_push(g2, s[12] ? s[12] : ""));
    ts_tensor *t2 = ts_input(g2, s[11] ? s[11] : "", TS_F32, 1, (int64_t[]){3});
    if (t2) CHECKED(ts_tensor_set_name(t2, s[4] ? s[4] : ""));
    ts_graph_free(g2);

    /* array descriptors */
    ts_array a, b;
    ts_array *pa = descriptor(&rest, (const uint8_t *)end, &a);
    ts_array *pb = descriptor(&rest, (const uint8_t *)end, &b);
    if (pa) {
        char shape[64];
        ts_array_shape_str(pa, shape, sizeof shape);
        CHECKED(ts_param_set(w, pa));
        if (pb) {
            ts_compare_result r;
            CHECKED(ts_compare_arrays(pa, pb, 1e-5, 1e-4, &r));
            ts_dataset *d = NULL;
            CHECKED(ts_dataset_from_arrays(&d, pa, pb));
            ts_dataset_free(d);
        }
    }

    /* a model with the fuzzed anchors and watch: compile, run, read back */
    ts_model *m = NULL;
    CHECKED(ts_model_inference(&m, g, &out, 1, o));
    if (st == TS_OK) CHECKED(ts_model_compile(m));
    if (st == TS_OK) {
        float xv[6] = {1, -2, 3, 0.5f, 0, -1};
        ts_array x = ts_array_f32(xv, 2, (int64_t[]){2, 3});
        const char *in[1] = {"x"};
        CHECKED(ts_model_run(m, in, &x, 1));
        ts_array got;
        if (st == TS_OK) CHECKED(ts_model_anchored(m, s[4] ? s[4] : "", &got));
    }
    ts_model_free(m);
    ts_options_free(o);
    return 0;
}
