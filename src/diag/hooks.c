/* hooks.c -- diagnostics around compile and runs (being filled in). */
#include "diag/hooks.h"

void ts_diag_after_compile(const ts_model *m) { (void)m; }
void ts_diag_after_run(const ts_model *m, uint64_t run_ns) { (void)m, (void)run_ns; }
