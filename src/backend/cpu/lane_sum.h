/* lane_sum.h -- a long sum of floats that vectorises and keeps double's
 * accuracy across blocks: the reductions of the normalisations (batch
 * norm, group norm) and of a convolution's bias gradient. A running
 * double sum of one element at a time waits on each add (four cycles an
 * element); eight float lanes do not. */
#ifndef TS_LANE_SUM_H
#define TS_LANE_SUM_H

#include <stdint.h>

/* sum (a[i] - ma) (b[i] - mb) over one plane (b NULL: sum a[i] - ma), in L
 * float lanes (vectorised) over blocks of LANE_BLOCK elements, each
 * block's total added in double: a lane sums at most LANE_BLOCK / L terms
 * in float, so a long plane (112 x 112 of a stem) loses no more than a
 * short one, and the sums over the batch stay in double. L = 8 lanes are
 * one chain of vector adds, each waiting on the one before (4 cycles for
 * 8 floats: slower than the L2 cache delivers them); 32 lanes are four
 * chains, folded into 8 in float at the end of a block (a lane then sums
 * at most LANE_BLOCK / 8 terms in float, as with 8 lanes). The lanes are
 * summed in their order, so a sum is the same whatever the vector width
 * the compiler picks. L is 8 or 32. */
#define LANE_BLOCK 256
static inline __attribute__((always_inline)) double ts_lane_sum_lanes(const float *restrict a, float ma, const float *restrict b, float mb,
                                                                      int64_t n, int L) {
    double t = 0;
    int64_t i = 0;
    for (int64_t end = n - n % L; i < end;) {
        int64_t stop = end - i > LANE_BLOCK ? i + LANE_BLOCK : end;
        float acc[32] = {0};
        if (b)
            for (; i < stop; i += L)
                for (int k = 0; k < L; k++) acc[k] += (a[i + k] - ma) * (b[i + k] - mb);
        else
            for (; i < stop; i += L)
                for (int k = 0; k < L; k++) acc[k] += a[i + k] - ma;
        for (int k = 0; k < 8; k++) { /* the lanes k, k+8, ... in float, then those 8 in double */
            float lane = acc[k];
            for (int q = 8; q < L; q += 8) lane += acc[q + k];
            t += lane;
        }
    }
    for (; i < n; i++) t += (double)(a[i] - ma) * (b ? (double)(b[i] - mb) : 1.0);
    return t;
}

/* 8 lanes: the normalisations' rows and the bias gradients */
static inline double ts_lane_sum(const float *restrict a, float ma, const float *restrict b, float mb, int64_t n) {
    return ts_lane_sum_lanes(a, ma, b, mb, n, 8);
}

/* 32 lanes: batch norm's planes (the last n mod 32 in 8 lanes) */
static inline double ts_lane_sum32(const float *restrict a, float ma, const float *restrict b, float mb, int64_t n) {
    int64_t m = n - n % 32;
    return ts_lane_sum_lanes(a, ma, b, mb, m, 32) + ts_lane_sum_lanes(a + m, ma, b ? b + m : NULL, mb, n - m, 8);
}

#endif
