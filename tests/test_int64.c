/* test_int64.c -- i64 graph tensors end to end: fed as int64 arrays and
 * returned as int64 anchors and outfeed records, every value exact (2^40+1,
 * 2^53+1, values beyond 2^62, the ends of int64), through the ops that
 * compute on them (ts_cast, ts_binary's and ts_unary's integer ops,
 * ts_cumsum: the position ids a language model computes from its
 * attention mask) and the ops that move them (reshape, transpose, slice,
 * concat, gather, where). The expected values are computed here in C's
 * int64 arithmetic. Indices the graph computes (a cast of i64 ids, a
 * slice of the labels) are checked before the op that reads them: one out
 * of range is an error naming the tensor, never clamped. Also run on the
 * staged and CUDA devices (ctest's _staged, _cuda). */
#include <stdbool.h>
#include <string.h>

#include "check.h"

#define B 2
#define T 4

static const int64_t P40 = ((int64_t)1 << 40) + 1, P53 = ((int64_t)1 << 53) + 1;

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
static int64_t py_mod(int64_t a, int64_t b) {
    int64_t r = a % b; /* C's, the dividend's sign: moved to the divisor's */
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

/* a^k by repeated multiplication, wrapping; by k < 0 onnxruntime's (+-1
 * for +-1, INT64_MIN for 0, else 0) */
static int64_t int_pow(int64_t a, int64_t k) {
    if (k < 0) return a == 1 ? 1 : a == -1 ? (k & 1 ? -1 : 1) : a == 0 ? INT64_MIN : 0;
    uint64_t r = 1;
    for (int64_t i = 0; i < k; i++) r *= (uint64_t)a;
    return (int64_t)r;
}

static const int64_t *anchored(ts_model *m, const ts_tensor *t, ts_dtype want, int64_t n) {
    ts_array a;
    if (ts_model_anchored(m, ts_tensor_name(t), &a) || a.dtype != want || ts_array_numel(&a) != n) return NULL;
    return (uintptr_t)a.data % sizeof(int64_t) ? NULL : a.data; /* an array of int64 is aligned for them */
}

static ts_tensor *const64(ts_graph *g, const char *name, int64_t v) {
    return ts_constant(g, name, &(ts_array){.dtype = TS_I64, .ndim = 1, .shape = {1}, .data = &v});
}

int main(void) {
    int64_t ids[B * T] = {P40, -P53, INT64_MAX, INT64_MIN + 1, ((int64_t)1 << 62) + 7, -7, 0, 123456789012345},
            mask[B * T] = {1, 1, 1, 0, 0, 1, 1, 1};
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "ids", TS_I64, 2, (int64_t[]){B, T}), *am = ts_input(g, "mask", TS_I64, 2, (int64_t[]){B, T});
    ts_tensor *one = const64(g, "one", 1), *zero = const64(g, "zero", 0), *three = const64(g, "three", 3), *seven = const64(g, "seven", -7),
              *big = const64(g, "big", P40), *five = const64(g, "five", -5);
    /* position ids as Hugging Face's models make them: cumsum(mask) - 1, 1 where the mask is 0 */
    ts_tensor *pos = ts_where(g, ts_binary(g, "Equal", am, zero), one, ts_binary(g, "Sub", ts_cumsum(g, am, -1, 0, 0), one));
    ts_tensor *arith = ts_binary(g, "FloorDiv", ts_binary(g, "Add", ts_binary(g, "Mul", ts_binary(g, "Div", x, three), three), big), seven);
    ts_tensor *mod = ts_binary(g, "Mod", x, five), *fmod = ts_binary(g, "FMod", x, five), *neg = ts_unary(g, "Neg", x, 0, 0);
    ts_tensor *less = ts_binary(g, "Less", x, big), *mx = ts_binary(g, "Max", x, ts_unary(g, "Abs", seven, 0, 0));
    ts_tensor *rev = ts_cumsum(g, am, 1, 1, 1);
    ts_tensor *tr = ts_transpose(g, x, 0, 1), *sl = ts_slice(g, x, 1, 1, 2);
    ts_tensor *cat = ts_concat(g, (ts_tensor *[]){sl, pos}, 2, 1);
    int32_t pick[2] = {3, -4};
    ts_array pick_a = ts_array_i32(pick, 1, (int64_t[]){2});
    ts_tensor *idx = ts_constant(g, "pick", &pick_a);
    ts_tensor *ga = ts_gather(g, ts_reshape(g, x, 1, (int64_t[]){B * T}), idx, 0);
    ts_tensor *w32 = ts_cast(g, x, TS_I32), *f32 = ts_cast(g, x, TS_F32), *back = ts_cast(g, ts_cast(g, am, TS_F32), TS_I64);
    /* one f32 value anchored just before the gathered i64 ones: an odd
     * number of 4-byte cells ahead of them in the anchors' arena */
    ts_tensor *odd = ts_slice(g, ts_reshape(g, f32, 1, (int64_t[]){B * T}), 0, 0, 1);
    /* Pow by i64 exponents: 3 or 4 (the mask + 3, wrapping), and -7 */
    ts_tensor *pw = ts_binary(g, "Pow", x, ts_binary(g, "Add", am, three)), *pn = ts_binary(g, "Pow", x, seven);
    ts_tensor *outs[] = {pos, arith, mod, fmod, neg, less, mx, rev, tr, sl, cat, odd, ga, w32, f32, back, pw, pn};
    int n_outs = (int)(sizeof outs / sizeof outs[0]);
    bool built = true;
    for (int i = 0; i < n_outs; i++) built = built && outs[i];
    CHECK(built, "the integer ops build on i64 tensors: %s", built ? "" : ts_last_error());
    if (!built) return check_summary("test_int64");
    ts_array info;
    CHECK(!ts_tensor_info(pos, &info) && info.dtype == TS_I64 && !ts_tensor_info(less, &info) && info.dtype == TS_BOOL &&
              !ts_tensor_info(w32, &info) && info.dtype == TS_I32 && !ts_tensor_info(cat, &info) && info.dtype == TS_I64,
          "position ids and moved ids are i64, comparisons bool and casts to i32 i32");
    ts_outfeed *q = NULL;
    CHECK_OK(ts_outfeed_new(&q, &(ts_outfeed_config){.name = "ids", .depth = 4}), "an outfeed");
    CHECK_OK(ts_outfeed_add(g, q, "arith", arith), "an i64 tensor outfed");
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, n_outs, NULL), "an inference model of i64 outputs");
    const char *names[2] = {"ids", "mask"};
    ts_array in[2] = {{.dtype = TS_I64, .ndim = 2, .shape = {B, T}, .data = ids}, {.dtype = TS_I64, .ndim = 2, .shape = {B, T}, .data = mask}};
    CHECK_OK(ts_model_run(m, names, in, 2), "a run fed int64 arrays");

    const int64_t *v = anchored(m, pos, TS_I64, B * T);
    int bad = 0;
    for (int b = 0; v && b < B; b++)
        for (int t = 0, run = 0; t < T; t++) {
            run += (int)mask[b * T + t];
            bad += v[b * T + t] != (mask[b * T + t] ? run - 1 : 1);
        }
    CHECK(v && bad == 0, "position ids from the mask: cumsum - 1, 1 where masked (%d wrong)", bad);
    v = anchored(m, arith, TS_I64, B * T);
    bad = 0;
    for (int i = 0; v && i < B * T; i++) {
        int64_t want = floor_div((int64_t)((uint64_t)(ids[i] / 3) * 3u + (uint64_t)P40), -7);
        bad += v[i] != want;
    }
    CHECK(v && bad == 0, "(x / 3 * 3 + 2^40+1) // -7 exactly beyond 2^53 (%d wrong; [0] %lld)", bad, v ? (long long)v[0] : 0LL);
    const int64_t *vm = anchored(m, mod, TS_I64, B * T), *vf = anchored(m, fmod, TS_I64, B * T), *vn = anchored(m, neg, TS_I64, B * T);
    bad = 0;
    for (int i = 0; vm && vf && vn && i < B * T; i++)
        bad += vm[i] != py_mod(ids[i], -5) || vf[i] != ids[i] % -5 || vn[i] != (int64_t)(0u - (uint64_t)ids[i]);
    CHECK(vm && vf && vn && bad == 0, "Mod takes the divisor's sign, FMod the dividend's, Neg wraps (%d wrong)", bad);
    const int64_t *vpw = anchored(m, pw, TS_I64, B * T), *vpn = anchored(m, pn, TS_I64, B * T);
    bad = 0;
    for (int i = 0; vpw && vpn && i < B * T; i++) bad += vpw[i] != int_pow(ids[i], mask[i] + 3) || vpn[i] != int_pow(ids[i], -7);
    CHECK(vpw && vpn && bad == 0, "Pow of i64 by 3 and 4 wraps as repeated multiplication, by -7 is onnxruntime's (%d wrong)", bad);
    ts_array la;
    const uint8_t *vl = !ts_model_anchored(m, ts_tensor_name(less), &la) && la.dtype == TS_BOOL && ts_array_numel(&la) == B * T ? la.data : NULL;
    v = anchored(m, mx, TS_I64, B * T);
    bad = 0;
    for (int i = 0; vl && v && i < B * T; i++) bad += vl[i] != (ids[i] < P40) || v[i] != (ids[i] > 7 ? ids[i] : 7);
    CHECK(vl && v && bad == 0, "Less gives bools and Max of Abs compares 64-bit values (2^40+1 is not 2^40+2) (%d wrong)", bad);
    v = anchored(m, rev, TS_I64, B * T);
    bad = 0;
    for (int b = 0; v && b < B; b++)
        for (int t = 0; t < T; t++) {
            int64_t want = 0;
            for (int s = t + 1; s < T; s++) want += mask[b * T + s];
            bad += v[b * T + t] != want;
        }
    CHECK(v && bad == 0, "an exclusive reverse running sum (%d wrong)", bad);
    const int64_t *vt = anchored(m, tr, TS_I64, B * T), *vs = anchored(m, sl, TS_I64, B * 2), *vc = anchored(m, cat, TS_I64, B * (2 + T)),
                  *vp = anchored(m, pos, TS_I64, B * T), *vg = anchored(m, ga, TS_I64, 2);
    bad = 0;
    for (int b = 0; vt && vs && vc && vp && b < B; b++)
        for (int t = 0; t < T; t++) {
            bad += vt[t * B + b] != ids[b * T + t];
            if (t < 2) bad += vs[b * 2 + t] != ids[b * T + 1 + t] || vc[b * (2 + T) + t] != ids[b * T + 1 + t];
            bad += vc[b * (2 + T) + 2 + t] != vp[b * T + t];
        }
    CHECK(vt && vs && vc && vp && bad == 0, "transpose, slice and concat move every 64-bit value whole (%d wrong)", bad);
    CHECK(vg && vg[0] == ids[3] && vg[1] == ids[B * T - 4], "a gather of i64 data by i32 indices (-4 from the end)");
    const int32_t *vw = (const int32_t *)(const void *)anchored(m, w32, TS_I32, B * T);
    ts_array fa;
    const float *vff = !ts_model_anchored(m, ts_tensor_name(f32), &fa) && fa.dtype == TS_F32 ? fa.data : NULL;
    const int64_t *vb = anchored(m, back, TS_I64, B * T);
    bad = 0;
    for (int i = 0; vw && vff && vb && i < B * T; i++)
        bad += vw[i] != (int32_t)(uint32_t)(uint64_t)ids[i] || vff[i] != (float)ids[i] || vb[i] != mask[i];
    CHECK(vw && vff && vb && bad == 0, "casts: i64 to i32 wraps, to f32 rounds to nearest, f32 back to i64 exact (%d wrong)", bad);
    ts_outfeed_record rec;
    CHECK_OK(ts_outfeed_dequeue(q, &rec, 60000), "the outfed i64 tensor's record");
    v = anchored(m, arith, TS_I64, B * T);
    CHECK(rec.array.dtype == TS_I64 && ts_array_numel(&rec.array) == B * T && v && !memcmp(rec.array.data, v, sizeof(int64_t) * B * T),
          "the outfeed record is int64, the anchor's values");

    /* fed data: an unsigned value past int64 is refused, never wrapped */
    uint64_t huge[B * T] = {0, 1, 2, (uint64_t)1 << 63, 4, 5, 6, 7};
    ts_array hin[2] = {{.dtype = TS_U64, .ndim = 2, .shape = {B, T}, .data = huge}, in[1]};
    ts_status st = ts_model_run(m, names, hin, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'ids'") && strstr(ts_last_error(), "9223372036854775808"),
          "a u64 value past int64 is refused: %s", ts_last_error());
    ts_model_free(m);
    /* a sum over the run's samples is taken in f32 cells: refused for an integer tensor */
    ts_options *so = ts_options_new();
    ts_options_anchor(so, "s", ts_tensor_name(arith), TS_OUTPUT_SUM, 0);
    m = NULL;
    st = ts_model_inference(&m, g, outs, n_outs, so);
    if (!st) st = ts_model_compile(m);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "sum output mode takes float tensors"),
          "an i64 anchor in the sum mode is refused: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(so);
    ts_outfeed_free(q);
    ts_graph_free(g);

    /* a mix of widths is refused (never widened silently), as is an i32 input fed 2^40 */
    g = ts_graph_new(1);
    ts_tensor *a64 = ts_input(g, "a", TS_I64, 1, (int64_t[]){2}), *a32 = ts_input(g, "b", TS_I32, 1, (int64_t[]){2});
    CHECK(ts_binary(g, "Add", a64, a32) == NULL && strstr(ts_last_error(), "ts_cast"), "i64 + i32 is refused: %s", ts_last_error());
    ts_graph_free(g);

    /* indices the graph computes: ids cast from i64 for an embedding, the
     * decoder's shifted labels sliced from i32 labels for a loss that
     * ignores -100; one out of range is an error naming the tensor */
    g = ts_graph_new(1);
    ts_tensor *tok = ts_input(g, "tokens", TS_I64, 2, (int64_t[]){B, T}), *lab = ts_input(g, "labels", TS_I32, 2, (int64_t[]){B, T + 1});
    ts_tensor *table = ts_param(g, "table", 2, (int64_t[]){5, 3});
    ts_tensor *rows = ts_embedding(g, table, ts_reshape(g, ts_cast(g, tok, TS_I32), 1, (int64_t[]){B * T}));
    ts_tensor *shifted = ts_reshape(g, ts_slice(g, lab, 1, 1, T), 1, (int64_t[]){B * T});
    ts_tensor *loss = ts_cross_entropy_ignore(g, rows, shifted, -100);
    CHECK(loss != NULL, "an embedding of cast ids and a loss of sliced labels build: %s", loss ? "" : ts_last_error());
    m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, NULL, ts_sgd(0.1f, 0.0f, 0.0f)), "a training model over computed indices");
    int64_t tv[B * T] = {0, 1, 2, 3, 4, 3, 2, 1};
    int32_t lv[B * (T + 1)] = {9, 1, 2, -100, 0, 9, 2, 2, 1, 0};
    const char *tn[2] = {"tokens", "labels"};
    ts_array tin[2] = {{.dtype = TS_I64, .ndim = 2, .shape = {B, T}, .data = tv}, ts_array_i32(lv, 2, (int64_t[]){B, T + 1})};
    CHECK_OK(ts_model_run(m, tn, tin, 2), "a step whose sliced labels hold -100 (ignored) and whose unsliced 9s are cut off");
    tv[5] = 5;
    st = ts_model_run(m, tn, tin, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[5] = 5") && strstr(ts_last_error(), "[0, 5)") &&
              strstr(ts_last_error(), "Embedding"),
          "a cast id beyond the table is an error naming the tensor: %s", ts_last_error());
    tv[5] = (int64_t)1 << 32; /* wraps to 0 in i32, as PyTorch's .int(): a valid row, so the run goes on */
    CHECK_OK(ts_model_run(m, tn, tin, 2), "an id of 2^32 wraps to 0 through the cast, as PyTorch's .int() does");
    tv[5] = 3;
    lv[7] = 3;
    st = ts_model_run(m, tn, tin, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[5] = 3") && strstr(ts_last_error(), "class index"),
          "a sliced label out of range is an error naming it: %s", ts_last_error());
    ts_model_free(m);
    ts_graph_free(g);
    return check_summary("test_int64");
}
