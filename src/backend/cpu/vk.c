/* vk.c -- the table of vectorised kernels for the level chosen at run
 * time (vk.h, cpu_features.h). */
#include "backend/cpu/vk.h"

#include "backend/cpu/cpu_features.h"

#include <stddef.h>

extern const ts_vk ts_vk_generic;
#if defined(__x86_64__)
extern const ts_vk ts_vk_avx2, ts_vk_avx512;
static const ts_vk *const tables[TS_CPU_LEVELS] = {&ts_vk_generic, &ts_vk_avx2, &ts_vk_avx512};
#else
static const ts_vk *const tables[TS_CPU_LEVELS] = {&ts_vk_generic, NULL, NULL};
#endif

const ts_vk *ts_vk_at(int level) {
    if (level < 0 || level > ts_cpu_level_max()) return NULL;
    return tables[level];
}

const ts_vk *ts_vk_get(void) { return tables[ts_cpu_level()]; }
