/* onnx_resize.c -- resampling: Resize (every mode and coordinate transform,
 * antialiasing), Upsample, GridSample and AffineGrid. */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One resized axis of Resize: its interpolation as a matrix [in, out]
 * (column j the weights of output j over the inputs) and, for
 * tf_crop_and_resize, the extrapolation value of each output outside the
 * input (extra, 0 elsewhere). */
enum { RESIZE_NEAREST, RESIZE_LINEAR, RESIZE_CUBIC };
enum { COORD_HALF_PIXEL, COORD_HALF_PIXEL_SYMMETRIC, COORD_PYTORCH_HALF_PIXEL, COORD_ALIGN_CORNERS, COORD_ASYMMETRIC, COORD_TF_CROP };
enum { NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL };
typedef struct resize_axis {
    int64_t in, out;
    double scale, roi0, roi1, cubic_a;
    int mode, coord, nearest;
    bool exclude_outside, antialias;
    float extrapolation;
    bool *outside; /* per output: extrapolated (tf_crop_and_resize) */
} resize_axis;

/* The interpolation coefficients at `ratio` (0 < ratio <= 1: the source
 * coordinate's distance past the pixel before it), ONNX's: *n of them.
 * Cubic's are computed in f32, as the reference's are (its
 * cubic_coeff_a is a numpy float32, which takes the Python floats it
 * meets to float32); linear's in double. */
static void resize_coeffs(const resize_axis *r, double ratio, double *c, int *n) {
#ifdef __clang__
#pragma clang fp contract(off) /* each product rounded, as numpy's (gcc's ISO C mode fuses none) */
#endif
    double s = r->scale < 1.0 ? r->scale : 1.0, sum = 0;
    float A = (float)r->cubic_a, fsum = 0;
    if (r->mode == RESIZE_NEAREST) {
        bool whole = ratio == floor(ratio), second = r->nearest == NEAREST_ROUND_PREFER_FLOOR ? ratio > 0.5
                                                     : r->nearest == NEAREST_ROUND_PREFER_CEIL ? ratio >= 0.5
                                                                                               : r->nearest == NEAREST_CEIL;
        *n = 2;
        c[0] = whole ? 0 : !second, c[1] = whole ? 1 : second;
        return;
    }
    if (r->mode == RESIZE_LINEAR && !r->antialias) {
        *n = 2;
        c[0] = 1 - ratio, c[1] = ratio;
        return;
    }
    if (r->mode == RESIZE_CUBIC && !r->antialias) {
        float q = (float)ratio, t = (float)(ratio + 1), u = (float)(1 - ratio), v = (float)((1 - ratio) + 1); /* the reference's roundings */
        *n = 4;
        c[0] = ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
        c[1] = ((A + 2) * q - (A + 3)) * q * q + 1;
        c[2] = ((A + 2) * u - (A + 3)) * u * u + 1;
        c[3] = ((A * v - 5 * A) * v + 8 * A) * v - 4 * A;
        return;
    }
    int start = (int)floor((r->mode == RESIZE_LINEAR ? -1.0 : -2.0) / s) + 1;
    bool wide = r->mode == RESIZE_LINEAR; /* cubic: f32 terms, and a list of them with a 0.0 in it is divided in double */
    *n = 2 - 2 * start;
    for (int k = 0; k < *n; k++) {
        double x = fabs(s * (start + k - ratio)), x2 = x * x, x3 = x * x2; /* the reference's terms, for its roundings */
        float f3 = (float)x3, f2 = (float)x2, f1 = (float)x;
        if (r->mode == RESIZE_LINEAR) c[k] = x < 1 ? 1 - x : 0, sum += c[k];
        else {
            c[k] = x <= 1 ? (A + 2) * f3 - (A + 3) * f2 + 1 : x < 2 ? A * f3 - 5 * A * f2 + 8 * A * f1 - 4 * A : 0;
            wide = wide || x >= 2;
            fsum += (float)c[k];
        }
    }
    for (int k = 0; k < *n; k++) c[k] = r->mode == RESIZE_LINEAR ? c[k] / sum : wide ? c[k] / (double)fsum : (double)((float)c[k] / fsum);
}

#define RESIZE_MAX_TAPS 4096

/* The sum of a[0..n) as numpy's pairwise sum of float64 adds it (a
 * reduction along a last axis: 8 lanes, halves past 128 terms) */
static double pairwise_sum(const double *a, int n) {
    if (n < 8) {
        double r = 0;
        for (int i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n > 128) {
        int h = n / 2;
        h -= h % 8;
        return pairwise_sum(a, h) + pairwise_sum(a + h, n - h);
    }
    double l[8];
    int i = 8;
    memcpy(l, a, sizeof l);
    for (; i < n - n % 8; i += 8)
        for (int j = 0; j < 8; j++) l[j] += a[i + j];
    double r = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    for (; i < n; i++) r += a[i];
    return r;
}

/* Output position y's taps, as ONNX's reference takes them: *n
 * coefficients c over the input positions first, first + 1, ... (before
 * the edge padding clamps them into the axis); false where y is
 * extrapolated (tf_crop_and_resize outside the input: r->outside[y]). */
static bool resize_taps(const resize_axis *r, int64_t y, int64_t *first, double *c, int *n) {
#ifdef __clang__
#pragma clang fp contract(off)
#endif
    int64_t in = r->in, out = r->out;
    double width = r->scale * (double)in;
    double x, yd = (double)y;
    switch (r->coord) {
    case COORD_ALIGN_CORNERS: x = width == 1 ? 0 : yd * (double)(in - 1) / (width - 1); break;
    case COORD_ASYMMETRIC: x = yd / r->scale; break;
    case COORD_TF_CROP: { /* the reference's roi is float32: its difference and roi0 * (in - 1) are computed in f32 */
        float span = (float)r->roi1 - (float)r->roi0;
        x = width == 1 ? (double)(span * (float)(in - 1) / 2) : yd * (double)span * (double)(in - 1) / (width - 1);
        x += (double)((float)r->roi0 * (float)(in - 1));
        r->outside[y] = x < 0 || x > (double)(in - 1);
        break;
    }
    case COORD_PYTORCH_HALF_PIXEL: x = width == 1 ? -0.5 : (yd + 0.5) / r->scale - 0.5; break;
    case COORD_HALF_PIXEL_SYMMETRIC: {
        double offset = (double)in / 2 * (1 - (double)out / width);
        x = offset + (yd + 0.5) / r->scale - 0.5;
        break;
    }
    default: x = (yd + 0.5) / r->scale - 0.5; break;
    }
    if (r->coord == COORD_TF_CROP && r->outside[y]) return false;
    double fl = floor(x), ratio = x == fl ? 1.0 : x - fl;
    resize_coeffs(r, ratio, c, n);
    /* the n taps nearest x, ties to the lower ones (ONNX's reference) */
    int pad = (*n + 1) / 2;
    double xp = x + pad, p = floor(xp), frac = xp - p;
    *first = (int64_t)p + (*n % 2 == 0 ? (frac == 0 ? -(*n / 2) : -(*n / 2) + 1) : (frac <= 0.5 ? -((*n - 1) / 2) : -((*n - 1) / 2) + 1)) - pad;
    if (r->exclude_outside) { /* the reference's sum of each row of coefficients: pairwise, numpy's */
        for (int k = 0; k < *n; k++)
            if (*first + k < 0 || *first + k >= in) c[k] = 0;
        double sum = pairwise_sum(c, *n);
        for (int k = 0; k < *n && sum != 0; k++) c[k] /= sum;
    }
    return true;
}

/* position i clamped into an axis of `in` (edge padding) */
static int64_t resize_clamp(int64_t i, int64_t in) { return i < 0 ? 0 : i >= in ? in - 1 : i; }

static void fill_resize(const void *ctx, float *w) {
    const resize_axis *r = ctx;
    int64_t in = r->in, out = r->out, first;
    memset(w, 0, (size_t)(in * out) * sizeof *w);
    for (int64_t y = 0; y < out; y++) {
        double c[RESIZE_MAX_TAPS];
        int n;
        if (!resize_taps(r, y, &first, c, &n)) continue;
        for (int k = 0; k < n; k++) w[resize_clamp(first + k, in) * out + y] += (float)c[k];
    }
}

/* y resized along ax by nearest, exactly in y's dtype (an integer one):
 * each output position takes the one input position of its column of
 * weights (fill_resize), a Gather of those positions. */
static ts_tensor *nearest_gather(importer *im, ts_tensor *y, int ax, const resize_axis *ra, ts_status *st) {
    uint64_t bytes = (uint64_t)(ra->in * ra->out + ra->out) * 4;
    if ((*st = ts_const_charge(bytes))) {
        *st = ts_onnx_fold_result(im, *st);
        return NULL;
    }
    float *w = ts_malloc((size_t)(ra->in * ra->out) * sizeof *w);
    int32_t *at = ts_malloc((size_t)ra->out * sizeof *at);
    if (w && at) fill_resize(ra, w);
    for (int64_t j = 0; w && at && j < ra->out; j++) {
        at[j] = 0;
        for (int64_t i = 0; i < ra->in; i++)
            if (w[i * ra->out + j] != 0.0f) at[j] = (int32_t)i;
    }
    char *name = w && at ? ts_graph_op_output_name(im->g, "Positions") : NULL;
    ts_tensor *pos = name ? ts_constant(im->g, name, &(ts_array){.dtype = TS_I32, .ndim = 1, .shape = {ra->out}, .data = at}) : NULL;
    ts_free(name);
    ts_free(w);
    ts_free(at);
    ts_const_release(bytes);
    ts_tensor *t = pos ? ts_gather(im->g, y, pos, ax) : NULL;
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* The integer Resize's levels (TS_OP_INT_RESIZE): each resized axis's
 * taps (positions along it, clamped; -1 for an extrapolated output) and
 * their weights as doubles' bits, appended level after level */
typedef struct int_levels {
    int n, dim[TS_MAX_DIMS], taps[TS_MAX_DIMS];
    bool pairwise[TS_MAX_DIMS];
    int64_t out[TS_MAX_DIMS], len, cap;
    int32_t *at;
    int64_t *w;
} int_levels;

static ts_status int_level(importer *im, int_levels *lv, int ax, bool last, const resize_axis *ra) {
    int n = 0;
    double c[RESIZE_MAX_TAPS];
    int64_t first;
    for (int64_t y = 0; y < ra->out && n == 0; y++)
        if (resize_taps(ra, y, &first, c, &n)) break;
    if (n == 0) n = 1; /* every position extrapolated */
    int64_t need = lv->len + ra->out * n;
    if (need > lv->cap) {
        uint64_t more = (uint64_t)(need - lv->cap) * 12;
        ts_status st = ts_const_charge(more);
        if (st) return ts_onnx_fold_result(im, st);
        int32_t *at = ts_realloc(lv->at, (size_t)need * sizeof *at);
        if (at) lv->at = at;
        int64_t *w = at ? ts_realloc(lv->w, (size_t)need * sizeof *w) : NULL;
        if (w) lv->w = w;
        if (!at || !w) return ts_onnx_node_error(im, TS_ERR_OUT_OF_MEMORY, "out of memory for %lld taps of an integer Resize", (long long)need);
        lv->cap = need;
    }
    for (int64_t y = 0; y < ra->out; y++) {
        int32_t *at = lv->at + lv->len + y * n;
        int64_t *w = lv->w + lv->len + y * n;
        int m = 0;
        memset(at, 0, (size_t)n * sizeof *at);
        memset(w, 0, (size_t)n * sizeof *w);
        if (!resize_taps(ra, y, &first, c, &m)) {
            double e = (double)ra->extrapolation;
            at[0] = -1;
            memcpy(&w[0], &e, sizeof e);
            continue;
        }
        for (int k = 0; k < m && k < n; k++) {
            at[k] = (int32_t)resize_clamp(first + k, ra->in);
            memcpy(&w[k], &c[k], sizeof c[k]);
        }
    }
    lv->dim[lv->n] = ax, lv->taps[lv->n] = n, lv->out[lv->n] = ra->out, lv->pairwise[lv->n] = last;
    lv->n++, lv->len = need;
    return TS_OK;
}

/* x resized by the levels: one TS_OP_INT_RESIZE node, in double, rounded
 * into the declared type `type` */
static ts_tensor *int_resize(importer *im, ts_tensor *x, const int_levels *lv, ts_dtype type, ts_status *st) {
    ts_graph *g = im->g;
    char *na = ts_graph_op_output_name(g, "Taps"), *nw = na ? ts_graph_op_output_name(g, "TapWeights") : NULL;
    ts_tensor *at = nw ? ts_constant(g, na, &(ts_array){.dtype = TS_I32, .ndim = 1, .shape = {lv->len}, .data = lv->at}) : NULL;
    ts_tensor *w = at ? ts_constant(g, nw, &(ts_array){.dtype = TS_I64, .ndim = 1, .shape = {lv->len}, .data = lv->w}) : NULL;
    ts_free(na);
    ts_free(nw);
    ts_tensor *y = w ? ts_graph_int_resize(g, x, at, w, lv->n, lv->dim, lv->pairwise, lv->taps, lv->out, type) : NULL;
    if (!y) *st = ts_graph_status(g) ? ts_graph_status(g) : TS_ERR_OUT_OF_MEMORY;
    return y;
}

static void fill_extrapolation(const void *ctx, float *v) {
    const resize_axis *r = ctx;
    for (int64_t y = 0; y < r->out; y++) v[y] = r->outside[y] ? r->extrapolation : 0.0f;
}

/* Resize (opset 11 on) with constant roi, scales or sizes (inputs 1 to 3,
 * over `axes` from opset 18 on): every mode (nearest with its nearest_mode,
 * linear, cubic with cubic_coeff_a and exclude_outside, antialias), every
 * coordinate_transformation_mode and keep_aspect_ratio_policy, as ONNX's
 * reference computes them. Each resized axis is a matmul by the matrix of
 * its interpolation weights (made at import), so the gradient is the
 * matmul's; an integer input is resized by nearest exactly (a Gather of
 * the positions), by the other modes (and tf_crop_and_resize's
 * extrapolation) as the reference does: every axis's taps weighted and
 * summed in double (as numpy sums them), one TS_OP_INT_RESIZE, rounded
 * half to even and clipped into its type. */
ts_status ts_onnx_op_resize(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x0 = ts_onnx_as_tensor(im, io->in[0], &st), *x = ts_onnx_f32_of(im, x0, &st);
    if (!x) return st;
    int r = x->shape.ndim;
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    const char *const *lists[] = {modes, coords, nearests, policies};
    const char *names[] = {"mode", "coordinate_transformation_mode", "nearest_mode", "keep_aspect_ratio_policy"};
    int counts[] = {3, 6, 4, 3}, k[4] = {0};
    for (int i = 0; i < 4; i++) {
        const Attr *a = ts_onnx_attr(im, names[i]);
        if (a && (k[i] = ts_onnx_attr_choice(a, lists[i], counts[i])) == counts[i])
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute '%s' is '%.*s', which is not one of Resize's", names[i], a->has_s ? (int)a->s.len : 0,
                                      a->has_s ? (const char *)a->s.data : "");
    }
    int antialias, exclude;
    int64_t axes[TS_MAX_DIMS];
    int n_axes = -1;
    if ((st = ts_onnx_attr_int32(im, "antialias", 0, 0, 1, &antialias)) || (st = ts_onnx_attr_int32(im, "exclude_outside", 0, 0, 1, &exclude)) ||
        (st = ts_onnx_attr_int_list(im, "axes", -r, r - 1, axes, TS_MAX_DIMS, &n_axes)))
        return st;
    if (n_axes < 0) {
        n_axes = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    for (int i = 0; i < n_axes; i++) axes[i] = norm_axis(axes[i], r);
    /* the constant roi, scales and sizes, of one value per axis (two for roi) */
    double vals[3][2 * TS_MAX_DIMS];
    bool given[3] = {false, false, false};
    for (int i = 0; i < 3; i++) {
        value *v = io->n_in > i + 1 ? io->in[i + 1] : NULL;
        if (!v) continue;
        if ((st = ts_onnx_decoded(im, v))) return st;
        if (!is_const(v))
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its %s ('%s') must be a constant%s", i == 0 ? "roi" : i == 1 ? "scales" : "sizes", v->name,
                                      ts_onnx_bind_hint(v));
        int64_t n = ts_shape_numel(&v->c.shape);
        if (n == 0) continue;
        if (n != (i == 0 ? 2 : 1) * n_axes)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "its %s ('%s') holds %lld values; it takes %d, %s per resized axis", i == 0 ? "roi" : i == 1 ? "scales" : "sizes",
                                      v->name, (long long)n, (i == 0 ? 2 : 1) * n_axes, i == 0 ? "two" : "one");
        for (int64_t j = 0; j < n; j++) vals[i][j] = v->c.v[j];
        given[i] = true;
    }
    if (given[1] == given[2]) return ts_onnx_node_error(im, TS_ERR_FORMAT, "gives %s of scales and sizes; Resize takes exactly one", given[1] ? "both" : "neither");
    if (k[1] == COORD_TF_CROP && !given[0]) return ts_onnx_node_error(im, TS_ERR_FORMAT, "coordinate_transformation_mode tf_crop_and_resize needs the roi input");
    double scale[TS_MAX_DIMS];
    int64_t out[TS_MAX_DIMS];
    double policy = k[3] == 1 ? INFINITY : -INFINITY;
    for (int i = 0; i < n_axes; i++) {
        int64_t in = x->shape.d[axes[i]];
        double s = given[1] ? vals[1][i] : vals[2][i] / (double)in;
        if (!(s > 0) || !isfinite(s) || (given[2] && vals[2][i] != floor(vals[2][i])))
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "its %s for axis %lld is %g; it takes a positive %s", given[1] ? "scale" : "size",
                                      (long long)axes[i], given[1] ? vals[1][i] : vals[2][i], given[1] ? "number" : "integer");
        scale[i] = s;
        out[i] = given[1] ? (int64_t)(s * (double)in) : (int64_t)vals[2][i];
        policy = k[3] == 1 ? fmin(policy, s) : fmax(policy, s);
    }
    for (int i = 0; given[2] && k[3] != 0 && i < n_axes; i++) { /* not_larger, not_smaller: one scale for every axis */
        scale[i] = policy;
        out[i] = (int64_t)(policy * (double)x->shape.d[axes[i]] + 0.5);
    }
    /* integers resized by nearest (no extrapolated positions): moved
     * exactly, in their dtype, by a Gather per axis */
    bool moves = is_int_tensor(x0) && k[0] == RESIZE_NEAREST && k[1] != COORD_TF_CROP;
    bool integer = is_int_tensor(x0) && !moves;
    int_levels lv = {0};
    ts_tensor *y = moves || integer ? x0 : x;
    for (int i = 0; i < n_axes && y; i++) {
        int ax = (int)axes[i], last = r - 1;
        resize_axis ra = {.in = x->shape.d[ax], .out = out[i], .scale = scale[i], .roi0 = given[0] ? vals[0][i] : 0,
                          .roi1 = given[0] ? vals[0][n_axes + i] : 1, .cubic_a = ts_onnx_attr_f(im, "cubic_coeff_a", -0.75), .mode = k[0],
                          .coord = k[1], .nearest = k[2], .exclude_outside = exclude != 0, .antialias = antialias != 0 && k[0] != RESIZE_NEAREST,
                          .extrapolation = (float)ts_onnx_attr_f(im, "extrapolation_value", 0.0)};
        if (out[i] < 1) {
            st = ts_onnx_node_error(im, TS_ERR_SHAPE, "resizes axis %d to %lld; tensorscope's dimensions are positive", ax, (long long)out[i]);
            break;
        }
        if (fabs(ra.scale - 1.0) <= 1e-9 && ra.out == ra.in && ra.roi0 == 0 && ra.roi1 == 1) continue; /* the identity, as ONNX's reference */
        bool outside[4096];
        if (ra.antialias && ra.scale < 1 && 2.0 / ra.scale + 2 > RESIZE_MAX_TAPS)
            st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "an antialiased downscale by %g takes more than %d taps", ra.scale, RESIZE_MAX_TAPS);
        else if (ra.coord == COORD_TF_CROP && ra.out > (int64_t)TS_ARRAY_LEN(outside))
            st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "tf_crop_and_resize to more than %zu positions is not available", TS_ARRAY_LEN(outside));
        if (st) break;
        memset(outside, 0, sizeof outside);
        ra.outside = outside;
        if (moves) {
            if (!(y = nearest_gather(im, y, ax, &ra, &st))) return st;
            continue;
        }
        if (integer) {
            /* the reference sums the taps of its last axis (the last resized one) pairwise */
            if ((st = int_level(im, &lv, ax, ax == axes[n_axes - 1], &ra))) break;
            continue;
        }
        ts_tensor *w = ts_onnx_computed_constant(im, "Weights", &(ts_shape){.ndim = 2, .d = {ra.in, ra.out}}, fill_resize, &ra, &st);
        if (!w) return st;
        ts_tensor *t = ax == last ? y : ts_transpose(im->g, y, ax, last);
        int64_t rows = t ? ts_shape_numel(&t->shape) / ra.in : 0;
        ts_tensor *m = t ? ts_onnx_matmul_2d(im, ts_reshape(im->g, t, 2, (int64_t[]){rows, ra.in}), w, false, &st) : NULL;
        if (!m) return st ? st : ts_graph_status(im->g);
        bool any = false;
        for (int64_t j = 0; j < ra.out; j++) any = any || outside[j];
        if (any) {
            ts_tensor *e = ts_onnx_computed_constant(im, "Extrapolation", &(ts_shape){.ndim = 1, .d = {ra.out}}, fill_extrapolation, &ra, &st);
            if (!e) return st;
            m = ts_add(im->g, m, e);
        }
        ts_shape s = t->shape;
        s.d[last] = ra.out;
        y = ts_reshape(im->g, m, s.ndim, s.d);
        if (y && ax != last) y = ts_transpose(im->g, y, ax, last);
    }
    if (integer && !st && lv.n > 0) {
        ts_dtype type = x0->dtype;
        int declared = io->in[0]->c.dtype;
        if (declared && !ts_onnx_dtype_is_float(declared) && !ts_onnx_array_dtype(declared, &type)) type = x0->dtype;
        y = int_resize(im, x0, &lv, type, &st);
    }
    ts_free(lv.at);
    ts_free(lv.w);
    ts_const_release((uint64_t)lv.cap * 12);
    if (st) return st;
    if (!y) return ts_graph_status(im->g);
    if (y == x || y == x0) return ts_onnx_op_identity(im, io);
    if (moves || integer) return ts_onnx_built(im, y, &io->out[0]);
    if (x0->dtype == TS_I32) y = ts_unary(im->g, "Round", y, 0.0f, 0.0f);
    return ts_onnx_built(im, ts_onnx_as_dtype_of(im, y, x0), &io->out[0]);
}

/* GridSample's modes and padding modes */
enum { TS_GRID_LINEAR, TS_GRID_NEAREST, TS_GRID_CUBIC };
enum { TS_GRID_ZEROS, TS_GRID_BORDER, TS_GRID_REFLECTION };

/* ------------------------------------------------------------- GridSample */

static ts_tensor *add_c(ts_graph *g, ts_tensor *x, float v) { return v == 0.0f ? x : ts_add(g, x, ts_onnx_scalar(g, "Offset", v)); }

/* x clamped into [lo, hi] */
static ts_tensor *clamp_c(ts_graph *g, ts_tensor *x, float lo, float hi) {
    return ts_binary(g, "Min", ts_binary(g, "Max", x, ts_onnx_scalar(g, "Low", lo)), ts_onnx_scalar(g, "High", hi));
}

/* x reflected by the near border until it lies in [lo, hi] (ONNX's
 * GridSample reflect; x itself inside) */
static ts_tensor *reflect_c(ts_graph *g, ts_tensor *x, float lo, float hi) {
    float range = hi - lo;
    if (range <= 0.0f) return add_c(g, ts_scale(g, x, 0.0f), lo); /* one position: every x reflects onto it */
    ts_tensor *below = ts_binary(g, "Less", x, ts_onnx_scalar(g, "Low", lo)), *above = ts_binary(g, "Greater", x, ts_onnx_scalar(g, "High", hi));
    ts_tensor *dist = ts_where(g, below, add_c(g, ts_scale(g, x, -1.0f), lo), add_c(g, x, -hi)); /* past the border */
    ts_tensor *n = ts_unary(g, "Floor", ts_scale(g, dist, 1.0f / range), 0.0f, 0.0f);
    ts_tensor *r = ts_sub(g, dist, ts_scale(g, n, range));
    ts_tensor *odd = ts_binary(g, "Mod", n, ts_onnx_scalar(g, "Two", 2.0f));
    ts_tensor *from_lo = add_c(g, r, lo), *from_hi = add_c(g, ts_scale(g, r, -1.0f), hi);
    return ts_where(g, below, ts_where(g, odd, from_hi, from_lo), ts_where(g, above, ts_where(g, odd, from_lo, from_hi), x));
}

typedef struct gs_tap {
    ts_tensor *index;  /* [N,1,P] f32: the tap's index along its dim, in range */
    ts_tensor *weight; /* [N,1,P] f32, times 0 where a zeros-padded tap falls outside */
} gs_tap;

/* The taps' weights of cubic convolution (Keys, A = -0.75) at t in [0, 1). */
static ts_tensor *cubic_weight(ts_graph *g, ts_tensor *t, int k) {
    const float A = -0.75f;
    /* |s| for the tap at offset k - 1: t + 1, t, 1 - t, 2 - t */
    ts_tensor *s = k == 0 ? add_c(g, t, 1.0f) : k == 1 ? t : add_c(g, ts_scale(g, t, -1.0f), k == 2 ? 1.0f : 2.0f);
    if (k == 1 || k == 2) /* ((A + 2) s - (A + 3)) s^2 + 1 */
        return add_c(g, ts_mul(g, add_c(g, ts_scale(g, s, A + 2.0f), -(A + 3.0f)), ts_mul(g, s, s)), 1.0f);
    /* ((A s - 5A) s + 8A) s - 4A */
    return add_c(g, ts_mul(g, add_c(g, ts_mul(g, add_c(g, ts_scale(g, s, A), -5.0f * A), s), 8.0f * A), s), -4.0f * A);
}

/* GridSample: x [N,C,D1..Dk] (k 1 to 3) sampled at grid [N,O1..Ok,k]
 * (normalized to [-1, 1], x first) as ONNX's reference does: per output
 * position the taps of the mode (1, 2 or 4 per dim) as GatherElements of
 * x's flattened positions, weighted; the gradient reaches x and, through
 * the weights of linear and cubic, the grid. *out: [N,C,O1..Ok]. */
static ts_status ts_onnx_grid_sample(ts_graph *g, ts_tensor *x, ts_tensor *grid, int mode, int padding, bool align_corners, ts_tensor **out) {
    *out = NULL;
    int k = x->shape.ndim - 2;
    if (k < 1 || k > 3 || grid->shape.ndim != k + 2 || grid->shape.d[k + 1] != k || grid->shape.d[0] != x->shape.d[0])
        return ts_error(TS_ERR_SHAPE, "takes X [N,C,D1..Dk] (k 1 to 3) and a grid [N,O1..Ok,k] of the same N; they are %d-D and %d-D",
                        x->shape.ndim, grid->shape.ndim);
    int64_t N = x->shape.d[0], C = x->shape.d[1], F = 1, P = 1, stride[3];
    for (int i = k - 1; i >= 0; i--) {
        stride[i] = F;
        F *= x->shape.d[2 + i];
        P *= grid->shape.d[1 + i];
    }
    if (F >= (int64_t)1 << 24)
        return ts_error(TS_ERR_UNSUPPORTED, "an input of %lld positions per channel is past 2^24, where the positions computed in f32 stop being exact",
                        (long long)F);
    int m = mode == TS_GRID_NEAREST ? 1 : mode == TS_GRID_LINEAR ? 2 : 4;
    gs_tap taps[3][4];
    ts_tensor *g2 = ts_reshape(g, grid, 3, (int64_t[]){N, P, k});
    for (int i = 0; i < k; i++) {
        float d = (float)x->shape.d[2 + i], lo = align_corners ? 0.0f : -0.5f, hi = align_corners ? d - 1.0f : d - 0.5f;
        /* the grid's last axis is (x, y, z): the last spatial dim first */
        ts_tensor *c = ts_reshape(g, ts_slice(g, g2, 2, k - 1 - i, 1), 3, (int64_t[]){N, 1, P});
        c = align_corners ? add_c(g, ts_scale(g, c, (d - 1.0f) / 2.0f), (d - 1.0f) / 2.0f) : add_c(g, ts_scale(g, c, d / 2.0f), (d - 1.0f) / 2.0f);
        if (mode == TS_GRID_NEAREST) c = ts_unary(g, "Round", c, 0.0f, 0.0f); /* half to even */
        if (padding == TS_GRID_BORDER) c = clamp_c(g, c, 0.0f, d - 1.0f);
        if (padding == TS_GRID_REFLECTION) c = reflect_c(g, c, lo, hi);
        ts_tensor *base = mode == TS_GRID_NEAREST ? c : ts_unary(g, "Floor", c, 0.0f, 0.0f);
        ts_tensor *t = mode == TS_GRID_NEAREST ? NULL : ts_sub(g, c, base); /* the gradient reaches the grid here */
        for (int j = 0; j < m; j++) {
            ts_tensor *idx = add_c(g, base, mode == TS_GRID_CUBIC ? (float)(j - 1) : (float)j), *w;
            w = mode == TS_GRID_NEAREST ? NULL : mode == TS_GRID_LINEAR ? (j ? t : add_c(g, ts_scale(g, t, -1.0f), 1.0f)) : cubic_weight(g, t, j);
            if (padding == TS_GRID_ZEROS) { /* a tap outside reads 0 */
                ts_tensor *in = num(g, ts_binary(g, "And", ts_binary(g, "GreaterOrEqual", idx, ts_onnx_scalar(g, "Low", 0.0f)),
                                                 ts_binary(g, "LessOrEqual", idx, ts_onnx_scalar(g, "High", d - 1.0f))));
                w = w ? ts_mul(g, w, in) : in;
            } else if (padding == TS_GRID_REFLECTION) {
                idx = reflect_c(g, idx, lo, hi); /* an integer reflects onto an integer */
            }
            taps[i][j] = (gs_tap){clamp_c(g, idx, 0.0f, d - 1.0f), w};
        }
    }
    /* every combination of one tap per dim: data[sum idx_i stride_i] times the product of the weights */
    ts_tensor *xf = ts_reshape(g, x, 3, (int64_t[]){N, C, F}), *zeros = NULL, *y = NULL;
    {
        char *name = ts_graph_op_output_name(g, "Zero");
        float *z = ts_calloc((size_t)C, sizeof *z);
        zeros = name && z ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 3, .shape = {1, C, 1}, .data = z}) : NULL;
        ts_free(name);
        ts_free(z);
        if (!zeros) return ts_graph_status(g) ? ts_graph_status(g) : ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int combos = 1;
    for (int i = 0; i < k; i++) combos *= m;
    for (int c = 0; c < combos; c++) {
        ts_tensor *flat = NULL, *w = NULL;
        for (int i = 0, rest = c; i < k; i++, rest /= m) {
            const gs_tap *tp = &taps[i][rest % m];
            ts_tensor *part = ts_scale(g, tp->index, (float)stride[i]);
            flat = flat ? ts_add(g, flat, part) : part;
            if (tp->weight) w = w ? ts_mul(g, w, tp->weight) : tp->weight;
        }
        ts_tensor *idx = ts_unary(g, "CastIndex", ts_add(g, flat, zeros), 0.0f, (float)(F - 1)); /* [N,C,P] */
        ts_tensor *v = ts_gather_elements(g, xf, idx, 2);
        if (w) v = ts_mul(g, v, w);
        y = y ? ts_add(g, y, v) : v;
    }
    ts_shape os = {.ndim = k + 2, .d = {N, C}};
    for (int i = 0; i < k; i++) os.d[2 + i] = grid->shape.d[1 + i];
    y = ts_reshape(g, y, os.ndim, os.d);
    ts_status st = ts_onnx_graph_status(g, y);
    if (!st) *out = y;
    return st;
}

/* GridSample (opset 16 on; opset 20's mode names linear and cubic, 16's
 * bilinear and bicubic): ts_onnx_grid_sample above. */
ts_status ts_onnx_op_grid_sample(importer *im, node_io *io) {
    static const char *const modes[] = {"linear", "nearest", "cubic", "bilinear", "bicubic"}; /* TS_GRID_*, then opset 16's names */
    static const char *const pads[] = {"zeros", "border", "reflection"};
    const Attr *ma = ts_onnx_attr(im, "mode"), *pa = ts_onnx_attr(im, "padding_mode");
    int mode = ma ? ts_onnx_attr_choice(ma, modes, 5) : since(im, 20) ? 0 : 3, padding = pa ? ts_onnx_attr_choice(pa, pads, 3) : 0;
    if (mode == 5 || (since(im, 20) ? mode > 2 : mode == 0 || mode == 2))
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not one of %s", ma ? (int)ma->s.len : 0, ma ? (const char *)ma->s.data : "",
                                  since(im, 20) ? "linear, nearest, cubic" : "bilinear, nearest, bicubic (opset 20 names them linear and cubic)");
    if (padding == 3)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "padding_mode '%.*s' is not zeros, border or reflection", (int)pa->s.len, (const char *)pa->s.data);
    bool align;
    ts_status st = ts_onnx_attr_flag(im, "align_corners", &align);
    ts_tensor *x = st ? NULL : as_f32(im, io->in[0], &st), *grid = x ? as_f32(im, io->in[1], &st) : NULL, *y;
    if (!grid) return st;
    if ((st = ts_onnx_grid_sample(im->g, x, grid, mode == 3 ? TS_GRID_LINEAR : mode == 4 ? TS_GRID_CUBIC : mode, padding, align, &y)))
        return ts_onnx_fold_result(im, st);
    return ts_onnx_built(im, y, &io->out[0]);
}

/* ------------------------------------------------------------- AffineGrid */

/* AffineGrid: theta [N,2,3] or [N,3,4] applied to the homogeneous base grid
 * of size (N, C, H, W) or (N, C, D, H, W) (its n_size values, constant),
 * normalized to [-1, 1] (align_corners: the corner pixels' centres) -- one
 * batched MatMul by a constant; the gradient reaches theta. *out: [N,H,W,2]
 * or [N,D,H,W,3]. */
static ts_status ts_onnx_affine_grid(ts_graph *g, ts_tensor *theta, const int64_t *size, int n_size, bool align_corners, ts_tensor **out) {
    *out = NULL;
    int k = n_size - 2; /* spatial dims: 2 or 3 */
    if ((k != 2 && k != 3) || theta->shape.ndim != 3 || theta->shape.d[0] != size[0] || theta->shape.d[1] != k || theta->shape.d[2] != k + 1)
        return ts_error(TS_ERR_SHAPE, "takes theta [N,2,3] with size [N,C,H,W], or [N,3,4] with [N,C,D,H,W]; size has %d values and theta is %d-D",
                        n_size, theta->shape.ndim);
    int64_t P = 1;
    for (int i = 0; i < k; i++) {
        if (size[2 + i] < 1) return ts_error(TS_ERR_SHAPE, "size %lld of spatial dim %d is not positive", (long long)size[2 + i], i);
        P *= size[2 + i];
    }
    /* the homogeneous base grid [1,P,k+1]: (x, y[, z], 1), x along the last dim */
    float *base = ts_malloc((size_t)(P * (k + 1)) * sizeof *base);
    if (!base) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory for a base grid of %lld positions", (long long)P);
    for (int64_t p = 0; p < P; p++) {
        int64_t rest = p;
        for (int i = k - 1; i >= 0; i--) { /* i: spatial dim; component k-1-i */
            int64_t d = size[2 + i], j = rest % d;
            rest /= d;
            double step = align_corners ? (d > 1 ? 2.0 / (double)(d - 1) : 0.0) : 2.0 / (double)d;
            base[p * (k + 1) + (k - 1 - i)] = (float)(align_corners ? -1.0 + (double)j * step : -1.0 + step / 2 + (double)j * step);
        }
        base[p * (k + 1) + k] = 1.0f;
    }
    char *name = ts_graph_op_output_name(g, "BaseGrid");
    ts_tensor *b = name ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 3, .shape = {1, P, k + 1}, .data = base}) : NULL;
    ts_free(name);
    ts_free(base);
    ts_shape os = {.ndim = k + 2, .d = {size[0]}};
    for (int i = 0; i < k; i++) os.d[1 + i] = size[2 + i];
    os.d[k + 1] = k;
    ts_tensor *y = b ? ts_reshape(g, ts_matmul_batched(g, b, theta, 0, 1), os.ndim, os.d) : NULL; /* base theta^T: [N,P,k] */
    ts_status st = ts_onnx_graph_status(g, y);
    if (!st) *out = y;
    return st;
}

/* AffineGrid (opset 20), size a constant (a bound input): ts_onnx_affine_grid above. */
ts_status ts_onnx_op_affine_grid(importer *im, node_io *io) {
    value *size = io->in[1];
    if (!is_const(size) || size->param || size->c.shape.ndim != 1 || (size->c.shape.d[0] != 4 && size->c.shape.d[0] != 5))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its size '%s' must be a constant of 4 or 5 values (N, C, H, W or N, C, D, H, W)%s",
                                  size->name ? size->name : "", ts_onnx_bind_hint(size));
    int64_t dims[5];
    for (int i = 0; i < (int)size->c.shape.d[0]; i++) dims[i] = (int64_t)size->c.v[i];
    bool align;
    ts_status st = ts_onnx_attr_flag(im, "align_corners", &align);
    ts_tensor *theta = st ? NULL : as_f32(im, io->in[0], &st), *y;
    if (!theta) return st;
    if ((st = ts_onnx_affine_grid(im->g, theta, dims, (int)size->c.shape.d[0], align, &y))) return ts_onnx_fold_result(im, st);
    return ts_onnx_built(im, y, &io->out[0]);
}

/* Upsample (opsets 7 to 9; Resize replaces it), mode nearest with whole
 * scales (the attribute, from opset 9 a constant input): along each
 * scaled axis a Gather of every position `scale` times (numpy's repeat,
 * ONNX's reference). */
ts_status ts_onnx_op_upsample(importer *im, node_io *io) {
    static const char *const modes[] = {"nearest", "linear"};
    const Attr *ma = ts_onnx_attr(im, "mode");
    if (ma && ts_onnx_attr_choice(ma, modes, 2) != 0)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "mode '%.*s' is not available; nearest is (or Resize, which replaces Upsample from opset 10)",
                                  (int)ma->s.len, (const char *)ma->s.data);
    ts_status st = TS_OK;
    ts_tensor *y = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!y) return st;
    const Attr *sa = ts_onnx_attr(im, "scales");
    bool from_input = since(im, 9);
    value *sv = from_input && io->n_in > 1 ? io->in[1] : NULL;
    if (sv && sv->param && (st = ts_onnx_decoded(im, sv))) return st; /* an initializer's scales: settings, not trained */
    int n = from_input ? (sv && is_const(sv) && sv->c.shape.ndim == 1 ? (int)sv->c.shape.d[0] : -1) : sa ? (int)sa->n_floats : -1;
    if (n != y->shape.ndim)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its scales must be %s of %d values, one per axis%s", from_input ? "a constant input" : "an attribute",
                                  y->shape.ndim, ts_onnx_bind_hint(sv));
    for (int axis = 0; axis < n && y; axis++) {
        double s = from_input ? sv->c.v[axis] : sa->floats[axis];
        if (!(s >= 1.0 && s <= 1024.0 && s == floor(s)))
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "scale %g of axis %d is not available; whole scales from 1 to 1024 are", s, axis);
        if (s == 1.0) continue;
        int64_t d = y->shape.d[axis], m = d * (int64_t)s;
        int32_t *idx = ts_malloc((size_t)m * sizeof *idx);
        char *name = idx ? ts_graph_op_output_name(im->g, "Positions") : NULL;
        for (int64_t i = 0; idx && i < m; i++) idx[i] = (int32_t)(i / (int64_t)s);
        ts_tensor *at = name ? ts_constant(im->g, name, &(ts_array){.dtype = TS_I32, .ndim = 1, .shape = {m}, .data = idx}) : NULL;
        ts_free(name);
        ts_free(idx);
        if (!at) return ts_graph_status(im->g) ? ts_graph_status(im->g) : ts_onnx_node_error(im, TS_ERR_OUT_OF_MEMORY, "out of memory");
        y = ts_gather(im->g, y, at, axis); /* integers and bools as they are */
    }
    return ts_onnx_built(im, y, &io->out[0]);
}
