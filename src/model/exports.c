/* exports.c -- what the diagnostics write of a model, behind the public
 * calls: the graph as text or DOT (diag/graph_dump.c), the graph as an
 * ONNX file (diag/onnx_export.c) and the debugger dump's plan
 * (dump_debug.c), the last two after compiling the model when it is not.
 * Compiling is the model layer's, so diag/ is handed a compiled model and
 * what it reads of it. */
#include "model/model.h"
#include "model/dump_debug.h"
#include "diag/graph_dump.h"
#include "diag/hooks.h"
#include "diag/onnx_export.h"

ts_status ts_model_save_graph(ts_model *m, const char *path) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_save_graph: model is NULL");
    if (!path || !path[0]) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_save_graph: give the path of the .onnx file to write");
    ts_status st = m->run.prog ? TS_OK : ts_model_compile(m);
    if (st) return st;
    if ((st = ts_graph_values_current(m->run.g))) return st; /* a device's parameters back on the host */
    if (m->run.training && (st = ts_device_fetch_state(m->run.prog, m->run.dev))) return st;
    ts_model_def def = ts_model_definition(m);
    ts_bwd_model bm = ts_bwd_of(&m->run);
    return ts_onnx_export(&def, &bm, path);
}

ts_status ts_model_dump_debug_plan(ts_model *m, int64_t last_run, int64_t *tensors, int64_t *steps, int64_t *bytes) {
    if (!m || !tensors || !steps || !bytes) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_dump_debug_plan: NULL argument");
    if (!m->run.opts.dump) return ts_error(TS_ERR_STATE, "ts_model_dump_debug_plan: the model has no dump; set ts_options_set_dump_debug before making it");
    if (!m->run.opts.dump->last && last_run < 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_dump_debug_plan: the dump runs to the end; give the last run the model will make");
    if (!m->compiled || m->stale) {
        ts_status st = ts_model_compile(m);
        if (st) return st;
    }
    return ts_dump_debug_plan(m, last_run, tensors, steps, bytes);
}

char *ts_graph_dump(const ts_graph *g, const ts_model *m, ts_dump_format fmt, int flags) {
    ts_bwd_model bm = m ? ts_bwd_of(&m->run) : (ts_bwd_model){0};
    return ts_graph_dump_of(g, m ? &bm : NULL, fmt, flags);
}
