/* op_cases_tensor.c -- the op cases of the tensor family (op_check.h). */
#include "op_check.h"

void ts_op_cases_tensor(ts_op_checker *c) { (void)c; }
