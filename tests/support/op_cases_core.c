/* op_cases_core.c -- the op cases of the core family (op_check.h). */
#include "op_check.h"

void ts_op_cases_core(ts_op_checker *c) { (void)c; }
