/* test_bool.c -- bool graph tensors end to end: comparisons of floats and
 * of integers, IsNaN, ts_cast to bool (non-zero and NaN true, as numpy's
 * astype(bool)), And, Or, Xor and Not of bools, a bool input fed numpy's
 * one-byte bools, a bool constant, bool conditions choosing floats,
 * integers and bools (Where), a bool mask (MaskedFill), the ops that move
 * values keeping bool, and casts from bool to f32, i32 and i64 (1 or 0).
 * The expected values are computed here in C. Every bool tensor is
 * returned as one-byte bools (anchors, outfeed records, a saved .npy of
 * numpy's |b1); a watch's mean is the fraction that is true. Arithmetic on
 * a bool is refused with an error that says to ts_cast it, as is a bool
 * where indices go; a bool input fed a value other than 0 or 1 is refused
 * naming it. Also run on the staged and CUDA devices (ctest's _staged,
 * _cuda). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define B 2
#define N 5
#define BN (B * N)

/* an anchored bool array's bytes, or NULL where it is not bool of n elements */
static const uint8_t *bools(ts_model *m, const ts_tensor *t, int64_t n) {
    ts_array a;
    if (ts_model_anchored(m, ts_tensor_name(t), &a) || a.dtype != TS_BOOL || ts_array_numel(&a) != n) return NULL;
    return a.data;
}

static bool is_bool(const ts_tensor *t) {
    ts_array info;
    return t && !ts_tensor_info(t, &info) && info.dtype == TS_BOOL;
}

int main(void) {
    float x[BN] = {0.25f, -1.0f, 0.0f, NAN, 3.0f, 0.75f, 0.5f, -0.0f, INFINITY, 0.1f};
    int64_t ids[BN] = {7, ((int64_t)1 << 40) + 1, 0, -3, 7, 1, 7, 2, (int64_t)1 << 40, 0};
    uint8_t mask[BN] = {1, 0, 0, 1, 1, 0, 1, 0, 0, 1};
    uint8_t flags[N] = {1, 1, 0, 0, 1};
    ts_graph *g = ts_graph_new(1);
    ts_tensor *xi = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, N}), *ii = ts_input(g, "ids", TS_I64, 2, (int64_t[]){B, N}),
              *mi = ts_input(g, "mask", TS_BOOL, 2, (int64_t[]){B, N});
    float half = 0.5f;
    int64_t seven = 7;
    ts_tensor *h = ts_constant(g, "half", &(ts_array){.dtype = TS_F32, .ndim = 1, .shape = {1}, .data = &half});
    ts_tensor *s7 = ts_constant(g, "seven", &(ts_array){.dtype = TS_I64, .ndim = 1, .shape = {1}, .data = &seven});
    ts_tensor *fl = ts_constant(g, "flags", &(ts_array){.dtype = TS_BOOL, .ndim = 1, .shape = {N}, .data = flags});
    ts_tensor *lt = ts_binary(g, "Less", xi, h), *eq = ts_binary(g, "Equal", ii, s7), *nan = ts_unary(g, "IsNaN", xi, 0, 0);
    ts_tensor *both = ts_binary(g, "And", lt, ts_unary(g, "Not", eq, 0, 0)), *any = ts_binary(g, "Or", both, mi);
    ts_tensor *xo = ts_binary(g, "Xor", mi, fl); /* a bool constant broadcast */
    ts_tensor *xb = ts_cast(g, xi, TS_BOOL), *ib = ts_cast(g, ii, TS_BOOL);
    ts_tensor *zero = ts_scale(g, xi, 0.0f);
    ts_tensor *sel = ts_where(g, any, xi, h), *seli = ts_where(g, mi, ii, s7), *selb = ts_where(g, nan, mi, eq);
    ts_tensor *filled = ts_masked_fill(g, xi, mi, -2.0f);
    ts_tensor *tr = ts_transpose(g, any, 0, 1), *sl = ts_slice(g, any, 1, 1, 3), *cat = ts_concat(g, (ts_tensor *[]){lt, mi}, 2, 1);
    ts_tensor *fa = ts_cast(g, any, TS_F32), *i32 = ts_cast(g, any, TS_I32), *i64 = ts_cast(g, mi, TS_I64);
    ts_tensor *count = ts_reduce_sum(g, fa, 1, (int[]){1}, 0); /* a mask's count: a cast, then numbers */
    ts_tensor *outs[] = {lt, eq, nan, both, any, xo, xb, ib, sel, seli, selb, filled, tr, sl, cat, fa, i32, i64, count, zero};
    int n_outs = (int)(sizeof outs / sizeof outs[0]);
    bool built = true;
    for (int i = 0; i < n_outs; i++) built = built && outs[i];
    CHECK(built, "comparisons, logic, casts, Where and the movers build on bools: %s", built ? "" : ts_last_error());
    if (!built) return check_summary("test_bool");
    bool all_bool = true;
    ts_tensor *bool_outs[] = {mi, fl, lt, eq, nan, both, any, xo, xb, ib, selb, tr, sl, cat};
    for (size_t i = 0; i < sizeof bool_outs / sizeof *bool_outs; i++) all_bool = all_bool && is_bool(bool_outs[i]);
    ts_array info;
    CHECK(all_bool && !ts_tensor_info(sel, &info) && info.dtype == TS_F32 && !ts_tensor_info(seli, &info) && info.dtype == TS_I64 &&
              !ts_tensor_info(i32, &info) && info.dtype == TS_I32 && !ts_tensor_info(i64, &info) && info.dtype == TS_I64,
          "comparisons, predicates, logic, bool casts and bool moves are bool; Where keeps its values' dtype; casts from bool theirs");

    /* what bool refuses: arithmetic, and standing for indices */
    ts_graph *g2 = ts_graph_new(1);
    ts_tensor *b2 = ts_input(g2, "b", TS_BOOL, 1, (int64_t[]){3}), *d2 = ts_input(g2, "d", TS_F32, 1, (int64_t[]){3});
    CHECK(!ts_add(g2, b2, d2) && strstr(ts_last_error(), "bool") && strstr(ts_last_error(), "ts_cast"), "bool + f32 is refused: %s",
          ts_last_error());
    ts_graph_free(g2);
    g2 = ts_graph_new(1);
    b2 = ts_input(g2, "b", TS_BOOL, 1, (int64_t[]){3}), d2 = ts_input(g2, "d", TS_F32, 1, (int64_t[]){3});
    CHECK(!ts_gather(g2, d2, b2, 0) && strstr(ts_last_error(), "bool"), "a bool tensor is no index: %s", ts_last_error());
    ts_graph_free(g2);
    g2 = ts_graph_new(1);
    b2 = ts_input(g2, "b", TS_BOOL, 1, (int64_t[]){3});
    CHECK(!ts_binary(g2, "Max", b2, b2) && strstr(ts_last_error(), "ts_cast"), "Max of bools is refused: %s", ts_last_error());
    ts_graph_free(g2);

    ts_outfeed *q = NULL;
    CHECK_OK(ts_outfeed_new(&q, &(ts_outfeed_config){.name = "masks", .depth = 4}), "an outfeed");
    CHECK_OK(ts_outfeed_add(g, q, "any", any), "a bool tensor outfed");
    ts_options *o = ts_options_new();
    CHECK_OK(ts_options_watch(o, ts_tensor_name(any), TS_WATCH_STATS, 1), "a bool tensor watched");
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, n_outs, o), "an inference model of bool outputs");
    const char *names[3] = {"x", "ids", "mask"};
    ts_array in[3] = {{.dtype = TS_F32, .ndim = 2, .shape = {B, N}, .data = x},
                      {.dtype = TS_I64, .ndim = 2, .shape = {B, N}, .data = ids},
                      {.dtype = TS_BOOL, .ndim = 2, .shape = {B, N}, .data = mask}};
    CHECK_OK(ts_model_run(m, names, in, 3), "a run fed numpy's one-byte bools");

    bool want_lt[BN], want_eq[BN], want_any[BN];
    int bad = 0, trues = 0;
    const uint8_t *vlt = bools(m, lt, BN), *veq = bools(m, eq, BN), *vnan = bools(m, nan, BN), *vboth = bools(m, both, BN),
                  *vany = bools(m, any, BN), *vxo = bools(m, xo, BN), *vxb = bools(m, xb, BN), *vib = bools(m, ib, BN);
    CHECK(vlt && veq && vnan && vboth && vany && vxo && vxb && vib, "bool tensors are anchored as one-byte bools");
    for (int i = 0; vlt && veq && vnan && vboth && vany && vxo && vxb && vib && i < BN; i++) {
        want_lt[i] = x[i] < 0.5f;
        want_eq[i] = ids[i] == 7;
        bool want_both = want_lt[i] && !want_eq[i];
        want_any[i] = want_both || mask[i];
        trues += want_any[i];
        bad += vlt[i] != want_lt[i] || veq[i] != want_eq[i] || vnan[i] != (bool)isnan(x[i]) || vboth[i] != want_both || vany[i] != want_any[i] ||
               vxo[i] != ((mask[i] != 0) != (flags[i % N] != 0)) || vxb[i] != (x[i] != 0.0f || isnan(x[i])) || vib[i] != (ids[i] != 0);
    }
    CHECK(vlt && veq && vnan && vboth && vany && vxo && vxb && vib && bad == 0, "Less of floats, Equal of int64s (2^40+1 is not 7), IsNaN, And, Not, Or, Xor with a bool constant, casts to bool "
          "(NaN and -inf true, -0 false) (%d wrong)", bad);
    ts_array a;
    const float *vsel = !ts_model_anchored(m, ts_tensor_name(sel), &a) && a.dtype == TS_F32 ? a.data : NULL;
    const int64_t *vseli = !ts_model_anchored(m, ts_tensor_name(seli), &a) && a.dtype == TS_I64 ? a.data : NULL;
    const uint8_t *vselb = bools(m, selb, BN);
    const float *vfill = !ts_model_anchored(m, ts_tensor_name(filled), &a) && a.dtype == TS_F32 ? a.data : NULL;
    bad = 0;
    for (int i = 0; vsel && vseli && vselb && vfill && i < BN; i++) {
        float ws = want_any[i] ? x[i] : 0.5f, wf = mask[i] ? -2.0f : x[i];
        bad += !(vsel[i] == ws || (isnan(ws) && isnan(vsel[i]))) || vseli[i] != (mask[i] ? ids[i] : 7) ||
               vselb[i] != (isnan(x[i]) ? mask[i] != 0 : ids[i] == 7) || !(vfill[i] == wf || (isnan(wf) && isnan(vfill[i])));
    }
    CHECK(vsel && vseli && vselb && vfill && bad == 0, "a bool condition chooses floats, int64s and bools; a bool mask fills (%d wrong)", bad);
    const uint8_t *vtr = bools(m, tr, BN), *vsl = bools(m, sl, B * 3), *vcat = bools(m, cat, B * 2 * N);
    bad = 0;
    for (int b = 0; vtr && vsl && vcat && vany && b < B; b++)
        for (int n = 0; n < N; n++) {
            bad += vtr[n * B + b] != vany[b * N + n];
            if (n >= 1 && n < 4) bad += vsl[b * 3 + n - 1] != vany[b * N + n];
            bad += vcat[b * 2 * N + n] != vlt[b * N + n] || vcat[b * 2 * N + N + n] != mask[b * N + n];
        }
    CHECK(vtr && vsl && vcat && bad == 0, "transpose, slice and concat move bools (%d wrong)", bad);
    const float *vfa = !ts_model_anchored(m, ts_tensor_name(fa), &a) && a.dtype == TS_F32 ? a.data : NULL;
    const int32_t *vi32 = !ts_model_anchored(m, ts_tensor_name(i32), &a) && a.dtype == TS_I32 ? a.data : NULL;
    const int64_t *vi64 = !ts_model_anchored(m, ts_tensor_name(i64), &a) && a.dtype == TS_I64 ? a.data : NULL;
    const float *vcount = !ts_model_anchored(m, ts_tensor_name(count), &a) && a.dtype == TS_F32 ? a.data : NULL;
    bad = 0;
    for (int i = 0; vfa && vi32 && vi64 && i < BN; i++) bad += vfa[i] != (float)want_any[i] || vi32[i] != want_any[i] || vi64[i] != mask[i];
    for (int b = 0; vcount && b < B; b++) {
        int c = 0;
        for (int n = 0; n < N; n++) c += want_any[b * N + n];
        bad += vcount[b] != (float)c;
    }
    CHECK(vfa && vi32 && vi64 && vcount && bad == 0, "casts from bool give 1 or 0 in f32, i32 and i64; a cast mask sums to its count (%d wrong)",
          bad);

    /* a watch of a bool tensor: the fraction that is true */
    const ts_watch_result *w = NULL;
    size_t nw = 0;
    CHECK_OK(ts_model_watch_results(m, &w, &nw), "watch results");
    const ts_stats *st = nw == 1 && w[0].summary ? &w[0].summary->stats : NULL;
    CHECK(st && st->count == BN && fabs(st->mean - (double)trues / BN) < 1e-12 && st->min == 0.0 && st->max == 1.0 && st->zeros == BN - trues,
          "the watch of a bool tensor: %d of %d true, mean %.3f (the fraction), min 0, max 1", trues, BN, st ? st->mean : -1.0);
    ts_outfeed_record rec;
    CHECK_OK(ts_outfeed_dequeue(q, &rec, 60000), "the outfed bool tensor's record");
    CHECK(rec.array.dtype == TS_BOOL && ts_array_numel(&rec.array) == BN && vany && !memcmp(rec.array.data, vany, BN),
          "the outfeed record is one-byte bools, the anchor's values");
    char dir[] = "/tmp/ts_test_bool_XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL, "a scratch directory");
    snprintf(path, sizeof path, "%s/any.npy", dir);
    CHECK_OK(ts_model_anchored(m, ts_tensor_name(any), &a), "the bool anchor");
    CHECK_OK(ts_npy_save(path, &a), "a bool anchor saved as .npy");
    char head[128] = "";
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head - 1, f) : 0;
    if (f) fclose(f);
    head[got] = '\0';
    CHECK(got > 10 && strstr(head + 10, "'descr': '|b1'"), "the .npy holds numpy's bools (|b1)");
    remove(path);
    rmdir(dir);

    /* feeding: integers 0 and 1 are taken for a bool input, another value
     * or float data is refused naming it */
    int32_t mask32[BN] = {0, 1, 1, 0, 0, 1, 0, 0, 1, 1};
    ts_array in32[3] = {in[0], in[1], ts_array_i32(mask32, 2, (int64_t[]){B, N})};
    CHECK_OK(ts_model_run(m, names, in32, 3), "a bool input fed int32 zeros and ones");
    vany = bools(m, any, BN);
    bad = 0;
    for (int i = 0; vany && i < BN; i++) bad += vany[i] != ((want_lt[i] && !want_eq[i]) || mask32[i]);
    CHECK(vany && bad == 0, "the int32 zeros and ones are the bools (%d wrong)", bad);
    mask32[4] = 2;
    ts_status s = ts_model_run(m, names, in32, 3);
    CHECK(s == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'mask'") && strstr(ts_last_error(), "[4]") && strstr(ts_last_error(), "bool"),
          "a 2 fed to a bool input is refused naming it: %s", ts_last_error());
    ts_array inf[3] = {in[0], in[1], {.dtype = TS_F32, .ndim = 2, .shape = {B, N}, .data = x}};
    s = ts_model_run(m, names, inf, 3);
    CHECK(s == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'mask' must be bool data"), "float data for a bool input is refused: %s",
          ts_last_error());
    ts_model_free(m);
    ts_options_free(o);

    /* a sum over the run's samples is refused for a bool anchor */
    o = ts_options_new();
    ts_options_anchor(o, "s", ts_tensor_name(any), TS_OUTPUT_SUM, 0);
    m = NULL;
    s = ts_model_inference(&m, g, outs, n_outs, o);
    if (!s) s = ts_model_compile(m);
    CHECK(s == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "sum output mode"), "a bool anchor in the sum mode is refused: %s",
          ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_outfeed_free(q);
    ts_graph_free(g);
    return check_summary("test_bool");
}
