/* test_lowbits.c -- ONNX's low-precision types (core/lowbits.h: float8
 * e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0, float4e2m1, int4, uint4, int2,
 * uint2) against the onnx package's reference Cast, bit for bit
 * (tests/fixtures/lowbits_v1.bin, written by
 * tests/reference/make_lowbits_fixtures.py):
 * (a) every code of every type decoded to f32 (a NaN checked to be one);
 * (b) f32 patterns chosen for every rounding case (every code's value and
 *     the halfway points between codes, one ulp either side, both signs,
 *     the largest finite values and past them, subnormals, signed zeros,
 *     infinities, NaNs, integers around int32's range) converted with
 *     saturate on and off, and e8m0 with each round mode;
 * (c) ts_lowbits_round is the conversion there and back, on known values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "core/lowbits.h"
#include "fixture.h"

static const struct {
    const char *name;
    int type;
} types[] = {{"float8e4m3fn", TS_LOWBITS_F8E4M3FN}, {"float8e4m3fnuz", TS_LOWBITS_F8E4M3FNUZ},
             {"float8e5m2", TS_LOWBITS_F8E5M2},     {"float8e5m2fnuz", TS_LOWBITS_F8E5M2FNUZ},
             {"float8e8m0", TS_LOWBITS_F8E8M0},     {"float4e2m1", TS_LOWBITS_F4E2M1},
             {"int4", TS_LOWBITS_INT4},             {"uint4", TS_LOWBITS_UINT4},
             {"int2", TS_LOWBITS_INT2},             {"uint2", TS_LOWBITS_UINT2}};

static const uint32_t *entry(const fixture *f, const char *name, int64_t n) {
    const ts_array *a = fixture_get(f, name);
    bool ok = a && a->dtype == TS_I32 && (n < 0 || ts_array_numel(a) == n);
    CHECK(ok, "fixture entry %s (i32[%lld])", name, (long long)(a ? ts_array_numel(a) : 0));
    return ok ? a->data : NULL;
}

static void check_decode(const fixture *f, const char *name, int t) {
    char key[64];
    snprintf(key, sizeof key, "%s_to_f32", name);
    uint32_t n = 1u << ts_lowbits_width(t);
    const uint32_t *want = entry(f, key, n);
    if (!want) return;
    int bad = 0;
    for (uint32_t c = 0; c < n; c++) {
        float got = ts_lowbits_to_f32(t, (uint8_t)c), w = ts_lb_float(want[c]);
        bool ok = isnan(w) ? isnan(got) : ts_lb_bits(got) == want[c];
        if (!ok && bad++ < 5) printf("     %s(0x%02x) = 0x%08x, onnx 0x%08x\n", key, c, ts_lb_bits(got), want[c]);
    }
    CHECK(bad == 0, "%s: all %u codes as onnx's f32 bits (%d differ)", key, n, bad);
}

static void check_encode(const fixture *f, const char *key, int t, int mode, const uint32_t *x, int64_t n) {
    const uint32_t *want = entry(f, key, n);
    if (!want) return;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t got = ts_lowbits_from_f32(t, ts_lb_float(x[i]), mode);
        if (got != want[i] && bad++ < 5) printf("     %s(0x%08x = %g) = 0x%02x, onnx 0x%02x\n", key, x[i], ts_lb_float(x[i]), got, want[i]);
    }
    CHECK(bad == 0, "%s: %lld chosen f32 patterns as onnx's codes (%d differ)", key, (long long)n, bad);
}

static void test_against_onnx(void) {
    const char *src = getenv("TS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/lowbits_v1.bin", src ? src : ".");
    fixture *f = fixture_load(path);
    CHECK(f != NULL, "fixture %s", path);
    if (!f) return;
    const ts_array *xa = fixture_get(f, "f32");
    int64_t n = xa ? ts_array_numel(xa) : 0;
    const uint32_t *x = entry(f, "f32", -1);
    if (x) {
        /* the cases the fixture promises are there (a smaller set would pass vacuously) */
        static const uint32_t must[] = {0x43e80000u /* 464: e4m3fn's tie past 448 */, 0x43700000u /* 240 */,
                                        0x47600000u /* 57344 */, 0x40c00000u /* 6 */, 0x80000000u, 0x7f800000u,
                                        0xff800000u, 0x7fc00000u, 0x00000001u, 0x3f400000u};
        int found = fixture_count_present(x, n, must, sizeof must / sizeof must[0]);
        CHECK(n > 5000 && found == (int)(sizeof must / sizeof must[0]),
              "the fixture has %lld f32 patterns, the boundary cases among them (%d of %zu)", (long long)n, found,
              sizeof must / sizeof must[0]);
    }
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        check_decode(f, types[k].name, types[k].type);
        if (!x) continue;
        char key[64];
        snprintf(key, sizeof key, "%s_sat", types[k].name);
        check_encode(f, key, types[k].type, TS_LOWBITS_SATURATE, x, n);
        snprintf(key, sizeof key, "%s_nosat", types[k].name);
        check_encode(f, key, types[k].type, 0, x, n);
    }
    if (x) {
        check_encode(f, "float8e8m0_down_sat", TS_LOWBITS_F8E8M0, TS_LOWBITS_SATURATE | TS_LOWBITS_ROUND_DOWN, x, n);
        check_encode(f, "float8e8m0_down_nosat", TS_LOWBITS_F8E8M0, TS_LOWBITS_ROUND_DOWN, x, n);
        check_encode(f, "float8e8m0_nearest_sat", TS_LOWBITS_F8E8M0, TS_LOWBITS_SATURATE | TS_LOWBITS_ROUND_NEAREST, x, n);
        check_encode(f, "float8e8m0_nearest_nosat", TS_LOWBITS_F8E8M0, TS_LOWBITS_ROUND_NEAREST, x, n);
    }
    fixture_free(f);
}

/* Known values, from the types' definitions. */
static void test_round(void) {
    CHECK(ts_lowbits_round(TS_LOWBITS_F8E4M3FN, 464.0f, TS_LOWBITS_SATURATE) == 448.0f, "e4m3fn: 464 ties to 448 (even)");
    CHECK(isnan(ts_lowbits_round(TS_LOWBITS_F8E4M3FN, 1000.0f, 0)), "e4m3fn without saturate: 1000 is NaN");
    CHECK(ts_lowbits_round(TS_LOWBITS_F8E4M3FN, -1000.0f, TS_LOWBITS_SATURATE) == -448.0f, "e4m3fn saturating: -1000 is -448");
    CHECK(isinf(ts_lowbits_round(TS_LOWBITS_F8E5M2, 1e6f, 0)), "e5m2 without saturate: 1e6 is Inf");
    CHECK(ts_lowbits_round(TS_LOWBITS_F8E5M2, INFINITY, TS_LOWBITS_SATURATE) == 57344.0f, "e5m2 saturating: Inf is 57344");
    float z = ts_lowbits_round(TS_LOWBITS_F8E4M3FNUZ, -0.0f, 0);
    CHECK(z == 0.0f && !signbit(z), "e4m3fnuz has no -0");
    CHECK(ts_lowbits_from_f32(TS_LOWBITS_F8E5M2FNUZ, NAN, 0) == 0x80u, "e5m2fnuz's NaN is 0x80");
    CHECK(ts_lowbits_round(TS_LOWBITS_F4E2M1, 5.0f, 0) == 4.0f && ts_lowbits_round(TS_LOWBITS_F4E2M1, 7.0f, 0) == 6.0f,
          "float4e2m1: 5 ties to 4, 7 clamps to 6");
    CHECK(ts_lowbits_round(TS_LOWBITS_F8E8M0, 3.0f, 0) == 4.0f &&
              ts_lowbits_round(TS_LOWBITS_F8E8M0, 3.0f, TS_LOWBITS_ROUND_DOWN) == 2.0f,
          "e8m0: 3 rounds up to 4, down to 2");
    CHECK(ts_lowbits_round(TS_LOWBITS_INT4, 9.0f, 0) == -7.0f && ts_lowbits_round(TS_LOWBITS_UINT2, -1.5f, 0) == 3.0f,
          "int4: 9 wraps to -7; uint2: -1.5 truncates to -1, wraps to 3");
}

int main(void) {
    test_against_onnx();
    test_round();
    return check_summary("test_lowbits");
}
