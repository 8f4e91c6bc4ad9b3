/* vk_avx512.c -- vk_body.h's kernels for the avx512 level (CMake sets this
 * file's instruction set; see vk.h). */
#if defined(__x86_64__)
#define TS_VK_TABLE ts_vk_avx512
#define TS_VK_NAME "avx512"
#include "backend/cpu/vk_body.h"
#else
typedef int ts_vk_avx512_none; /* only x86-64 has this level */
#endif
