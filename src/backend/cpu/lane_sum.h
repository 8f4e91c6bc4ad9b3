/* lane_sum.h -- a long sum of floats that vectorises and keeps double's
 * accuracy across blocks: the reductions of the normalisations (batch
 * norm, group norm) and of a convolution's bias gradient. A running
 * double sum of one element at a time waits on each add (four cycles an
 * element); eight float lanes do not. */
#ifndef TS_LANE_SUM_H
#define TS_LANE_SUM_H

#include <stdint.h>

/* sum (a[i] - ma) (b[i] - mb) over one plane (b NULL: sum a[i] - ma), in 8
 * float lanes (vectorised) over blocks of LANE_BLOCK elements, each
 * block's total added in double: a lane sums at most LANE_BLOCK / 8 terms
 * in float, so a long plane (112 x 112 of a stem) loses no more than a
 * short one, and the sums over the batch stay in double */
#define LANE_BLOCK 256
static inline double ts_lane_sum(const float *restrict a, float ma, const float *restrict b, float mb, int64_t n) {
    double t = 0;
    int64_t i = 0;
    for (int64_t end = n - n % 8; i < end;) {
        int64_t stop = end - i > LANE_BLOCK ? i + LANE_BLOCK : end;
        float acc[8] = {0};
        if (b)
            for (; i < stop; i += 8)
                for (int k = 0; k < 8; k++) acc[k] += (a[i + k] - ma) * (b[i + k] - mb);
        else
            for (; i < stop; i += 8)
                for (int k = 0; k < 8; k++) acc[k] += a[i + k] - ma;
        for (int k = 0; k < 8; k++) t += acc[k];
    }
    for (; i < n; i++) t += (double)(a[i] - ma) * (b ? (double)(b[i] - mb) : 1.0);
    return t;
}

#endif
