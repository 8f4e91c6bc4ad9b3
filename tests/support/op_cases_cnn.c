/* op_cases_cnn.c -- the op cases of the cnn family (op_check.h). */
#include "op_check.h"

void ts_op_cases_cnn(ts_op_checker *c) { (void)c; }
