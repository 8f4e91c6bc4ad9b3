/* bf16_avx512.c -- tensorscope's own bf16 GEMM for CPUs with avx512_bf16
 * (bf16_gemm.h): vdpbf16ps multiplies pairs of bf16 numbers exactly and
 * adds them to f32 sums. CMake compiles this file alone with
 * -mavx512f -mavx512bw -mavx512vl -mavx512bf16; bf16_gemm.c calls it only
 * where cpu_features.h finds the instructions.
 *
 * The operands are packed once per product into bf16 pairs, k interleaved
 * by 2 as the instruction reads them (an f32 operand, a gradient, is
 * rounded to bf16 to nearest even while it is packed): B into panels of NR
 * columns over all of k, A, one block of MC rows by KC at a time, into
 * panels of MR rows. A held in bf16 cells with k contiguous (a matmul's
 * activations, its gradient's bf16 copy) is not packed: its rows' k pairs
 * are already the words a panel would hold, and the microkernel reads them
 * in place (only a last partial panel of rows is packed). The MR x NR
 * microkernel keeps its 24 sums in registers over a KC block: per k pair
 * two loads of B and one broadcast of A per row. The pool packs B's
 * panels, then splits C's rows (or its column panels where rows would
 * leave a thread more); every thread reads the one packed B. Products
 * of two bf16 numbers are exact in f32; the instruction adds them to the
 * sums with f32 rounding, denormal inputs and outputs flushed to zero. */
#include "backend/cpu/bf16_gemm.h"
#include "backend/cpu/kernels_tensor.h"

#if defined(__x86_64__) && defined(__AVX512BF16__)
#include "backend/pool.h"
#include "core/core.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum {
    MR = 12,  /* rows of a tile: one broadcast of A each */
    NR = 32,  /* columns of a tile: two vectors of 16 f32 sums */
    KC = 512, /* k per packed block of A (even) */
    MC = 96,  /* rows per packed block of A (a multiple of MR) */
};

bool ts_bf16k_built(void) { return true; }

/* 16 f32 bit patterns rounded to bf16 to nearest even (ts_f32_to_bf16,
 * NaNs quiet), in the high half of each lane, the low half zero */
static inline __m512i round_hi(__m512i u) {
    __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

static inline uint32_t round1(float x) { /* one value as round_hi does it, >> 16 */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x0040u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

/* element (r, k) of an operand as bf16 bits; 0 outside [0, rows) x [0, K) */
static inline uint32_t elem(const ts_bf16_mat *m, int64_t r, int64_t k) {
    int64_t at = r * m->rs + k * m->cs;
    if (m->f32) return round1(((const float *)m->data)[at]);
    return ((const uint16_t *)m->data)[at];
}

/* the 16 words of row r's pairs from k (k contiguous in the row): two
 * bf16 cells each, or two f32 values rounded */
static inline __m512i row_words(const ts_bf16_mat *m, int64_t r, int64_t k) {
    if (!m->f32) return _mm512_loadu_si512((const uint16_t *)m->data + r * m->rs + k);
    const float *s = (const float *)m->data + r * m->rs + k;
    const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15,
                                         13, 11, 9, 7, 5, 3, 1); /* the high halves of 32 rounded values */
    return _mm512_permutex2var_epi16(round_hi(_mm512_loadu_si512(s)), odd, round_hi(_mm512_loadu_si512(s + 16)));
}

/* rows [r0, r0 + nr) by k [k0, k0 + kc) (kc rounded up to even, the pad
 * zero) into panels of R rows (the last one's missing rows zero), panel q
 * at out + q * stride as [kc/2][R] words: word (p, r) of a panel holds
 * elements (r, k0 + 2p) low and (r, k0 + 2p + 1) high */
static void pack(const ts_bf16_mat *m, int64_t r0, int64_t nr, int R, int64_t k0, int64_t kc, int64_t K, uint32_t *out, int64_t stride) {
    int64_t kp = (kc + 1) / 2, whole = (K - k0 < kc ? K - k0 : kc) / 2; /* pairs, those with both k inside K */
    int64_t panels = (nr + R - 1) / R, p = 0;
    if (m->rs == 1) { /* rows contiguous: two k lines interleaved, up to 16 rows a time, every panel of a line in turn */
        for (; p < whole; p++) {
            int64_t k = k0 + 2 * p;
            for (int64_t q = 0; q < panels; q++)
                for (int r = 0; r < R; r += 16) {
                    int64_t row = q * R + r, n = nr - row < 0 ? 0 : nr - row > 16 ? 16 : nr - row;
                    if (n > R - r) n = R - r;
                    __mmask16 live = (__mmask16)((1u << n) - 1u);
                    __m512i lo, hi;
                    if (m->f32) {
                        const float *s = (const float *)m->data + (r0 + row) + k * m->cs;
                        lo = _mm512_srli_epi32(round_hi(_mm512_maskz_loadu_epi32(live, s)), 16);
                        hi = round_hi(_mm512_maskz_loadu_epi32(live, s + m->cs));
                    } else {
                        const uint16_t *s = (const uint16_t *)m->data + (r0 + row) + k * m->cs;
                        lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, s));
                        hi = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, s + m->cs)), 16);
                    }
                    __mmask16 room = (__mmask16)(R - r >= 16 ? 0xffffu : (1u << (R - r)) - 1u);
                    _mm512_mask_storeu_epi32(out + q * stride + p * R + r, room, _mm512_or_si512(lo, hi));
                }
        }
    } else if (m->cs == 1) { /* k contiguous in a row: each row's pairs are words */
        /* 16 pairs of 4 rows a time (bf16 cells, or f32 values rounded),
         * transposed in registers, one 128-bit store of 4 rows' words per
         * pair */
        int64_t q = 0;
        if (R % 4 == 0)
            for (; q + 16 <= whole; q += 16)
                for (int64_t row = 0; row < panels * R; row += 4) {
                    __m512i v[4];
                    for (int i = 0; i < 4; i++) v[i] = row + i < nr ? row_words(m, r0 + row + i, k0 + 2 * q) : _mm512_setzero_si512();
                    __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
                    __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
                    __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                                    _mm512_unpackhi_epi64(t1, t3)}; /* u[i]'s 128-bit lane L: pair 4L + i of the 4 rows */
                    uint32_t *o = out + (row / R) * stride + row % R + q * R;
                    for (int i = 0; i < 4; i++) {
                        _mm_storeu_si128((__m128i *)(void *)(o + (0 + i) * R), _mm512_extracti32x4_epi32(u[i], 0));
                        _mm_storeu_si128((__m128i *)(void *)(o + (4 + i) * R), _mm512_extracti32x4_epi32(u[i], 1));
                        _mm_storeu_si128((__m128i *)(void *)(o + (8 + i) * R), _mm512_extracti32x4_epi32(u[i], 2));
                        _mm_storeu_si128((__m128i *)(void *)(o + (12 + i) * R), _mm512_extracti32x4_epi32(u[i], 3));
                    }
                }
        for (int64_t row = 0; row < panels * R; row++) { /* the pairs left */
            uint32_t *o = out + (row / R) * stride + row % R;
            int64_t e = q;
            if (row < nr && m->f32)
                for (; e + 16 <= whole; e += 16) {
                    uint32_t w[16];
                    _mm512_storeu_si512(w, row_words(m, r0 + row, k0 + 2 * e));
                    for (int i = 0; i < 16; i++) o[(e + i) * R] = w[i];
                }
            for (; e < whole; e++) {
                uint32_t w = 0;
                if (row < nr) w = elem(m, r0 + row, k0 + 2 * e) | elem(m, r0 + row, k0 + 2 * e + 1) << 16;
                o[e * R] = w;
            }
        }
        p = whole;
    }
    for (; p < kp; p++) /* any layout; the odd k at K's end, the pad */
        for (int64_t row = 0; row < panels * R; row++) {
            int64_t k = k0 + 2 * p;
            uint32_t w = 0;
            if (row < nr && k < K) {
                w = elem(m, r0 + row, k);
                if (k + 1 < K) w |= elem(m, r0 + row, k + 1) << 16;
            }
            out[(row / R) * stride + p * R + row % R] = w;
        }
}

typedef struct job {
    int64_t M, N, K, kpad, ldc;
    ts_bf16_mat A, B;
    float beta;
    float *C, *out;
    const float *bias;
    const ts_out_act *act; /* with bias: act->out = f(out), each block of rows once its sums are done */
    uint32_t *pb; /* B packed: panel q at pb + q * kpad/2 * NR */
    bool by_cols; /* the pool splits column panels, not rows */
    bool direct;  /* A read in place, not packed (a_direct) */
    uint32_t (*pa)[KC / 2 * MR]; /* MC / MR panels of A for each slice */
    atomic_int next;              /* the slices that took theirs */
} job;

/* A's word (pair p, row i) of a tile: from a packed panel [kp][MR], or
 * (direct) straight from A's bf16 rows, lda words apart, k contiguous */
static inline __attribute__((always_inline)) __m512bh a_word(const uint32_t *pa, int64_t lda, int64_t p, int i, bool direct) {
    uint32_t w;
    if (direct) memcpy(&w, pa + i * lda + p, sizeof w);
    else w = pa[p * MR + i];
    return (__m512bh)_mm512_set1_epi32((int)w);
}

/* C's tile at rows mr <= MR, columns nr <= NR: the sums of the k pairs of
 * A's (pa, above) and pb [kp][NR] added to C (add), or stored as beta C +
 * sums; last: out = C + bias after it. Both forms sum the same products
 * in the same order. */
static inline __attribute__((always_inline)) void tile_body(int64_t kp, const uint32_t *pa, int64_t lda, bool direct, const uint32_t *pb,
                                                            float *c, int64_t ldc, int mr, int nr, bool add, float beta, const float *bias,
                                                            float *out, bool last) {
    __m512 s[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) s[i][0] = s[i][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb + p * NR), b1 = (__m512bh)_mm512_loadu_si512(pb + p * NR + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512bh a = a_word(pa, lda, p, i, direct);
            s[i][0] = _mm512_dpbf16_ps(s[i][0], a, b0);
            s[i][1] = _mm512_dpbf16_ps(s[i][1], a, b1);
        }
    }
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1u);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1u) : (__mmask16)0;
    __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
        __m512 v0 = s[i][0], v1 = s[i][1];
        if (add) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), v1);
        } else if (beta != 0.0f) {
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), v0);
            v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), v1);
        }
        _mm512_mask_storeu_ps(ci, m0, v0);
        _mm512_mask_storeu_ps(ci + 16, m1, v1);
        if (last && bias) {
            float *oi = out + i * ldc;
            _mm512_mask_storeu_ps(oi, m0, _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, bias)));
            _mm512_mask_storeu_ps(oi + 16, m1, _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, bias + 16)));
        }
    }
}

/* A from a packed panel [kp][MR] */
static void tile(int64_t kp, const uint32_t *pa, const uint32_t *pb, float *c, int64_t ldc, int mr, int nr, bool add, float beta,
                 const float *bias, float *out, bool last) {
    tile_body(kp, pa, 0, false, pb, c, ldc, mr, nr, add, beta, bias, out, last);
}

/* A's MR whole rows read in place: pa at row 0's first pair, lda words a row */
static void tile_direct(int64_t kp, const uint32_t *pa, int64_t lda, const uint32_t *pb, float *c, int64_t ldc, int nr, bool add,
                        float beta, const float *bias, float *out, bool last) {
    tile_body(kp, pa, lda, true, pb, c, ldc, MR, nr, add, beta, bias, out, last);
}

/* B's column panels [begin, end) packed */
static void pack_b(void *vctx, int64_t begin, int64_t end) {
    const job *j = vctx;
    int64_t c0 = begin * NR, n = (end * NR < j->N ? end * NR : j->N) - c0;
    pack(&j->B, c0, n, NR, 0, j->K, j->K, j->pb + begin * (j->kpad / 2) * NR, (j->kpad / 2) * NR);
}

/* C's rows [m0, m1) by column panels [q0, q1) */
static void block(const job *j, uint32_t (*pa)[KC / 2 * MR], int64_t m0, int64_t m1, int64_t q0, int64_t q1) {
    for (int64_t i0 = m0; i0 < m1; i0 += MC) {
        int64_t mc = m1 - i0 < MC ? m1 - i0 : MC;
        int64_t panels = (mc + MR - 1) / MR, whole = j->direct ? mc / MR : 0; /* the panels read in place */
        for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
            int64_t kc = j->K - k0 < KC ? j->K - k0 : KC, kp = (kc + 1) / 2;
            bool last = k0 + kc >= j->K;
            if (whole < panels) pack(&j->A, i0 + whole * MR, mc - whole * MR, MR, k0, kc, j->K, pa[whole], KC / 2 * MR);
            for (int64_t q = q0; q < q1; q++) {
                int64_t c0 = q * NR, nr = j->N - c0 < NR ? j->N - c0 : NR;
                const uint32_t *pb = j->pb + q * (j->kpad / 2) * NR + (k0 / 2) * NR;
                for (int64_t t = 0; t < panels; t++) {
                    int64_t r = i0 + t * MR, mr = m1 - r < MR ? m1 - r : MR;
                    const float *bias = j->bias ? j->bias + c0 : NULL;
                    float *out = j->out ? j->out + r * j->ldc + c0 : NULL, *c = j->C + r * j->ldc + c0;
                    if (t < whole)
                        tile_direct(kp, (const uint32_t *)j->A.data + (r * j->A.rs + k0) / 2, j->A.rs / 2, pb, c, j->ldc, (int)nr, k0 > 0,
                                    j->beta, bias, out, last);
                    else tile(kp, pa[t], pb, c, j->ldc, (int)mr, (int)nr, k0 > 0, j->beta, bias, out, last);
                }
            }
        }
        if (j->act) { /* the block's rows, over the columns done here, while in cache */
            int64_t c0 = q0 * NR, c1 = q1 * NR < j->N ? q1 * NR : j->N;
            for (int64_t r = i0; r < i0 + mc; r++) ts_out_act_apply(j->act, j->act->out + r * j->ldc + c0, j->out + r * j->ldc + c0, c1 - c0);
        }
    }
}

/* whether A's rows can be read in place as the tile reads a packed panel:
 * bf16 cells, k contiguous, every pair two cells of one 4-byte word (K
 * and the row stride even, the data 4-byte aligned); the pairs are the
 * words packing would copy, so the sums are the same */
static bool a_direct(const ts_bf16_mat *a, int64_t K) {
    return !a->f32 && a->cs == 1 && K % 2 == 0 && a->rs % 2 == 0 && (uintptr_t)a->data % 4 == 0;
}

static void slice(void *vctx, int64_t begin, int64_t end) {
    job *j = vctx;
    int64_t panels = (j->N + NR - 1) / NR;
    uint32_t(*pa)[KC / 2 * MR] = j->pa + (MC / MR) * atomic_fetch_add(&j->next, 1); /* this slice's own */
    if (j->by_cols) block(j, pa, 0, j->M, begin, end);
    else block(j, pa, begin * MR, end * MR < j->M ? end * MR : j->M, 0, panels);
}

/* the share of the busiest of t threads over n units, against an even split */
static double imbalance(int64_t n, int t) { return (double)((n + t - 1) / t) * t / (double)n; }

/* a slice keeps at least this many multiply-adds (as gemm.c), and B's
 * packing this many values */
#define MIN_MACS (256 * 1024)
#define MIN_PACK (64 * 1024)

size_t ts_bf16k_gemm_words(int64_t N, int64_t K, int threads) {
    int64_t kpad = K + (K & 1), panels = (N + NR - 1) / NR;
    return (size_t)(panels * (kpad / 2) * NR) + (size_t)(threads > 1 ? threads : 1) * (MC / MR) * (KC / 2 * MR);
}

ts_status ts_bf16k_gemm(struct ts_pool *p, int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C,
                        int64_t ldc, const float *bias, float *out, const ts_out_act *act) {
    if (M <= 0 || N <= 0 || K <= 0) return ts_bf16k_gemm_ws(p, M, N, K, A, B, beta, C, ldc, bias, out, act, NULL);
    uint32_t *ws = aligned_alloc(64, ts_bf16k_gemm_words(N, K, p ? ts_pool_threads(p) : 1) * sizeof(uint32_t));
    if (!ws) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = ts_bf16k_gemm_ws(p, M, N, K, A, B, beta, C, ldc, bias, out, act, ws);
    free(ws);
    return st;
}

ts_status ts_bf16k_gemm_ws(struct ts_pool *p, int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C,
                           int64_t ldc, const float *bias, float *out, const ts_out_act *act, uint32_t *ws) {
    if (M <= 0 || N <= 0) return TS_OK;
    int64_t kpad = K + (K & 1), panels = (N + NR - 1) / NR, tiles = (M + MR - 1) / MR;
    job j = {M, N, K, kpad, ldc, A, B, beta, C, bias ? out : NULL, bias, bias ? act : NULL, NULL, false, a_direct(&A, K), NULL, 0};
    if (K <= 0) { /* no products: C = beta C (and the bias) */
        for (int64_t i = 0; i < M; i++)
            for (int64_t c = 0; c < N; c++) {
                float v = beta != 0.0f ? beta * C[i * ldc + c] : 0.0f;
                C[i * ldc + c] = v;
                if (bias) out[i * ldc + c] = v + bias[c];
            }
        for (int64_t i = 0; j.act && i < M; i++) ts_out_act_apply(j.act, j.act->out + i * ldc, out + i * ldc, N);
        return TS_OK;
    }
    int t = p ? ts_pool_threads(p) : 1;
    size_t b_words = (size_t)(panels * (kpad / 2) * NR); /* a multiple of 16: 64-byte blocks */
    j.pb = ws; /* b_words, then t slices' blocks of A: ts_bf16k_gemm_words */
    j.pa = (uint32_t(*)[KC / 2 * MR])(void *)(j.pb + b_words);
    int64_t per_tile = MR * N * K, per_panel = NR * M * K;
    ts_pool_for(p, panels, MIN_PACK / (NR * kpad) + 1, pack_b, &j);
    /* columns where rows split the threads worse by more than a margin
     * for the column slices' packing, each of all of A, against their N
     * columns of products: a gradient's dB = A^T dC over 128 rows of
     * 12-row tiles splits its columns (rows would give a thread 6 tiles
     * against 5 and a part) */
    j.by_cols = t > 1 && imbalance(panels, t) * (1.0 + 16.0 / (double)N) < imbalance(tiles, t);
    if (j.by_cols) ts_pool_for(p, panels, MIN_MACS / per_panel + 1, slice, &j);
    else ts_pool_for(p, tiles, MIN_MACS / per_tile + 1, slice, &j);
    return TS_OK;
}

typedef struct round_job {
    uint16_t *dst;
    const float *src;
} round_job;

static void round_slice(void *vctx, int64_t begin, int64_t end) {
    const round_job *j = vctx;
    const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15,
                                         13, 11, 9, 7, 5, 3, 1); /* the high halves of 32 rounded values */
    int64_t i = begin;
    for (; i + 32 <= end; i += 32) {
        __m512i lo = round_hi(_mm512_loadu_si512(j->src + i)), hi = round_hi(_mm512_loadu_si512(j->src + i + 16));
        _mm512_storeu_si512(j->dst + i, _mm512_permutex2var_epi16(lo, odd, hi));
    }
    for (; i < end; i++) j->dst[i] = (uint16_t)round1(j->src[i]);
}

void ts_bf16k_round(struct ts_pool *p, uint16_t *dst, const float *src, int64_t n) {
    round_job j = {dst, src};
    ts_pool_for(p, n, MIN_PACK, round_slice, &j);
}

size_t ts_bf16k_serial_words(int64_t N, int64_t K) {
    int64_t kpad = K + (K & 1), panels = (N + NR - 1) / NR;
    return (size_t)(panels * (kpad / 2) * NR) + (size_t)(MC / MR) * (KC / 2 * MR);
}

void ts_bf16k_gemm_serial(int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C, int64_t ldc,
                          uint32_t *ws) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        ts_bf16k_gemm_ws(NULL, M, N, K, A, B, beta, C, ldc, NULL, NULL, NULL, NULL); /* C = beta C: no workspace read */
        return;
    }
    int64_t kpad = K + (K & 1), panels = (N + NR - 1) / NR, tiles = (M + MR - 1) / MR;
    job j = {M, N, K, kpad, ldc, A, B, beta, C, NULL, NULL, NULL, ws, false, a_direct(&A, K), NULL, 0};
    j.pa = (uint32_t(*)[KC / 2 * MR])(void *)(ws + panels * (kpad / 2) * NR);
    pack_b(&j, 0, panels);
    slice(&j, 0, tiles);
}

#else
bool ts_bf16k_built(void) { return false; }
void ts_bf16k_round(struct ts_pool *p, uint16_t *dst, const float *src, int64_t n) {
    (void)p, (void)dst, (void)src, (void)n;
}
size_t ts_bf16k_serial_words(int64_t N, int64_t K) {
    (void)N, (void)K;
    return 0;
}
void ts_bf16k_gemm_serial(int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C, int64_t ldc,
                          uint32_t *ws) {
    (void)M, (void)N, (void)K, (void)A, (void)B, (void)beta, (void)C, (void)ldc, (void)ws;
}
ts_status ts_bf16k_gemm(struct ts_pool *p, int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C,
                        int64_t ldc, const float *bias, float *out, const ts_out_act *act) {
    (void)p, (void)M, (void)N, (void)K, (void)A, (void)B, (void)beta, (void)C, (void)ldc, (void)bias, (void)out, (void)act;
    return TS_ERR_UNSUPPORTED;
}
size_t ts_bf16k_gemm_words(int64_t N, int64_t K, int threads) {
    (void)N, (void)K, (void)threads;
    return 0;
}
ts_status ts_bf16k_gemm_ws(struct ts_pool *p, int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C,
                           int64_t ldc, const float *bias, float *out, const ts_out_act *act, uint32_t *ws) {
    (void)ws;
    return ts_bf16k_gemm(p, M, N, K, A, B, beta, C, ldc, bias, out, act);
}
#endif
