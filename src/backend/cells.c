/* cells.c -- an i64 tensor's values moved by the 4-byte kernels of the
 * data-movement ops (reshape, permute, slice, concat, gather's data,
 * where's values) as pairs of cells: the twin node and the kernel context
 * that see one more dim of 2 (backend.h). */
#include "backend/backend.h"
#include "graph/ops.h"

bool ts_cells_node(const ts_tensor *t, const ts_shape *in0, const ts_shape *out, ts_tensor *twin) {
    if (in0->ndim >= TS_MAX_DIMS || out->ndim >= TS_MAX_DIMS) return false;
    *twin = *t;
    if (t->op == TS_OP_PERMUTE) twin->attr[in0->ndim] = in0->ndim;
    return true;
}

void ts_kctx_as_cells(ts_kctx *k, const ts_tensor *twin) {
    for (int j = 0; j < k->n_in; j++) {
        bool data = !ts_op_int_input(twin->op, j);
        if (!data && twin->op != TS_OP_WHERE) continue;
        k->in_shape[j].d[k->in_shape[j].ndim++] = data ? 2 : 1;
        if (data) k->in_dtype[j] = TS_F32;
    }
    k->out_shape.d[k->out_shape.ndim++] = 2;
    k->out_dtype = TS_F32;
    k->node = twin;
}
