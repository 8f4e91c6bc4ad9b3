/* onnx_matmul.c -- matrix products: MatMul (a tied weight's folded transpose
 * read as its twin), Gemm, Einsum and Det. */
#include "import/onnx_ops.h"

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

/* The most elements of the [.., M, K, N] products one block of an
 * integer MatMul forms (2^26: 512 MiB of int64); a larger product is
 * formed in blocks of rows, each within it. */
#define INT_MATMUL_MAX ((int64_t)1 << 26)

/* The most blocks an integer MatMul is split into; past it, in f32 */
#define INT_MATMUL_BLOCKS 4096

/* Whether v is an integer graph tensor or an integer constant (no
 * trained parameter). */
static bool int_value(const value *v) { return v->t ? is_int_tensor(v->t) : !v->param && !ts_onnx_dtype_is_float(v->c.dtype); }

/* The products of a read as ea [.., M, K, 1] by b read as eb [.., 1, K,
 * N] (numpy's broadcast of the batch dims), integer tensors of one dtype,
 * summed over K by ts_reduce_int, exactly (wrapping): in blocks of a's
 * rows that each form at most INT_MATMUL_MAX products (a row forms
 * row_products), concatenated along the rows. NULL (no error) where one
 * row's products pass it, or the blocks INT_MATMUL_BLOCKS. */
static ts_tensor *int_products(importer *im, ts_tensor *a, ts_tensor *b, const ts_shape *ea, const ts_shape *eb, double row_products, ts_status *st) {
    ts_graph *g = im->g;
    int md = ea->ndim - 3, yr = (ea->ndim > eb->ndim ? ea->ndim : eb->ndim) - 1; /* M's dim in a, the result's rank */
    int64_t M = ea->d[md], step = row_products < 1 ? (M > 1 ? M : 1) : (int64_t)((double)INT_MATMUL_MAX / row_products); /* no products: one block */
    if (step < 1) return NULL;
    int64_t n = M > step ? (M + step - 1) / step : 1;
    if (n > INT_MATMUL_BLOCKS) return NULL;
    ts_tensor **parts = ts_malloc((size_t)n * sizeof *parts), *ar = ts_reshape(g, a, ea->ndim, ea->d), *br = ts_reshape(g, b, eb->ndim, eb->d), *y = NULL;
    if (!parts) {
        *st = TS_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        ts_tensor *ak = n == 1 ? ar : ts_slice(g, ar, md, k * step, M - k * step < step ? M - k * step : step);
        parts[k] = ts_reduce_int(g, "Sum", ts_binary(g, "Mul", ak, br), 1, (const int[]){-2}, 0);
    }
    y = n == 1 ? parts[0] : ts_concat(g, parts, (int)n, yr - 2);
    ts_free(parts);
    if (!y) *st = ts_graph_status(g);
    return y;
}

/* MatMul of integer operands (graph tensors or constants, one a graph
 * tensor), exactly: int64 unless both are int32 (then wrapping to int32, as
 * onnxruntime's), the products of a [.., M, K, 1] by b [.., 1, K, N]
 * (numpy's broadcast of the batch dims) summed over K by ts_reduce_int
 * (int_products). NULL (no error) where the operands are no such integers
 * or int_products declines. */
static ts_tensor *int_matmul(importer *im, value *va, value *vb, ts_status *st) {
    if (!int_value(va) || !int_value(vb) || (!va->t && !vb->t)) return NULL;
    const ts_shape *sa = shape_of(va), *sb = shape_of(vb);
    int ra = sa->ndim < 2 ? 2 : sa->ndim, rb = sb->ndim < 2 ? 2 : sb->ndim, r = ra > rb ? ra : rb;
    if (sa->ndim < 1 || sb->ndim < 1 || r + 1 > TS_MAX_DIMS) return NULL;
    int64_t M = sa->ndim == 1 ? 1 : sa->d[sa->ndim - 2], K = sa->d[sa->ndim - 1], N = sb->ndim == 1 ? 1 : sb->d[sb->ndim - 1];
    int64_t batch = 1;
    for (int i = 0; i < r - 2; i++) {
        int64_t da = i - (r - ra) >= 0 ? sa->d[i - (r - ra)] : 1, db = i - (r - rb) >= 0 ? sb->d[i - (r - rb)] : 1;
        batch *= da > db ? da : db;
    }
    bool i32 = va->t && vb->t && va->t->dtype == TS_I32 && vb->t->dtype == TS_I32;
    ts_tensor *a = i32 ? va->t : ts_onnx_i64_of(im, va, st), *b = !a ? NULL : i32 ? vb->t : ts_onnx_i64_of(im, vb, st);
    if (!b) return NULL;
    ts_graph *g = im->g;
    ts_shape ea = {.ndim = ra + 1}, eb = {.ndim = rb + 1}; /* a [.., M, K, 1], b [.., 1, K, N] */
    for (int i = 0; i < ra - 2; i++) ea.d[i] = a->shape.d[i];
    ea.d[ra - 2] = M, ea.d[ra - 1] = K, ea.d[ra] = 1;
    for (int i = 0; i < rb - 2; i++) eb.d[i] = b->shape.d[i];
    eb.d[rb - 2] = 1, eb.d[rb - 1] = K, eb.d[rb] = N;
    ts_tensor *y = int_products(im, a, b, &ea, &eb, (double)batch * (double)K * (double)N, st);
    if (y && (sa->ndim == 1 || sb->ndim == 1)) { /* numpy's 1-D operands: their dim of 1 dropped */
        ts_shape s = {.ndim = 0};
        for (int i = 0; i < y->shape.ndim; i++)
            if (!((sa->ndim == 1 && i == y->shape.ndim - 2) || (sb->ndim == 1 && i == y->shape.ndim - 1))) s.d[s.ndim++] = y->shape.d[i];
        y = ts_reshape(g, y, s.ndim, s.d);
    }
    if (!y) *st = ts_graph_status(g);
    return y;
}

/* a [M, K] x b [K, N], integer tensors of one dtype, exactly
 * (int_products). NULL (no error) where one row's K x N products pass
 * INT_MATMUL_MAX. */
ts_tensor *ts_onnx_int_matmul_2d(importer *im, ts_tensor *a, ts_tensor *b, ts_status *st) {
    int64_t M = a->shape.d[0], K = a->shape.d[1], N = b->shape.d[1];
    return int_products(im, a, b, &(ts_shape){.ndim = 3, .d = {M, K, 1}}, &(ts_shape){.ndim = 3, .d = {1, K, N}}, (double)K * (double)N, st);
}

/* Gemm of integers (A and B integer graph tensors or constants, C too,
 * alpha and beta whole numbers): alpha A' B' + beta C exactly in int64,
 * wrapping (int32 A and B: the result wrapped to int32). NULL (no error)
 * where it is none such (then in f32). */
static ts_tensor *int_gemm(importer *im, node_io *io, bool trans_a, bool trans_b, double alpha, double beta, ts_status *st) {
    value *va = io->in[0], *vb = io->in[1], *vc = io->n_in > 2 && beta != 0.0 ? io->in[2] : NULL;
    if (!int_value(va) || !int_value(vb) || (!va->t && !vb->t) || (vc && !int_value(vc))) return NULL;
    if (alpha != floor(alpha) || beta != floor(beta) || fabs(alpha) > 0x1p62 || fabs(beta) > 0x1p62) return NULL;
    if (shape_of(va)->ndim != 2 || shape_of(vb)->ndim != 2) return NULL; /* the f32 path says what is wrong */
    ts_graph *g = im->g;
    bool i32 = va->t && vb->t && va->t->dtype == TS_I32 && vb->t->dtype == TS_I32;
    ts_tensor *a = ts_onnx_i64_of(im, va, st), *b = a ? ts_onnx_i64_of(im, vb, st) : NULL;
    if (b && trans_a) a = ts_transpose(g, a, 0, 1);
    if (b && trans_b) b = ts_transpose(g, b, 0, 1);
    ts_tensor *y = a && b ? ts_onnx_int_matmul_2d(im, a, b, st) : NULL;
    if (y && alpha != 1.0) y = ts_binary(g, "Mul", y, ts_onnx_int_scalar_like(im, y, (int64_t)alpha, st));
    if (y && vc) {
        ts_tensor *c = ts_onnx_i64_of(im, vc, st);
        if (c && beta != 1.0) c = ts_binary(g, "Mul", c, ts_onnx_int_scalar_like(im, c, (int64_t)beta, st));
        y = c ? ts_binary(g, "Add", y, c) : NULL;
    }
    if (y && i32) y = ts_cast(g, y, TS_I32);
    if (!y && !*st && ts_graph_status(g)) *st = ts_graph_status(g);
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

/* x with labels lab[n]: repeated labels made one (the diagonal: x times
 * the identity over the two axes, summed over the second), then the
 * labels `keep` does not hold summed out. */
static ts_tensor *einsum_reduce(importer *im, ts_tensor *x, int *lab, int *n, const bool *keep, bool integer, ts_status *st) {
    ts_graph *g = im->g;
    for (int p = 0; p < *n && x; p++)
        for (int q = p + 1; q < *n && x; q++) {
            if (lab[p] != lab[q]) continue;
            int64_t d = x->shape.d[p];
            ts_shape ms = {.ndim = *n};
            for (int k = 0; k < *n; k++) ms.d[k] = k == p || k == q ? d : 1;
            offsets_ctx oc = {d, d, 0}; /* i - j: 0 on the diagonal */
            ts_tensor *off = ts_onnx_computed_constant(im, "Diagonal", &(ts_shape){.ndim = 2, .d = {d, d}}, ts_onnx_fill_offsets, &oc, st);
            if (!off) return NULL;
            ts_tensor *eye = ts_reshape(g, num(g, ts_binary(g, "Equal", off, ts_onnx_scalar_constant(im, "Zero", 0.0f))), ms.ndim, ms.d);
            x = ts_reduce_sum(g, ts_mul(g, x, eye), 1, &q, 0);
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

/* Einsum of one or two operands (floats): repeated labels as diagonals,
 * labels in one operand only and not in the output summed out, then two
 * operands as one batched MatMul [batch, left, contracted] x [batch,
 * contracted, right], and the output's order; an ellipsis stands for the
 * same dims in each (numpy's implicit output where there is no "->").
 * Integer operands with no label repeated within one: exactly in int64
 * (the sums ts_reduce_int's, the MatMul int_products; int32 operands
 * wrapped to int32); else in f32. */
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
        integer = integer && int_value(io->in[k]);
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
    for (int k = 0; integer && k < io->n_in; k++) /* a diagonal: in f32 */
        for (int i = 0; integer && i < n[k]; i++)
            for (int j = i + 1; j < n[k]; j++) integer = integer && lab[k][i] != lab[k][j];
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
        y = NULL;
        if (integer && pa && pb) {
            y = int_products(im, pa, pb, &(ts_shape){.ndim = 4, .d = {B, L, C, 1}}, &(ts_shape){.ndim = 4, .d = {B, 1, C, R}}, (double)B * (double)C * (double)R, &st);
            if (!y && st) return st;
            if (!y) pa = ts_onnx_f32_of(im, pa, &st), pb = pa ? ts_onnx_f32_of(im, pb, &st) : NULL, integer = false; /* too many products */
        }
        if (!integer) y = pa && pb ? ts_matmul_batched(g, pa, pb, 0, 0) : NULL;
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
