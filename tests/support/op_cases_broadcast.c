/* op_cases_broadcast.c -- the op cases of the broadcast family (op_check.h). */
#include "op_check.h"

void ts_op_cases_broadcast(ts_op_checker *c) { (void)c; }
