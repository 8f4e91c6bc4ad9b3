/* vk_generic.c -- vk_body.h's kernels for the generic level: x86-64's
 * baseline (SSE2), or the build's own flags on other CPUs (see vk.h). */
#define TS_VK_TABLE ts_vk_generic
#define TS_VK_NAME "generic"
#include "backend/cpu/vk_body.h"
