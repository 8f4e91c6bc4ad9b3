/* test_half.c -- the 16-bit float conversions (core/half.h) against
 * PyTorch's, bit for bit (tests/fixtures/half_v1.bin, written by
 * tests/reference/make_half_fixtures.py):
 * (a) every f16 and every bf16 bit pattern widened to f32;
 * (b) f32 bit patterns chosen for every rounding case (ties to even at every
 *     exponent and one ulp either side, f16's subnormals and the 2^-25 tie,
 *     65504/65520, bf16's rounding to Inf below FLT_MAX, signed zeros,
 *     infinities, f32 subnormals, NaNs) rounded to f16 and to bf16.
 * NaNs: PyTorch drops a NaN's payload when it narrows (f16: 0x7e00 with the
 * sign; bf16: a NaN whose sign is not the input's), where ours keeps the top
 * of the payload as the F16C instructions do; a NaN is checked to stay a
 * NaN, and (f16) to keep its sign. Widening, both agree bit for bit (f16: a
 * signalling NaN comes back quiet, as from F16C).
 * (c) ts_round_half's values and its underflow/overflow counts on chosen
 *     values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/half.h"
#include "fixture.h"

static const uint32_t *entry(const fixture *f, const char *name, int64_t n) {
    const ts_array *a = fixture_get(f, name);
    bool ok = a && a->dtype == TS_I32 && (n < 0 || ts_array_numel(a) == n);
    CHECK(ok, "fixture entry %s (i32[%lld])", name, (long long)(a ? ts_array_numel(a) : 0));
    return ok ? a->data : NULL;
}

/* Widening: all 65536 patterns of one dtype, exact bits. */
static void check_widen(const fixture *f, const char *name, float (*widen)(uint16_t)) {
    const uint32_t *want = entry(f, name, 65536);
    if (!want) return;
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t got = ts_float_bits(widen((uint16_t)h));
        if (got != want[h] && bad++ < 5) printf("     %s(0x%04x) = 0x%08x, PyTorch 0x%08x\n", name, h, got, want[h]);
    }
    CHECK(bad == 0, "%s: all 65536 patterns as PyTorch's bits (%d differ)", name, bad);
}

/* Narrowing: the chosen f32 patterns; NaNs by NaN-ness (and sign where
 * PyTorch keeps it). Returns how many patterns were NaN. */
static int check_narrow(const char *name, const uint32_t *x, const uint32_t *want, int64_t n,
                        uint16_t (*narrow)(float), uint16_t exp_mask, bool nan_sign_kept) {
    int bad = 0, nans = 0;
    for (int64_t i = 0; i < n; i++) {
        uint16_t got = narrow(ts_bits_float(x[i])), w = (uint16_t)want[i];
        bool ok;
        if (isnan(ts_bits_float(x[i]))) {
            nans++;
            bool got_nan = (got & exp_mask) == exp_mask && (got & (uint16_t)~exp_mask & 0x7fffu);
            ok = got_nan && (!nan_sign_kept || (got & 0x8000u) == (w & 0x8000u));
        } else {
            ok = got == w;
        }
        if (!ok && bad++ < 5) printf("     %s(0x%08x) = 0x%04x, PyTorch 0x%04x\n", name, x[i], got, w);
    }
    CHECK(bad == 0, "%s: %lld chosen f32 patterns (%d NaNs) as PyTorch's bits (%d differ)", name, (long long)n,
          nans, bad);
    return nans;
}

static void test_against_pytorch(void) {
    const char *src = getenv("TS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/half_v1.bin", src ? src : ".");
    fixture *f = fixture_load(path);
    CHECK(f != NULL, "fixture %s", path);
    if (!f) return;
    check_widen(f, "f16_to_f32", ts_f16_to_f32);
    check_widen(f, "bf16_to_f32", ts_bf16_to_f32);

    const ts_array *xa = fixture_get(f, "f32");
    int64_t n = xa ? ts_array_numel(xa) : 0;
    const uint32_t *x = entry(f, "f32", -1), *to16 = entry(f, "f32_to_f16", n), *tob16 = entry(f, "f32_to_bf16", n);
    if (x && to16 && tob16) {
        /* the cases the fixture promises are there (a smaller set would pass vacuously) */
        static const uint32_t must[] = {0x33000000u, 0xb3000000u, 0x477ff000u, 0x477fefffu, 0x7f7f8000u,
                                        0x7f7f7fffu, 0x00000001u, 0x80000000u, 0x7f800000u, 0x7fa12345u};
        int found = fixture_count_present(x, n, must, sizeof must / sizeof must[0]);
        CHECK(n > 20000 && found == (int)(sizeof must / sizeof must[0]),
              "the fixture has %lld f32 patterns, the boundary cases among them (%d of %zu)", (long long)n, found,
              sizeof must / sizeof must[0]);
        int nans = check_narrow("f32_to_f16", x, to16, n, ts_f32_to_f16, 0x7c00u, true);
        check_narrow("f32_to_bf16", x, tob16, n, ts_f32_to_bf16, 0x7f80u, false);
        CHECK(nans >= 10, "NaN patterns were among them (%d)", nans);
    }
    fixture_free(f);
}

/* Known values: the halfway points and the loss counts. */
static void test_round_half(void) {
    const float in[] = {0x1p-25f,      /* f16: the tie between 0 and 2^-24: to 0 (even), underflow */
                        0x1.000002p-25f, /* just above it: 2^-24 */
                        -0x1p-26f,     /* underflow, keeps its sign */
                        0.0f,          /* zero is no underflow */
                        65504.0f,      /* f16's largest */
                        65519.99f,     /* still 65504 */
                        65520.0f,      /* overflow (the tie past 65504 goes to Inf) */
                        -1e6f,         /* overflow */
                        INFINITY,      /* already Inf: not counted */
                        NAN,           /* not counted */
                        1.0f + 0x1p-11f, /* tie between 1 and 1+2^-10: 1 (even) */
                        1.0f + 3 * 0x1p-11f}; /* tie between 1+2^-10 and 1+2^-9: 1+2^-9 (even) */
    const float want16[] = {0.0f, 0x1p-24f, -0.0f, 0.0f, 65504.0f, 65504.0f, INFINITY, -INFINITY,
                            INFINITY, NAN, 1.0f, 1.0f + 0x1p-9f};
    enum { N = sizeof in / sizeof in[0] };
    float out[N];
    ts_half_loss loss = {1, 2}; /* counts add to what is there */
    ts_round_half(TS_F16, out, in, N, &loss);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bool ok = isnan(want16[i]) ? isnan(out[i]) : ts_float_bits(out[i]) == ts_float_bits(want16[i]);
        if (!ok && bad++ < 5) printf("     f16 round(%a) = %a, want %a\n", (double)in[i], (double)out[i], (double)want16[i]);
    }
    CHECK(bad == 0, "ts_round_half(f16): ties to even, 2^-25 to 0, 65520 to Inf, signs kept");
    CHECK(loss.underflow == 1 + 2 && loss.overflow == 2 + 2,
          "ts_round_half(f16) counts 2 underflows and 2 overflows (%lld, %lld after 1, 2)",
          (long long)loss.underflow, (long long)loss.overflow);

    /* bf16: the tie below FLT_MAX goes to Inf; 1e-45 (an f32 subnormal) is
     * kept as bf16 has f32's exponent range; below half bf16's smallest
     * subnormal's distance it is 0 */
    const float inb[] = {0x1.fep127f /* bf16 max */, 0x1.ff0000p127f /* tie: to Inf (even) */,
                         0x1.fefffep127f, /* below the tie: bf16 max */
                         0x1p-133f /* bf16's smallest subnormal */, 0x1p-134f /* its tie with 0: to 0 */,
                         0x1.02p-134f /* just above: 2^-133 */, 1e30f, 3.0e38f};
    const float wantb[] = {0x1.fep127f, INFINITY, 0x1.fep127f, 0x1p-133f, 0.0f, 0x1p-133f, 0x1.94p99f,
                           0x1.c4p127f};
    enum { NB = sizeof inb / sizeof inb[0] };
    float outb[NB];
    ts_half_loss lb = {0, 0};
    ts_round_half(TS_BF16, outb, inb, NB, &lb);
    bad = 0;
    for (int i = 0; i < NB; i++)
        if (ts_float_bits(outb[i]) != ts_float_bits(wantb[i]) && bad++ < 5)
            printf("     bf16 round(%a) = %a, want %a\n", (double)inb[i], (double)outb[i], (double)wantb[i]);
    CHECK(bad == 0, "ts_round_half(bf16): the tie below FLT_MAX to Inf, 2^-134 to 0");
    CHECK(lb.underflow == 1 && lb.overflow == 1, "ts_round_half(bf16) counts 1 underflow and 1 overflow (%lld, %lld)",
          (long long)lb.underflow, (long long)lb.overflow);

    /* in place, and no counts asked for */
    float v[2] = {1.0f / 3.0f, 70000.0f};
    ts_round_half(TS_BF16, v, v, 2, NULL);
    CHECK(ts_float_bits(v[0]) == 0x3eab0000u && v[1] == 70144.0f, "ts_round_half in place (1/3 -> %a, 70000 -> %g)",
          (double)v[0], (double)v[1]);
}

int main(void) {
    test_against_pytorch();
    test_round_half();
    return check_summary("test_half");
}
