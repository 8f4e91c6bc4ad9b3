/* onnx_matmul.c -- matrix products: MatMul (a tied weight's folded transpose
 * read as its twin), Gemm, Einsum and Det. */
#include "import/onnx_ops.h"
#include "core/lowbits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* [.., K] x [K, N]: 2-D, or leading dims folded into rows. */
ts_tensor *ts_onnx_matmul_2d(importer *im, ts_tensor *a, ts_tensor *b, bool transb, ts_status *st) {
    if (b->shape.ndim != 2 || a->shape.ndim < 2) {
        *st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a batched MatMul (operands of %d and %d dimensions) is not available yet; 2-D weights "
                                 "are", a->shape.ndim, b->shape.ndim);
        return NULL;
    }
    ts_tensor *x = a;
    int64_t rows = ts_shape_numel(&a->shape) / a->shape.d[a->shape.ndim - 1];
    if (a->shape.ndim > 2) x = ts_reshape(im->g, a, 2, (int64_t[]){rows, a->shape.d[a->shape.ndim - 1]});
    ts_tensor *y = transb ? ts_matmul_t(im->g, x, b) : ts_matmul(im->g, x, b);
    if (y && a->shape.ndim > 2) {
        ts_shape s = a->shape;
        s.d[s.ndim - 1] = y->shape.d[1];
        y = ts_reshape(im->g, y, s.ndim, s.d);
    }
    if (!y) *st = ts_graph_status(im->g);
    return y;
}

/* An initializer the exporter made (onnx::...) that holds exactly the
 * transpose of a named 2-D initializer: a tied weight (lm_head = wte^T)
 * whose transpose an eval export folded. The named one, or NULL. */
static value *transposed_twin(importer *im, value *v, ts_status *st) {
    if (v->twin) return v->twin;
    if (!v->param || v->t || v->c.shape.ndim != 2 || strncmp(v->name, "onnx::", 6) != 0) return NULL;
    int64_t k = v->c.shape.d[0], n = v->c.shape.d[1];
    for (size_t i = 0; i < im->nv; i++) {
        value *w = im->v[i];
        if (w == v || !w->param || w->c.shape.ndim != 2 || w->c.shape.d[0] != n || w->c.shape.d[1] != k ||
            strncmp(w->name, "onnx::", 6) == 0)
            continue;
        if ((*st = ts_onnx_decoded(im, v)) || (*st = ts_onnx_decoded(im, w))) return NULL;
        bool same = true;
        for (int64_t r = 0; r < k && same; r++)
            for (int64_t c = 0; c < n && same; c++) same = v->c.v[r * n + c] == w->c.v[c * k + r];
        if (same) return w;
    }
    return NULL;
}

/* onnx_ops.h */
bool ts_onnx_int_operand(const value *v) { return v->t ? is_int_tensor(v->t) : !v->param && !ts_onnx_dtype_is_float(v->c.dtype) && !ts_lowbits_is(v->c.dtype); }

/* Whether v's values are int32: an i32 graph tensor (not an int64 one held
 * in i32) or an int32 constant */
static bool int32_operand(const value *v) {
    return v->t ? v->t->dtype == TS_I32 && (!v->c.dtype || v->c.dtype == TS_ONNX_INT32) : v->c.dtype == TS_ONNX_INT32;
}

/* The integer operands va and vb (graph tensors or constants, one a graph
 * tensor) as graph tensors of one dtype: i32 where both hold int32 values
 * (their products then wrap to int32, as onnxruntime's), else i64. false
 * where they are no such integers (*st set on an error). */
static bool int_pair(importer *im, value *va, value *vb, ts_tensor **a, ts_tensor **b, ts_status *st) {
    *a = *b = NULL;
    if (!ts_onnx_int_operand(va) || !ts_onnx_int_operand(vb) || (!va->t && !vb->t)) return false;
    bool i32 = int32_operand(va) && int32_operand(vb);
    *a = i32 && va->t ? va->t : ts_onnx_i64_of(im, va, st); /* an int32 constant: through int64, then i32 */
    *b = !*a ? NULL : i32 && vb->t ? vb->t : ts_onnx_i64_of(im, vb, st);
    if (*b && i32 && !va->t) *a = ts_cast(im->g, *a, TS_I32);
    if (*b && i32 && !vb->t) *b = ts_cast(im->g, *b, TS_I32);
    if (!*a || !*b) {
        if (!*st) *st = ts_graph_status(im->g);
        return false;
    }
    return true;
}

/* MatMul of integer operands (graph tensors or constants, one a graph
 * tensor), exactly: ts_matmul_int (numpy's matmul: 1-D operands, the
 * batch dims broadcast; the sums over K wrapping in int64, or in int32
 * for int32 operands, as onnxruntime's), in the output's memory only.
 * NULL (no error) where the operands are no such integers. */
static ts_tensor *int_matmul(importer *im, value *va, value *vb, ts_status *st) {
    ts_tensor *a, *b;
    if (!int_pair(im, va, vb, &a, &b, st)) return NULL;
    ts_tensor *y = ts_matmul_int(im->g, a, b);
    if (!y) *st = ts_graph_status(im->g);
    return y;
}

/* Gemm of integers (A and B integer graph tensors or constants, C too):
 * with whole alpha and beta, alpha A' B' + beta C exactly in int64,
 * wrapping (int32 A and B: the result wrapped to int32); with a
 * fractional one, as ONNX's reference: A' B' in the dtype, then alpha A'
 * B' + beta C in double, toward zero into the dtype (ts_graph_int_gemm).
 * NULL (no error) where it is none such (then in f32). */
static ts_tensor *int_gemm(importer *im, node_io *io, bool trans_a, bool trans_b, double alpha, double beta, ts_status *st) {
    value *va = io->in[0], *vb = io->in[1], *vc = io->n_in > 2 && io->in[2] && beta != 0.0 ? io->in[2] : NULL;
    if ((vc && !ts_onnx_int_operand(vc)) || shape_of(va)->ndim != 2 || shape_of(vb)->ndim != 2) return NULL; /* the f32 path says what is wrong */
    ts_tensor *a, *b;
    if (!int_pair(im, va, vb, &a, &b, st)) return NULL;
    ts_graph *g = im->g;
    ts_tensor *c = vc ? ts_onnx_i64_of(im, vc, st) : NULL, *y = NULL;
    if (vc && !c) return NULL;
    bool whole = alpha == floor(alpha) && beta == floor(beta) && fabs(alpha) <= 0x1p62 && fabs(beta) <= 0x1p62;
    if (!whole) {
        y = ts_graph_int_gemm(g, a, b, c, trans_a, trans_b, alpha, beta);
    } else {
        bool i32 = a->dtype == TS_I32;
        if (i32) a = ts_cast(g, a, TS_I64), b = ts_cast(g, b, TS_I64);
        if (trans_a) a = ts_transpose(g, a, 0, 1);
        if (trans_b) b = ts_transpose(g, b, 0, 1);
        y = ts_matmul_int(g, a, b);
        if (y && alpha != 1.0) y = ts_binary(g, "Mul", y, ts_onnx_int_scalar_like(im, y, (int64_t)alpha, st));
        if (y && c && beta != 1.0) c = ts_binary(g, "Mul", c, ts_onnx_int_scalar_like(im, c, (int64_t)beta, st));
        if (y && c) y = ts_binary(g, "Add", y, c);
        if (y && i32) y = ts_cast(g, y, TS_I32);
    }
    if (!y && !*st) *st = ts_graph_status(g);
    return y;
}

ts_status ts_onnx_op_matmul(importer *im, node_io *io) {
    if (io->n_in != 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "needs 2 inputs");
    ts_status st = TS_OK;
    ts_tensor *iy = int_matmul(im, io->in[0], io->in[1], &st);
    if (iy || st) return iy ? ts_onnx_built(im, iy, &io->out[0]) : st;
    value *twin = transposed_twin(im, io->in[1], &st);
    if (st) return st;
    ts_tensor *a = ts_onnx_as_tensor(im, io->in[0], &st), *b = a ? ts_onnx_as_tensor(im, twin ? twin : io->in[1], &st) : NULL;
    if (!b) return st;
    if (!twin && (a->shape.ndim == 1 || b->shape.ndim == 1)) { /* numpy's 1-D operands: [K] as [1,K] (A) or [K,1] (B), that dim dropped */
        bool a1 = a->shape.ndim == 1, b1 = b->shape.ndim == 1;
        if (a1) a = ts_reshape(im->g, a, 2, (int64_t[]){1, a->shape.d[0]});
        if (a && b1) b = ts_reshape(im->g, b, 2, (int64_t[]){b->shape.d[0], 1});
        ts_tensor *y = !a || !b ? NULL : b->shape.ndim > 2 ? ts_matmul_batched(im->g, a, b, 0, 0) : ts_onnx_matmul_2d(im, a, b, false, &st);
        if (!y) return st ? st : ts_graph_status(im->g);
        ts_shape s = y->shape;
        if (b1) s.ndim--;
        if (a1) s.d[s.ndim - 2 + (b1 ? 1 : 0)] = -1; /* the 1 of A's row, dropped below */
        int64_t d[TS_MAX_DIMS];
        int n = 0;
        for (int k = 0; k < s.ndim; k++)
            if (s.d[k] != -1) d[n++] = s.d[k];
        return ts_onnx_built(im, ts_reshape(im->g, y, n, d), &io->out[0]);
    }
    if (b->shape.ndim > 2 || (a->shape.ndim > 2 && !twin && !io->in[1]->param && b->shape.ndim == a->shape.ndim))
        return ts_onnx_built(im, ts_matmul_batched(im->g, a, b, 0, 0), &io->out[0]);
    bool transb = twin != NULL;
    if (!transb && b->op == TS_OP_PERMUTE && b->n_in == 1 && b->attr[0] == 1 && b->attr[1] == 0) {
        /* B = Transpose(W) (TorchScript's Linear without a bias): x W^T
         * read from W, with no copy of W nor of its gradient each step; the
         * Transpose's tensor stays (computed only where observed) */
        b = im->g->t[b->in[0]];
        transb = true;
    }
    ts_tensor *y = ts_onnx_matmul_2d(im, a, b, transb, &st);
    return y ? ts_onnx_built(im, y, &io->out[0]) : st;
}

/* Y = alpha op(A) op(B) + beta C */
ts_status ts_onnx_op_gemm(importer *im, node_io *io) {
    if (io->n_in < 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "needs at least 2 inputs");
    bool trans_a, trans_b;
    ts_status st = ts_onnx_attr_flag(im, "transA", &trans_a);
    if (!st) st = ts_onnx_attr_flag(im, "transB", &trans_b);
    if (st) return st;
    double alpha = ts_onnx_attr_f(im, "alpha", 1.0), beta = ts_onnx_attr_f(im, "beta", 1.0);
    ts_tensor *iy = int_gemm(im, io, trans_a, trans_b, alpha, beta, &st);
    if (iy || st) return iy ? ts_onnx_built(im, iy, &io->out[0]) : st;
    ts_tensor *a = ts_onnx_as_tensor(im, io->in[0], &st), *b = a ? ts_onnx_as_tensor(im, io->in[1], &st) : NULL;
    if (!b) return st;
    if (trans_a && a->shape.ndim != 2) return ts_onnx_node_error(im, TS_ERR_SHAPE, "A must be 2-D, got %d dimensions", a->shape.ndim);
    if (trans_a && !(a = ts_transpose(im->g, a, 0, 1))) return ts_graph_status(im->g);
    ts_tensor *y = ts_onnx_matmul_2d(im, a, b, trans_b, &st);
    if (!y) return st;
    if (alpha != 1.0) y = ts_scale(im->g, y, (float)alpha);
    if (io->n_in > 2 && io->in[2] && beta != 0.0) {
        ts_tensor *c = ts_onnx_as_tensor(im, io->in[2], &st);
        if (!c) return st;
        if (beta != 1.0) c = ts_scale(im->g, c, (float)beta);
        y = ts_add(im->g, y, c);
    }
    return ts_onnx_built(im, y, &io->out[0]);
}

/* Einsum's labels: a to z and A to Z are 0 to 51, an ellipsis' dims 52
 * on, numbered from the right (so that ellipses of different ranks line
 * up as numpy broadcasts them). */
#define EINSUM_ELLIPSIS 52
#define EINSUM_LABELS (EINSUM_ELLIPSIS + TS_MAX_DIMS)

/* One term of an Einsum equation (spaces skipped) for an operand of
 * `rank` dims (-1: the output, its ellipsis `ell` dims) into lab; *n. */
static bool einsum_term(const char *t, size_t len, int rank, int ell, int *lab, int *n, int *ell_out) {
    int letters = 0, k = 0;
    bool dots = false;
    for (size_t i = 0; i < len; i++) letters += (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z');
    int e = rank >= 0 ? rank - letters : ell;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (c == ' ') continue;
        if (c == '.') {
            if (dots || i + 2 >= len || t[i + 1] != '.' || t[i + 2] != '.' || e < 0) return false;
            dots = true;
            for (int j = 0; j < e; j++) {
                if (k >= TS_MAX_DIMS) return false;
                lab[k++] = EINSUM_ELLIPSIS + (e - 1 - j);
            }
            i += 2;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || k >= TS_MAX_DIMS) return false;
        lab[k++] = c >= 'a' ? c - 'a' : 26 + c - 'A';
    }
    if (rank >= 0 && !dots && letters != rank) return false;
    if (ell_out) *ell_out = dots ? e : 0;
    *n = k;
    return true;
}

/* x's diagonal over its dims p < q (both of d), exactly: the two dims
 * moved last and made one of d x d, a Gather of its positions i (d + 1),
 * and the diagonal's dim moved back to p: x without dim q, dim p holding
 * x[.., i, .., i, ..] (integers of any size; no products). */
static ts_tensor *diagonal_gathered(importer *im, ts_tensor *x, int p, int q, ts_status *st) {
    ts_graph *g = im->g;
    int n = x->shape.ndim, perm[TS_MAX_DIMS], back[TS_MAX_DIMS], k = 0;
    int64_t d = x->shape.d[p];
    if ((double)d * (double)(d + 1) > (double)INT32_MAX) {
        *st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a diagonal of %lld x %lld elements is more than int32 positions", (long long)d, (long long)d);
        return NULL;
    }
    ts_shape s = {.ndim = 0};
    for (int i = 0; i < n; i++)
        if (i != p && i != q) perm[k++] = i, s.d[s.ndim++] = x->shape.d[i];
    perm[k++] = p, perm[k++] = q;
    s.d[s.ndim++] = d * d;
    for (int i = 0, j = 0; i < n; i++) /* the diagonal (last after the Gather) back at p, the others in their order */
        if (i == p) back[i - (i > q)] = n - 2;
        else if (i != q) back[i - (i > q)] = j++;
    int32_t *at = ts_malloc((size_t)d * sizeof *at);
    char *name = ts_graph_op_output_name(g, "Diagonal");
    ts_tensor *idx = NULL;
    bool made = at && name;
    if (made) {
        for (int64_t i = 0; i < d; i++) at[i] = (int32_t)(i * (d + 1));
        idx = ts_constant(g, name, &(ts_array){.dtype = TS_I32, .ndim = 1, .shape = {d}, .data = at});
    }
    ts_free(at);
    ts_free(name);
    if (!made) {
        *st = TS_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    ts_tensor *y = ts_gather(g, ts_reshape(g, ts_permute(g, x, perm), s.ndim, s.d), idx, n - 2);
    bool same = true;
    for (int i = 0; i < n - 1; i++) same = same && back[i] == i;
    return same || !y ? y : ts_permute(g, y, back);
}

/* x with labels lab[n]: repeated labels made one (the diagonal: integers
 * gathered, diagonal_gathered; floats x times the identity over the two
 * axes, summed over the second), then the labels `keep` does not hold
 * summed out (integers by ts_reduce_int, exactly). */
static ts_tensor *einsum_reduce(importer *im, ts_tensor *x, int *lab, int *n, const bool *keep, bool integer, ts_status *st) {
    ts_graph *g = im->g;
    for (int p = 0; p < *n && x; p++)
        for (int q = p + 1; q < *n && x; q++) {
            if (lab[p] != lab[q]) continue;
            if (integer) {
                x = diagonal_gathered(im, x, p, q, st);
                if (!x) return NULL;
            } else {
                int64_t d = x->shape.d[p];
                ts_shape ms = {.ndim = *n};
                for (int k = 0; k < *n; k++) ms.d[k] = k == p || k == q ? d : 1;
                offsets_ctx oc = {d, d, 0}; /* i - j: 0 on the diagonal */
                ts_tensor *off = ts_onnx_computed_constant(im, "Diagonal", &(ts_shape){.ndim = 2, .d = {d, d}}, ts_onnx_fill_offsets, &oc, st);
                if (!off) return NULL;
                ts_tensor *eye = ts_reshape(g, num(g, ts_binary(g, "Equal", off, ts_onnx_scalar_constant(im, "Zero", 0.0f))), ms.ndim, ms.d);
                x = ts_reduce_sum(g, ts_mul(g, x, eye), 1, &q, 0);
            }
            for (int k = q; k + 1 < *n; k++) lab[k] = lab[k + 1];
            (*n)--;
            q--;
        }
    int ax[TS_MAX_DIMS], na = 0, m = 0;
    for (int k = 0; k < *n; k++)
        if (!keep[lab[k]]) ax[na++] = k;
        else lab[m++] = lab[k];
    if (x && na) x = integer ? ts_reduce_int(g, "Sum", x, na, ax, 0) : ts_reduce_sum(g, x, na, ax, 0);
    *n = m;
    if (!x && !*st) *st = ts_graph_status(g);
    return x;
}

/* x permuted so that its labels come in the order `want` (n of them). */
static ts_tensor *einsum_order(importer *im, ts_tensor *x, const int *lab, const int *want, int n) {
    int perm[TS_MAX_DIMS];
    bool same = true;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < n; k++)
            if (lab[k] == want[i]) perm[i] = k;
        same = same && perm[i] == i;
    }
    return same || n < 2 ? x : ts_permute(im->g, x, perm);
}

/* Einsum of one or two operands: repeated labels as diagonals, labels in
 * one operand only and not in the output summed out, then two operands as
 * one batched MatMul [batch, left, contracted] x [batch, contracted,
 * right], and the output's order; an ellipsis stands for the same dims in
 * each (numpy's implicit output where there is no "->"). Integer operands
 * (one a graph tensor): exactly in int64 (the diagonals gathered, the sums
 * ts_reduce_int's, the MatMul ts_matmul_int's; int32 operands wrapped to
 * int32); floats in f32. */
ts_status ts_onnx_op_einsum(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    const Attr *a = ts_onnx_attr(im, "equation");
    if (!a || !a->has_s) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'equation' is required");
    if (io->n_in < 1 || io->n_in > 2)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "an Einsum of %d operands is not available; one or two are (chain two-operand ones)", io->n_in);
    const char *eq = (const char *)a->s.data, *arrow = NULL;
    size_t len = a->s.len;
    for (size_t i = 0; i + 1 < len; i++)
        if (eq[i] == '-' && eq[i + 1] == '>') arrow = eq + i;
    size_t lhs = arrow ? (size_t)(arrow - eq) : len;
    ts_tensor *x[2] = {NULL, NULL};
    int lab[2][TS_MAX_DIMS], n[2] = {0, 0}, out[TS_MAX_DIMS], no = 0, ell = 0, count[EINSUM_LABELS] = {0};
    size_t start = 0;
    bool integer = true, any_tensor = false, i32 = true;
    for (int k = 0; k < io->n_in; k++) {
        integer = integer && ts_onnx_int_operand(io->in[k]);
        any_tensor = any_tensor || io->in[k]->t;
        i32 = i32 && io->in[k]->t && io->in[k]->t->dtype == TS_I32;
    }
    integer = integer && any_tensor;
    for (int k = 0; k < io->n_in; k++) {
        size_t end = start;
        while (end < lhs && eq[end] != ',') end++;
        if ((k + 1 < io->n_in) != (end < lhs)) return ts_onnx_node_error(im, TS_ERR_FORMAT, "equation '%.*s' has not one term per input", (int)len, eq);
        if (!(x[k] = integer ? ts_onnx_i64_of(im, io->in[k], &st) : as_f32(im, io->in[k], &st))) return st;
        int e = 0;
        if (!einsum_term(eq + start, end - start, x[k]->shape.ndim, 0, lab[k], &n[k], &e))
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "term %d of the equation '%.*s' does not fit its input of %d dims", k, (int)len, eq, x[k]->shape.ndim);
        if (e > ell) ell = e;
        for (int i = 0; i < n[k]; i++) count[lab[k][i]]++;
        start = end + 1;
    }
    if (arrow) {
        if (!einsum_term(arrow + 2, len - lhs - 2, -1, ell, out, &no, NULL))
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "the output of the equation '%.*s' is not a term", (int)len, eq);
    } else { /* numpy's: the ellipsis, then the labels seen once, in order */
        for (int l = EINSUM_ELLIPSIS + ell - 1; l >= EINSUM_ELLIPSIS; l--) out[no++] = l;
        for (int l = 0; l < EINSUM_ELLIPSIS; l++)
            if (count[l] == 1) out[no++] = l;
    }
    for (int k = 0; !integer && k < io->n_in; k++)
        if (is_int_tensor(x[k]) && !(x[k] = ts_onnx_f32_of(im, x[k], &st))) return st;
    bool keep[2][EINSUM_LABELS] = {{false}};
    int64_t size[EINSUM_LABELS] = {0};
    for (int i = 0; i < no; i++) keep[0][out[i]] = keep[1][out[i]] = true;
    for (int k = 0; k < io->n_in; k++)
        for (int i = 0; i < n[k]; i++) {
            int64_t d = x[k]->shape.d[i];
            if (size[lab[k][i]] && size[lab[k][i]] != d)
                return ts_onnx_node_error(im, TS_ERR_SHAPE, "a label of the equation '%.*s' stands for dims of %lld and %lld", (int)len, eq,
                                          (long long)size[lab[k][i]], (long long)d);
            size[lab[k][i]] = d;
        }
    if (io->n_in == 2) { /* a label of both operands is kept until the MatMul */
        bool in1[EINSUM_LABELS] = {false};
        for (int i = 0; i < n[1]; i++) in1[lab[1][i]] = true;
        for (int i = 0; i < n[0]; i++)
            if (in1[lab[0][i]]) keep[0][lab[0][i]] = keep[1][lab[0][i]] = true;
    }
    for (int k = 0; k < io->n_in; k++)
        if (!(x[k] = einsum_reduce(im, x[k], lab[k], &n[k], keep[k], integer, &st))) return st;
    ts_tensor *y;
    int ylab[TS_MAX_DIMS], ny = 0;
    if (io->n_in == 1) {
        y = x[0];
        ny = n[0];
        memcpy(ylab, lab[0], sizeof ylab);
    } else {
        bool in[2][EINSUM_LABELS] = {{false}}, outl[EINSUM_LABELS] = {false};
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < n[k]; i++) in[k][lab[k][i]] = true;
        for (int i = 0; i < no; i++) outl[out[i]] = true;
        int bl[TS_MAX_DIMS], ll[TS_MAX_DIMS], cl[TS_MAX_DIMS], rl[TS_MAX_DIMS], nb = 0, nl = 0, nc = 0, nr = 0;
        int64_t B = 1, L = 1, C = 1, R = 1;
        for (int i = 0; i < n[0]; i++) {
            int l = lab[0][i];
            if (in[1][l] && outl[l]) bl[nb++] = l, B *= size[l];
            else if (in[1][l]) cl[nc++] = l, C *= size[l];
            else ll[nl++] = l, L *= size[l];
        }
        for (int i = 0; i < n[1]; i++)
            if (!in[0][lab[1][i]]) rl[nr++] = lab[1][i], R *= size[lab[1][i]];
        int wa[TS_MAX_DIMS], wb[TS_MAX_DIMS], k = 0;
        for (int i = 0; i < nb; i++) wa[k++] = bl[i];
        for (int i = 0; i < nl; i++) wa[k++] = ll[i];
        for (int i = 0; i < nc; i++) wa[k++] = cl[i];
        k = 0;
        for (int i = 0; i < nb; i++) wb[k++] = bl[i];
        for (int i = 0; i < nc; i++) wb[k++] = cl[i];
        for (int i = 0; i < nr; i++) wb[k++] = rl[i];
        ts_tensor *pa = ts_reshape(g, einsum_order(im, x[0], lab[0], wa, n[0]), 3, (int64_t[]){B, L, C});
        ts_tensor *pb = ts_reshape(g, einsum_order(im, x[1], lab[1], wb, n[1]), 3, (int64_t[]){B, C, R});
        y = !pa || !pb ? NULL : integer ? ts_matmul_int(g, pa, pb) : ts_matmul_batched(g, pa, pb, 0, 0);
        ts_shape ys = {0};
        for (int i = 0; i < nb; i++) ylab[ny++] = bl[i];
        for (int i = 0; i < nl; i++) ylab[ny++] = ll[i];
        for (int i = 0; i < nr; i++) ylab[ny++] = rl[i];
        for (int i = 0; i < ny; i++) ys.d[ys.ndim++] = size[ylab[i]];
        if (y) y = ts_reshape(g, y, ys.ndim, ys.d);
    }
    if (!y) return st ? st : ts_graph_status(g);
    if (ny != no) return ts_onnx_node_error(im, TS_ERR_FORMAT, "the output of the equation '%.*s' names labels the inputs lack or repeats one", (int)len, eq);
    y = einsum_order(im, y, ylab, out, no);
    return ts_onnx_built(im, integer && i32 && y ? ts_cast(g, y, TS_I32) : y, &io->out[0]);
}

/* -------------------------------------------------------------------- Det */

/* Det: the determinants of x [...,M,M] (M up to 4) by Leibniz's formula,
 * Slices multiplied and added; the gradient reaches x. *out: [...]. */
static ts_status ts_onnx_det(ts_graph *g, ts_tensor *x, ts_tensor **out) {
    *out = NULL;
    int r = x->shape.ndim;
    int64_t n = r >= 2 ? x->shape.d[r - 1] : 0;
    if (r < 2 || x->shape.d[r - 2] != n || n > 4)
        return ts_error(TS_ERR_UNSUPPORTED, "takes square matrices [...,M,M] of M up to 4 (a sum over the M! permutations); it has %d dims%s", r,
                        r >= 2 && x->shape.d[r - 2] == n ? ", M over 4: not available yet" : "");
    ts_tensor *e[4][4];
    for (int64_t i = 0; i < n; i++) {
        ts_tensor *row = ts_slice(g, x, r - 2, i, 1);
        for (int64_t j = 0; j < n; j++) e[i][j] = ts_slice(g, row, r - 1, j, 1);
    }
    /* Leibniz: the sum over permutations p of sign(p) prod_i x[i, p(i)], the permutations in Heap's order */
    int p[4] = {0, 1, 2, 3}, c[4] = {0}, sign = 1;
    ts_tensor *det = NULL;
    for (int i = 0;;) {
        ts_tensor *term = e[0][p[0]];
        for (int64_t k = 1; k < n; k++) term = ts_mul(g, term, e[k][p[k]]);
        det = !det ? term : sign > 0 ? ts_add(g, det, term) : ts_sub(g, det, term);
        while (i < n && c[i] >= i) c[i++] = 0; /* Heap's algorithm, iteratively: the next permutation by one swap */
        if (i >= n) break;
        int a = i % 2 ? c[i] : 0, t = p[a];
        p[a] = p[i];
        p[i] = t;
        sign = -sign;
        c[i]++;
        i = 0;
    }
    ts_shape s = {.ndim = r - 2};
    for (int d = 0; d < r - 2; d++) s.d[d] = x->shape.d[d];
    ts_tensor *y = ts_reshape(g, det, s.ndim, s.d);
    ts_status st = ts_onnx_graph_status(g, y);
    if (!st) *out = y;
    return st;
}

/* Det (opset 11): ts_onnx_det above. */
ts_status ts_onnx_op_det(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *y;
    if (!x) return st;
    if ((st = ts_onnx_det(im->g, x, &y))) return ts_onnx_fold_result(im, st);
    return ts_onnx_built(im, y, &io->out[0]);
}
