/* test_int64_bits.c -- the bitwise ops and the casts to the narrow
 * integer types on i64 (and i32) graph tensors, exactly over the whole
 * int64 range: And, Or, Xor, Not and both shifts of values near INT64_MIN
 * and INT64_MAX and beyond 2^53, in int64 and in the declared types that
 * wrap (int8, uint32, uint64: a uint64 held as its bits and returned as a
 * u64 output), and ts_cast of int64 and int32 values to i8, i16, u8, u16,
 * u32 and u64 (two's complement truncation, as numpy's astype); uint64
 * values past 2^63 through ts_binary_typed's Div, Mod, comparisons, Max
 * and Min and ts_cast_typed to f32 (unsigned, not negative int64), u32
 * inputs of 4294967295 wrapping mod 2^32, a fed -1 or 2^32 refused. The
 * expected values are computed here in C. Also run on the staged and CUDA
 * devices (ctest's _staged, _cuda). */
#include <stdbool.h>
#include <string.h>

#include "check.h"

#define N 8

static const void *anchored(ts_model *m, const ts_tensor *t, ts_dtype want) {
    ts_array a;
    if (ts_model_anchored(m, ts_tensor_name(t), &a) || a.dtype != want || ts_array_numel(&a) != N) return NULL;
    return a.data;
}

/* C's shifts as ONNX's BitShift in int64 (or uint64: logical right) */
static int64_t shl(int64_t a, int64_t s) { return s < 0 || s >= 64 ? 0 : (int64_t)((uint64_t)a << s); }
static int64_t shr(int64_t a, int64_t s, bool uns) {
    if (uns) return s < 0 || s >= 64 ? 0 : (int64_t)((uint64_t)a >> s);
    if (s < 0 || s >= 64) return a < 0 ? -1 : 0;
    return a < 0 ? ~(int64_t)(~(uint64_t)a >> s) : (int64_t)((uint64_t)a >> s);
}

int main(void) {
    int64_t a[N] = {INT64_MIN, INT64_MAX, -1, 0, ((int64_t)1 << 62) + 12345, -((int64_t)1 << 53) - 3, 0x5555555555555555, 300};
    int64_t b[N] = {-1, INT64_MIN + 7, INT64_MAX, ((int64_t)1 << 53) + 1, 0x0f0f0f0f0f0f0f0f, -2, 0x7a7a7a7a00000001, 44};
    int64_t s[N] = {0, 1, 63, 64, -1, 5, 2, 62};
    int32_t c[N] = {-1, 300, INT32_MIN, 65535, -32769, 128, 2147483647, -129};

    ts_graph *g = ts_graph_new(1);
    ts_tensor *ta = ts_input(g, "a", TS_I64, 1, (int64_t[]){N}), *tb = ts_input(g, "b", TS_I64, 1, (int64_t[]){N}),
              *ts_ = ts_input(g, "s", TS_I64, 1, (int64_t[]){N}), *tc = ts_input(g, "c", TS_I32, 1, (int64_t[]){N});
    ts_tensor *and_ = ts_bitwise(g, "And", ta, tb, TS_I64), *or_ = ts_bitwise(g, "Or", ta, tb, TS_I64), *xor_ = ts_bitwise(g, "Xor", ta, tb, TS_I64);
    ts_tensor *not_ = ts_bitwise(g, "Not", ta, NULL, TS_I64), *notu = ts_bitwise(g, "Not", ta, NULL, TS_U64);
    ts_tensor *shl64 = ts_bitwise(g, "ShiftLeft", ta, ts_, TS_I64), *shr64 = ts_bitwise(g, "ShiftRight", ta, ts_, TS_I64);
    ts_tensor *shru = ts_bitwise(g, "ShiftRight", ta, ts_, TS_U64), *shlu = ts_bitwise(g, "ShiftLeft", tb, ts_, TS_U64);
    ts_tensor *and8 = ts_bitwise(g, "And", ta, tb, TS_I8), *shl32 = ts_bitwise(g, "ShiftLeft", ta, ts_, TS_U32);
    ts_tensor *i8 = ts_cast(g, ta, TS_I8), *i16 = ts_cast(g, ta, TS_I16), *u8 = ts_cast(g, ta, TS_U8), *u16 = ts_cast(g, ta, TS_U16),
              *u32 = ts_cast(g, ta, TS_U32), *u64 = ts_cast(g, ta, TS_U64);
    ts_tensor *c8 = ts_cast(g, tc, TS_I8), *cu16 = ts_cast(g, tc, TS_U16), *cu32 = ts_cast(g, tc, TS_U32), *cu64 = ts_cast(g, tc, TS_U64);
    ts_tensor *outs[] = {and_, or_, xor_, not_, notu, shl64, shr64, shru, shlu, and8, shl32, i8, i16, u8, u16, u32, c8, cu16, cu32, cu64};
    int n_outs = (int)(sizeof outs / sizeof outs[0]);
    bool built = u64 != NULL;
    for (int i = 0; i < n_outs; i++) built = built && outs[i];
    CHECK(built, "the bitwise ops and the narrow casts build on i64 and i32 tensors: %s", built ? "" : ts_last_error());
    if (!built) return check_summary("test_int64_bits");
    ts_array info;
    CHECK(!ts_tensor_info(and8, &info) && info.dtype == TS_I64 && !ts_tensor_info(i8, &info) && info.dtype == TS_I32 &&
              !ts_tensor_info(u32, &info) && info.dtype == TS_I64 && !ts_tensor_info(cu32, &info) && info.dtype == TS_I64 && u64 == ta,
          "bitwise results keep i64; casts to 8 and 16 bits are i32, to u32 i64, an i64 as u64 the same tensor (its bits)");
    CHECK_OK(ts_tensor_set_output_dtype(notu, TS_U64), "Not in uint64 returned as u64");
    CHECK_OK(ts_tensor_set_output_dtype(shlu, TS_U64), "ShiftLeft in uint64 returned as u64");

    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, n_outs, NULL), "an inference model of the bitwise ops and casts");
    const char *names[4] = {"a", "b", "s", "c"};
    ts_array in[4] = {{.dtype = TS_I64, .ndim = 1, .shape = {N}, .data = a}, {.dtype = TS_I64, .ndim = 1, .shape = {N}, .data = b},
                      {.dtype = TS_I64, .ndim = 1, .shape = {N}, .data = s}, ts_array_i32(c, 1, (int64_t[]){N})};
    CHECK_OK(ts_model_run(m, names, in, 4), "a run fed int64 values at the ends of int64");

    const int64_t *va = anchored(m, and_, TS_I64), *vo = anchored(m, or_, TS_I64), *vx = anchored(m, xor_, TS_I64), *vn = anchored(m, not_, TS_I64);
    const uint64_t *vnu = anchored(m, notu, TS_U64), *vlu = anchored(m, shlu, TS_U64);
    int bad = 0;
    for (int i = 0; va && vo && vx && vn && vnu && i < N; i++)
        bad += va[i] != (a[i] & b[i]) || vo[i] != (a[i] | b[i]) || vx[i] != (a[i] ^ b[i]) || vn[i] != ~a[i] || vnu[i] != ~(uint64_t)a[i];
    CHECK(va && vo && vx && vn && vnu && bad == 0, "And, Or, Xor and Not of int64 values in all 64 bits; Not in uint64 as u64 (%d wrong)", bad);
    const int64_t *vl = anchored(m, shl64, TS_I64), *vr = anchored(m, shr64, TS_I64), *vru = anchored(m, shru, TS_I64);
    bad = 0;
    for (int i = 0; vl && vr && vru && vlu && i < N; i++)
        bad += vl[i] != shl(a[i], s[i]) || vr[i] != shr(a[i], s[i], false) || vru[i] != shr(a[i], s[i], true) || vlu[i] != (uint64_t)shl(b[i], s[i]);
    CHECK(vl && vr && vru && vlu && bad == 0,
          "shifts in int64 (arithmetic right) and uint64 (logical), by 0 to 63, 64 and -1 (every bit out) (%d wrong; [4] << %lld: %lld)", bad,
          (long long)s[4], vl ? (long long)vl[4] : 0LL);
    const int64_t *v8 = anchored(m, and8, TS_I64), *v32 = anchored(m, shl32, TS_I64);
    bad = 0;
    for (int i = 0; v8 && v32 && i < N; i++) {
        uint64_t want32 = s[i] >= 0 && s[i] < 32 ? (uint32_t)((uint32_t)(uint64_t)a[i] << s[i]) : 0;
        bad += v8[i] != (int8_t)(a[i] & b[i]) || v32[i] != (int64_t)want32;
    }
    CHECK(v8 && v32 && bad == 0, "And in int8 and ShiftLeft in uint32 wrap to their type's width (%d wrong)", bad);

    const int32_t *w8 = anchored(m, i8, TS_I32), *w16 = anchored(m, i16, TS_I32), *wu8 = anchored(m, u8, TS_I32), *wu16 = anchored(m, u16, TS_I32);
    const int64_t *wu32 = anchored(m, u32, TS_I64);
    bad = 0;
    for (int i = 0; w8 && w16 && wu8 && wu16 && wu32 && i < N; i++)
        bad += w8[i] != (int8_t)a[i] || w16[i] != (int16_t)a[i] || wu8[i] != (uint8_t)a[i] || wu16[i] != (uint16_t)a[i] || wu32[i] != (uint32_t)a[i];
    CHECK(w8 && w16 && wu8 && wu16 && wu32 && bad == 0, "int64 cast to int8, int16, uint8, uint16 and uint32 wraps (300 as int8 is 44) (%d wrong; [7] %d)",
          bad, w8 ? w8[7] : 0);
    const int32_t *x8 = anchored(m, c8, TS_I32), *xu16 = anchored(m, cu16, TS_I32);
    const int64_t *xu32 = anchored(m, cu32, TS_I64), *xu64 = anchored(m, cu64, TS_I64);
    bad = 0;
    for (int i = 0; x8 && xu16 && xu32 && xu64 && i < N; i++)
        bad += x8[i] != (int8_t)c[i] || xu16[i] != (uint16_t)c[i] || xu32[i] != (uint32_t)c[i] || xu64[i] != (int64_t)c[i];
    CHECK(x8 && xu16 && xu32 && xu64 && bad == 0, "int32 cast to int8, uint16, uint32 (-1 is 4294967295, in i64) and uint64 (its bits) (%d wrong)", bad);
    ts_model_free(m);
    ts_graph_free(g);

    /* uint64 values past 2^63 (an i64 input's bits) read unsigned by
     * ts_binary_typed and ts_cast_typed; a u32 input of every uint32 value,
     * its arithmetic wrapped mod 2^32; a float past 2^63 cast to u64 */
    {
        enum { M = 6 };
        uint64_t u[M] = {UINT64_MAX, ((uint64_t)1 << 63) + 5, (uint64_t)1 << 63, 7, 0, UINT64_MAX - 1};
        uint64_t v[M] = {2, ((uint64_t)1 << 63) + 6, 3, UINT64_MAX, 9, UINT64_MAX};
        uint32_t p[M] = {UINT32_MAX, 1u << 31, 0, 7, 4000000000u, 5};
        uint32_t q[M] = {1, 1u << 31, 5, UINT32_MAX, 400000000u, 3};
        float f[M] = {1e19f, 9.3e18f, 4e18f, -1.0f, 2e19f, 0.5f};
        g = ts_graph_new(1);
        ts_tensor *tu = ts_input(g, "u", TS_U64, 1, (int64_t[]){M}), *tv = ts_input(g, "v", TS_U64, 1, (int64_t[]){M});
        ts_tensor *tp = ts_input(g, "p", TS_U32, 1, (int64_t[]){M}), *tq = ts_input(g, "q", TS_U32, 1, (int64_t[]){M});
        ts_tensor *tf = ts_input(g, "f", TS_F32, 1, (int64_t[]){M});
        ts_tensor *dv = ts_binary_typed(g, "Div", tu, tv, TS_U64), *md = ts_binary_typed(g, "Mod", tu, tv, TS_U64);
        ts_tensor *lt = ts_binary_typed(g, "Less", tu, tv, TS_U64), *ge = ts_binary_typed(g, "GreaterOrEqual", tu, tv, TS_U64);
        ts_tensor *mx = ts_binary_typed(g, "Max", tu, tv, TS_U64), *mn = ts_binary_typed(g, "Min", tu, tv, TS_U64);
        ts_tensor *fl = ts_cast_typed(g, tu, TS_U64, TS_F32), *signed_fl = ts_cast(g, tu, TS_F32);
        ts_tensor *add32 = ts_binary_typed(g, "Add", tp, tq, TS_U32), *mul32 = ts_binary_typed(g, "Mul", tp, tq, TS_U32);
        ts_tensor *sub32 = ts_binary_typed(g, "Sub", tq, tp, TS_U32), *gt32 = ts_binary_typed(g, "Greater", tp, tq, TS_U32);
        ts_tensor *fu = ts_cast(g, tf, TS_U64);
        ts_tensor *outs2[] = {dv, md, lt, ge, mx, mn, fl, signed_fl, add32, mul32, sub32, gt32, fu};
        bool ok = true;
        for (size_t i = 0; i < sizeof outs2 / sizeof *outs2; i++) ok = ok && outs2[i];
        CHECK(ok, "ts_binary_typed and ts_cast_typed build on u64 and u32 inputs: %s", ok ? "" : ts_last_error());
        ts_array held;
        CHECK(ok && !ts_tensor_info(tu, &held) && held.dtype == TS_I64 && !ts_tensor_info(tp, &held) && held.dtype == TS_I64,
              "u32 and u64 inputs are held in i64");
        for (size_t i = 0; ok && i < sizeof outs2 / sizeof *outs2; i++)
            if (outs2[i] != lt && outs2[i] != ge && outs2[i] != gt32 && outs2[i] != fl && outs2[i] != signed_fl)
                ok = !ts_tensor_set_output_dtype(outs2[i], outs2[i] == add32 || outs2[i] == mul32 || outs2[i] == sub32 ? TS_U32 : TS_U64);
        ts_model *m2 = NULL;
        ok = ok && !ts_model_inference(&m2, g, outs2, (int)(sizeof outs2 / sizeof *outs2), NULL);
        CHECK(ok, "an inference model of the unsigned ops: %s", ok ? "" : ts_last_error());
        const char *nm[5] = {"u", "v", "p", "q", "f"};
        ts_array in2[5] = {{.dtype = TS_U64, .ndim = 1, .shape = {M}, .data = u}, {.dtype = TS_U64, .ndim = 1, .shape = {M}, .data = v},
                           {.dtype = TS_U32, .ndim = 1, .shape = {M}, .data = p}, {.dtype = TS_U32, .ndim = 1, .shape = {M}, .data = q},
                           ts_array_f32(f, 1, (int64_t[]){M})};
        ok = ok && !ts_model_run(m2, nm, in2, 5);
        CHECK(ok, "a run fed uint64 values past 2^63 and uint32 4294967295: %s", ok ? "" : ts_last_error());
        ts_array a2[13];
        for (int i = 0; ok && i < 13; i++) ok = !ts_model_anchored(m2, ts_tensor_name(outs2[i]), &a2[i]);
        int bad64 = 0, bad32 = 0, badf = 0;
        for (int i = 0; ok && i < M; i++) {
            bad64 += ((const uint64_t *)a2[0].data)[i] != u[i] / v[i] || ((const uint64_t *)a2[1].data)[i] != u[i] % v[i] ||
                   ((const uint8_t *)a2[2].data)[i] != (u[i] < v[i]) || ((const uint8_t *)a2[3].data)[i] != (u[i] >= v[i]) ||
                   ((const uint64_t *)a2[4].data)[i] != (u[i] > v[i] ? u[i] : v[i]) || ((const uint64_t *)a2[5].data)[i] != (u[i] < v[i] ? u[i] : v[i]) ||
                   ((const float *)a2[6].data)[i] != (float)u[i] || ((const float *)a2[7].data)[i] != (float)(int64_t)u[i];
            bad32 += ((const uint32_t *)a2[8].data)[i] != (uint32_t)(p[i] + q[i]) || ((const uint32_t *)a2[9].data)[i] != (uint32_t)(p[i] * q[i]) ||
                     ((const uint32_t *)a2[10].data)[i] != (uint32_t)(q[i] - p[i]) || ((const uint8_t *)a2[11].data)[i] != (p[i] > q[i]);
            uint64_t want = f[i] >= 18446744073709551616.0f ? UINT64_MAX : f[i] >= 0 ? (uint64_t)f[i] : (uint64_t)(int64_t)f[i];
            badf += ((const uint64_t *)a2[12].data)[i] != want;
        }
        CHECK(ok && a2[0].dtype == TS_U64 && a2[2].dtype == TS_BOOL && a2[6].dtype == TS_F32 && bad64 == 0,
              "uint64 Div, Mod, Less, GreaterOrEqual, Max, Min and the cast to f32 read 2^64-1 and 2^63+5 unsigned; ts_cast reads them "
              "signed (%d wrong)", bad64);
        CHECK(ok && a2[8].dtype == TS_U32 && bad32 == 0, "uint32 Add, Mul and Sub wrap mod 2^32 (4294967295 + 1 is 0); Greater unsigned (%d wrong)", bad32);
        CHECK(ok && badf == 0, "f32 1e19 cast to u64 is its value (past 2^63), 2e19 is 2^64-1, -1 wraps (%d wrong)", badf);
        int64_t minus[M] = {0, -1, 0, 0, 0, 0};
        in2[2] = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {M}, .data = minus};
        CHECK(ok && ts_model_run(m2, nm, in2, 5) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'p'") &&
                  strstr(ts_last_error(), "4294967295"), "a u32 input fed -1 is refused, naming its range: %s", ts_last_error());
        int64_t big[M] = {0, (int64_t)1 << 32, 0, 0, 0, 0};
        in2[2].data = big;
        CHECK(ok && ts_model_run(m2, nm, in2, 5) == TS_ERR_INVALID_ARGUMENT, "a u32 input fed 2^32 is refused: %s", ts_last_error());
        ts_model_free(m2);
        ts_graph_free(g);
    }
    g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_I32, 1, (int64_t[]){2});
    CHECK(!ts_binary_typed(g, "Div", x, x, TS_U64) && strstr(ts_last_error(), "i64"), "uint64 values in an i32 tensor are refused: %s",
          ts_last_error());
    ts_graph_free(g);

    /* on i32 tensors a result that can leave i32 is refused, saying to use i64 */
    g = ts_graph_new(1);
    ts_tensor *x32 = ts_input(g, "x", TS_I32, 1, (int64_t[]){2}), *y64 = ts_input(g, "y", TS_I64, 1, (int64_t[]){2});
    CHECK(!ts_bitwise(g, "ShiftLeft", x32, x32, TS_I64) && ts_graph_status(g) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "i64"),
          "ShiftLeft in int64 of i32 tensors is refused, naming i64: %s", ts_last_error());
    ts_graph_free(g);
    g = ts_graph_new(1);
    x32 = ts_input(g, "x", TS_I32, 1, (int64_t[]){2}), y64 = ts_input(g, "y", TS_I64, 1, (int64_t[]){2});
    CHECK(!ts_bitwise(g, "And", x32, y64, TS_I64) && strstr(ts_last_error(), "ts_cast"), "i32 and i64 operands are refused: %s", ts_last_error());
    ts_graph_free(g);
    return check_summary("test_int64_bits");
}
