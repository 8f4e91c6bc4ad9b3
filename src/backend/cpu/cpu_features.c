/* cpu_features.c -- the CPU's vector instructions, read once from cpuid:
 * an instruction set counts only where the OS also saves its registers
 * (XGETBV), as a kernel using it would otherwise fault. */
#include "backend/cpu/cpu_features.h"

#include "backend/cpu/bf16_gemm.h"
#include "core/core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the levels above generic are x86-64's (vk.c has their tables there) */
#if defined(__x86_64__)
#include <cpuid.h>
#define TS_X86 1
#else
#define TS_X86 0
#endif

static ts_cpu_flags flags;
static int level_max, level;
static char line[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *const level_names[TS_CPU_LEVELS] = {"generic", "avx2", "avx512"};

const char *ts_cpu_level_name(int l) { return l >= 0 && l < TS_CPU_LEVELS ? level_names[l] : "?"; }

int ts_cpu_level_parse(const char *name) {
    for (int l = 0; name && l < TS_CPU_LEVELS; l++)
        if (strcasecmp(name, level_names[l]) == 0) return l;
    return -1;
}

#if TS_X86
static void read_flags(ts_cpu_flags *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    bool ymm = (xcr0 & 0x6) == 0x6;              /* SSE and AVX state */
    bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;     /* opmask, ZMM_Hi256, Hi16_ZMM */
    bool tiles = (xcr0 & 0x60000) == 0x60000;    /* XTILECFG, XTILEDATA */
    f->avx = avx && ymm;
    f->fma = f->avx && (c & (1u << 12));
    f->f16c = f->avx && (c & (1u << 29));
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = f->avx && (b & (1u << 5));
    f->avx512f = zmm && (b & (1u << 16));
    f->avx512dq = f->avx512f && (b & (1u << 17));
    f->avx512bw = f->avx512f && (b & (1u << 30));
    f->avx512vl = f->avx512f && (b & (1u << 31));
    f->amx_tile = tiles && (d & (1u << 24));
    f->amx_bf16 = f->amx_tile && (d & (1u << 22));
    unsigned max_sub = a;
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f->avx512_bf16 = f->avx512f && (a & (1u << 5));
    }
}
#else
static void read_flags(ts_cpu_flags *f) { (void)f; }
#endif

static void init(void) {
    read_flags(&flags);
    level_max = TS_CPU_GENERIC;
    if (flags.avx2 && flags.fma && flags.f16c) level_max = TS_CPU_AVX2;
    if (level_max == TS_CPU_AVX2 && flags.avx512f && flags.avx512bw && flags.avx512vl && flags.avx512dq)
        level_max = TS_CPU_AVX512;
    level = level_max;
    const char *want = getenv("TS_CPU");
    char note[96] = "";
    if (want && *want) {
        int l = ts_cpu_level_parse(want);
        if (l < 0) {
            ts_logf(TS_LOG_WARN, "TS_CPU='%s' is not a kernel level (use generic, avx2 or avx512); taken as unset", want);
            snprintf(note, sizeof note, ", TS_CPU=%s not understood", want);
        } else if (l > level_max) {
            ts_logf(TS_LOG_WARN, "TS_CPU=%s: this CPU runs at most %s kernels; using those", want, level_names[level_max]);
            snprintf(note, sizeof note, ", TS_CPU=%s above this CPU", want);
        } else {
            level = l;
            if (l < level_max) snprintf(note, sizeof note, " (TS_CPU)");
        }
    }
    struct { bool on; const char *name; } list[] = {
        {flags.avx, "avx"},           {flags.avx2, "avx2"},         {flags.fma, "fma"},
        {flags.f16c, "f16c"},         {flags.avx512f, "avx512f"},   {flags.avx512bw, "avx512bw"},
        {flags.avx512vl, "avx512vl"}, {flags.avx512dq, "avx512dq"}, {flags.avx512_bf16, "avx512_bf16"},
        {flags.amx_tile, "amx_tile"}, {flags.amx_bf16, "amx_bf16"},
    };
    size_t used = 0;
    for (size_t i = 0; i < TS_ARRAY_LEN(list); i++)
        if (list[i].on) used += (size_t)snprintf(line + used, sizeof line - used, "%s%s", used ? " " : "", list[i].name);
    snprintf(line + used, sizeof line - used, "%skernels %s%s", used ? "; " : "", level_names[level], note);
}

const ts_cpu_flags *ts_cpu_flags_get(void) {
    pthread_once(&once, init);
    return &flags;
}

int ts_cpu_level_max(void) {
    pthread_once(&once, init);
    return level_max;
}

int ts_cpu_level(void) {
    pthread_once(&once, init);
    return level;
}

/* the public line: the flags and level, then the bf16 products' route
 * (bf16_gemm.c asks ts_cpu_flags_get in its own once: this one runs after) */
static char public_line[sizeof line + 64];
static pthread_once_t public_once = PTHREAD_ONCE_INIT;

static void make_public_line(void) {
    pthread_once(&once, init);
    snprintf(public_line, sizeof public_line, "%s; bf16 products %s", line, ts_cpu_bf16_gemm_route());
}

const char *ts_cpu_features(void) {
    pthread_once(&public_once, make_public_line);
    return public_line;
}
