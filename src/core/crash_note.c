/* crash_note.c -- the op executing now, for the crash report (crash_note.h). */
#include "core/crash_note.h"

static const char *volatile g_op, *volatile g_tensor, *volatile g_where;

void ts_crash_set_current_op(const char *op_name, const char *tensor_name, const char *where) {
    g_op = op_name;
    g_tensor = tensor_name;
    g_where = where;
}

void ts_crash_current_op(const char **op_name, const char **tensor_name, const char **where) {
    *op_name = g_op;
    *tensor_name = g_tensor;
    *where = g_where;
}
