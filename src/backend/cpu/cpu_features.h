/* cpu_features.h -- what the CPU at hand can run, asked once (cpuid and
 * the OS's saved register state), and the kernel level chosen from it:
 * the vectorised kernels (vk.h) and the bf16 products (cpu.c) pick their
 * code from here at run time, so one build runs on any x86-64 CPU.
 * TS_CPU=generic|avx2|avx512 (docs/backend.md) caps the level, for
 * comparing the paths on one machine; it never raises it above what the
 * CPU has. */
#ifndef TS_CPU_FEATURES_H
#define TS_CPU_FEATURES_H

#include <stdbool.h>

typedef struct ts_cpu_flags {
    bool avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16;
    bool amx_tile, amx_bf16;
} ts_cpu_flags;

/* the kernel levels, each a superset of the one before */
enum { TS_CPU_GENERIC, TS_CPU_AVX2, TS_CPU_AVX512, TS_CPU_LEVELS };

const ts_cpu_flags *ts_cpu_flags_get(void);
/* the highest level this CPU (and this build) can run */
int ts_cpu_level_max(void);
/* the level the kernels use: ts_cpu_level_max, capped by TS_CPU */
int ts_cpu_level(void);
const char *ts_cpu_level_name(int level);
/* TS_CPU's value parsed: a level, or -1 for a name that is none */
int ts_cpu_level_parse(const char *name);

#endif
