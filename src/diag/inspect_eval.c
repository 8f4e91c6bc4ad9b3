/* inspect_eval.c -- the inspector's `eval`: numpy-style expressions over
 * tensors by name (docs/inspector.md#eval), a recursive-descent parser that
 * evaluates as it reads, over f32 arrays. The grammar, loosest first:
 *
 *   cmp     = add { ("<" | "<=" | ">" | ">=" | "==" | "!=") add }
 *   add     = mul { ("+" | "-") mul }
 *   mul     = unary { ("*" | "/" | "@") unary }
 *   unary   = ("-" | "+") unary | power
 *   power   = postfix [ "**" unary ]                 (-x**2 is -(x**2), as numpy)
 *   postfix = primary { "[" index {"," index} "]" | ".T" }
 *   primary = number | NAME | "`" any name "`" | FUNC "(" args ")" | "(" cmp ")" | inf | nan
 *
 * Elementwise operators broadcast as numpy does; @ multiplies 1-D and 2-D
 * operands; comparisons give 1 or 0. A NAME is the longest name of the
 * given list that the text starts with and that no letter, digit or _
 * follows (names hold '.', '/' and ':': fc1/MatMul:0, fc1.weight.T is
 * fc1.weight transposed, /fc1/Gemm_output_0 one name where a value comes);
 * a name that begins with a digit or holds spaces goes in backticks.
 * Errors name the column, with the expression and a caret under it. */
#include "diag/inspect_eval.h"

#include "core/core.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct val {
    int ndim;
    int64_t shape[TS_MAX_DIMS];
    float *d; /* ts_malloc'd; a 0-D value holds one */
} val;

typedef struct parser {
    const char *src, *p;
    const char *const *names;
    size_t n_names;
    ts_eval_lookup lookup;
    void *ctx;
    int depth;
    ts_status code;  /* the first error's */
    char msg[768];
} parser;

static int64_t numel(const val *v) {
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
    return n;
}

static void drop(val *v) {
    ts_free(v->d);
    v->d = NULL;
}

/* The first error: its message with the column, the expression and a caret. */
static bool fail_code(parser *ps, ts_status code, const char *at, const char *fmt, ...) TS_PRINTF(4, 5);
static bool fail_code(parser *ps, ts_status code, const char *at, const char *fmt, ...) {
    if (ps->code) return false;
    ps->code = code;
    int col = (int)(at - ps->src) + 1;
    int used = snprintf(ps->msg, sizeof ps->msg, "eval: column %d: ", col);
    va_list ap;
    va_start(ap, fmt);
    if (used > 0 && (size_t)used < sizeof ps->msg) used += vsnprintf(ps->msg + used, sizeof ps->msg - (size_t)used, fmt, ap);
    va_end(ap);
    if (used > 0 && (size_t)used < sizeof ps->msg && strlen(ps->src) < 200)
        snprintf(ps->msg + used, sizeof ps->msg - (size_t)used, "\n  %s\n  %*s^", ps->src, col - 1, "");
    return false;
}
#define fail(ps, at, ...) fail_code(ps, TS_ERR_INVALID_ARGUMENT, at, __VA_ARGS__)

static bool make(parser *ps, const char *at, int ndim, const int64_t *shape, val *out) {
    out->ndim = ndim;
    out->d = NULL;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        out->shape[i] = shape[i];
        if (shape[i] && n > TS_EVAL_MAX_VALUES / shape[i]) n = TS_EVAL_MAX_VALUES + 1;
        else n *= shape[i];
    }
    if (n > TS_EVAL_MAX_VALUES)
        return fail(ps, at, "the result would have more than %lld values; slice the operands first", (long long)TS_EVAL_MAX_VALUES);
    if (!(out->d = ts_malloc((size_t)(n ? n : 1) * sizeof(float)))) return fail_code(ps, TS_ERR_OUT_OF_MEMORY, at, "out of memory");
    return true;
}

static bool scalar(parser *ps, const char *at, double x, val *out) {
    if (!make(ps, at, 0, NULL, out)) return false;
    out->d[0] = (float)x;
    return true;
}

static void skip(parser *ps) {
    while (isspace((unsigned char)*ps->p)) ps->p++;
}

static bool is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

static const char *shape_str(const val *v, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < v->ndim && used < n; i++) used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)v->shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

/* ---- broadcasting: the shape of k operands, and each one's strides in it */

static bool broadcast(parser *ps, const char *at, const char *what, val *const *v, int k, int *ndim, int64_t *shape) {
    *ndim = 0;
    for (int j = 0; j < k; j++)
        if (v[j]->ndim > *ndim) *ndim = v[j]->ndim;
    for (int i = 0; i < *ndim; i++) {
        shape[i] = 1;
        for (int j = 0; j < k; j++) {
            int d = i - (*ndim - v[j]->ndim);
            if (d < 0 || v[j]->shape[d] == 1) continue;
            if (shape[i] != 1 && shape[i] != v[j]->shape[d]) {
                char a[96], b[96];
                return fail_code(ps, TS_ERR_SHAPE, at, "%s: shapes %s and %s do not broadcast (numpy's rule: equal sizes or 1, from the last "
                                 "dimension)", what, shape_str(v[0], a, sizeof a), shape_str(v[j == 0 ? 1 : j], b, sizeof b));
            }
            shape[i] = v[j]->shape[d];
        }
    }
    return true;
}

/* Offset of operand v at out's flat index i. */
static int64_t offset_in(const val *v, int ndim, const int64_t *shape, int64_t i) {
    int64_t off = 0, stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t c = i % shape[d];
        i /= shape[d];
        int vd = d - (ndim - v->ndim);
        if (vd < 0) break;
        if (v->shape[vd] != 1) off += c * stride;
        stride *= v->shape[vd];
    }
    return off;
}

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE };
static const char *const op_text[] = {"+", "-", "*", "/", "**", "<", "<=", ">", ">=", "==", "!="};

static float apply(int op, float a, float b) {
    switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_POW: return powf(a, b);
    case OP_LT: return a < b;
    case OP_LE: return a <= b;
    case OP_GT: return a > b;
    case OP_GE: return a >= b;
    case OP_EQ: return a == b;
    default: return a != b;
    }
}

/* a OP b into a (both consumed) */
static bool binary(parser *ps, const char *at, int op, val *a, val *b) {
    val *v[2] = {a, b}, out;
    int ndim;
    int64_t shape[TS_MAX_DIMS];
    bool ok = broadcast(ps, at, op_text[op], v, 2, &ndim, shape) && make(ps, at, ndim, shape, &out);
    if (ok) {
        int64_t n = numel(&out);
        for (int64_t i = 0; i < n; i++) out.d[i] = apply(op, a->d[offset_in(a, ndim, shape, i)], b->d[offset_in(b, ndim, shape, i)]);
    }
    drop(a);
    drop(b);
    if (ok) *a = out;
    return ok;
}

/* numpy's @ of 1-D and 2-D operands, summed in double */
static bool matmul(parser *ps, const char *at, val *a, val *b) {
    char sa[96], sb[96];
    bool ok = true;
    val out = {0};
    if (a->ndim < 1 || a->ndim > 2 || b->ndim < 1 || b->ndim > 2) {
        ok = fail_code(ps, TS_ERR_SHAPE, at, "@: operands of 1 or 2 dimensions, got %s @ %s (slice a stack to one matrix first)", shape_str(a, sa, sizeof sa),
                       shape_str(b, sb, sizeof sb));
    } else {
        int64_t m = a->ndim == 2 ? a->shape[0] : 1, k = a->shape[a->ndim - 1], kb = b->shape[0], n = b->ndim == 2 ? b->shape[1] : 1;
        if (k != kb) {
            ok = fail_code(ps, TS_ERR_SHAPE, at, "@: %s @ %s: the inner sizes differ (%lld and %lld)", shape_str(a, sa, sizeof sa),
                           shape_str(b, sb, sizeof sb), (long long)k, (long long)kb);
        } else {
            int64_t shape[2];
            int nd = 0;
            if (a->ndim == 2) shape[nd++] = m;
            if (b->ndim == 2) shape[nd++] = n;
            if ((ok = make(ps, at, nd, shape, &out)))
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double s = 0;
                        for (int64_t q = 0; q < k; q++) s += (double)a->d[i * k + q] * (double)b->d[q * n + j];
                        out.d[i * n + j] = (float)s;
                    }
        }
    }
    drop(a);
    drop(b);
    if (ok) *a = out;
    return ok;
}

static bool transpose(parser *ps, const char *at, val *v) {
    int64_t shape[TS_MAX_DIMS], vstride[TS_MAX_DIMS], n = numel(v), st = 1;
    for (int i = v->ndim - 1; i >= 0; i--) vstride[i] = st, st *= v->shape[i];
    for (int i = 0; i < v->ndim; i++) shape[i] = v->shape[v->ndim - 1 - i];
    val out;
    if (!make(ps, at, v->ndim, shape, &out)) return drop(v), false;
    for (int64_t i = 0; i < n; i++) { /* out's dimension d is v's ndim-1-d */
        int64_t rest = i, off = 0;
        for (int d = v->ndim - 1; d >= 0; d--) {
            off += (rest % shape[d]) * vstride[v->ndim - 1 - d];
            rest /= shape[d];
        }
        out.d[i] = v->d[off];
    }
    drop(v);
    *v = out;
    return true;
}

/* ---- indexing: numpy's basic indexing with literal integers */

typedef struct range {
    int64_t start, step, count;
    bool index;
} range;

typedef struct item {
    const char *at;
    bool index, ellipsis, has_start, has_stop;
    int64_t start, stop, step;
} item;

/* An integer literal, clipped to +-2^62 (a slice's bounds past a size are
 * clipped anyway; an index past it is out of range). */
static bool read_int(parser *ps, int64_t *v) {
    skip(ps);
    const char *s = ps->p;
    bool neg = *s == '-';
    if (*s == '-' || *s == '+') s++;
    if (!isdigit((unsigned char)*s)) return false;
    int64_t x = 0, cap = (int64_t)1 << 62;
    for (; isdigit((unsigned char)*s); s++) x = x > cap / 10 ? cap : x * 10 + (*s - '0');
    *v = neg ? -x : x;
    ps->p = s;
    return true;
}

static bool read_item(parser *ps, item *it) {
    skip(ps);
    *it = (item){.at = ps->p, .step = 1};
    if (strncmp(ps->p, "...", 3) == 0) {
        ps->p += 3;
        it->ellipsis = true;
    } else {
        it->has_start = read_int(ps, &it->start);
        skip(ps);
        if (*ps->p == ':') {
            ps->p++;
            it->has_stop = read_int(ps, &it->stop);
            skip(ps);
            if (*ps->p == ':') {
                ps->p++;
                const char *at = ps->p;
                if (read_int(ps, &it->step) && it->step == 0) return fail(ps, at, "a slice's step cannot be 0");
            }
        } else if (!it->has_start) {
            return fail(ps, it->at, "an index item is an integer, start:stop[:step] (integers, each may be left out) or '...'");
        } else {
            it->index = true;
        }
    }
    skip(ps);
    if (*ps->p != ',' && *ps->p != ']') return fail(ps, ps->p, "expected ',' or ']' in an index (its items are integers, start:stop[:step] or '...')");
    return true;
}

/* start:stop:step over a dimension of `size`, as Python's slice.indices */
static void resolve(const item *it, int64_t size, range *r) {
    int64_t step = it->step, start, stop;
    if (step > 0) {
        start = !it->has_start ? 0 : it->start < 0 ? (it->start + size < 0 ? 0 : it->start + size) : (it->start > size ? size : it->start);
        stop = !it->has_stop ? size : it->stop < 0 ? (it->stop + size < 0 ? 0 : it->stop + size) : (it->stop > size ? size : it->stop);
        *r = (range){start, step, stop > start ? (stop - start - 1) / step + 1 : 0, false};
    } else {
        start = !it->has_start ? size - 1 : it->start < 0 ? (it->start + size < 0 ? -1 : it->start + size) : (it->start >= size ? size - 1 : it->start);
        stop = !it->has_stop ? -1 : it->stop < 0 ? (it->stop + size < 0 ? -1 : it->stop + size) : (it->stop >= size ? size - 1 : it->stop);
        *r = (range){start, step, start > stop ? (start - stop - 1) / -step + 1 : 0, false};
    }
}

static bool index_value(parser *ps, val *v) {
    const char *open = ps->p++; /* '[' */
    item items[TS_MAX_DIMS + 1];
    int n = 0, ellipsis = -1;
    skip(ps);
    if (*ps->p == ']') return ps->p++, true; /* x[]: all of it */
    for (;;) {
        if (n == TS_MAX_DIMS + 1) return fail(ps, ps->p, "more index items than a tensor has dimensions (%d at most)", TS_MAX_DIMS);
        if (!read_item(ps, &items[n])) return false;
        if (items[n].ellipsis) {
            if (ellipsis >= 0) return fail(ps, items[n].at, "only one '...' may appear in an index");
            ellipsis = n;
        }
        n++;
        if (*ps->p++ == ']') break;
    }
    int named = n - (ellipsis >= 0);
    if (named > v->ndim) {
        char s[96];
        return fail_code(ps, TS_ERR_SHAPE, open, "%d indices for a tensor of %d dimensions (%s)", named, v->ndim, shape_str(v, s, sizeof s));
    }
    range r[TS_MAX_DIMS];
    int d = 0;
    for (int k = 0; k < n; k++) {
        if (k == ellipsis) {
            for (int q = 0; q < v->ndim - named; q++, d++) r[d] = (range){0, 1, v->shape[d], false};
            continue;
        }
        int64_t size = v->shape[d];
        if (items[k].index) {
            int64_t i = items[k].start;
            if (i < -size || i >= size)
                return fail_code(ps, TS_ERR_SHAPE, items[k].at, "index %.*s is out of range for dimension %d of size %lld",
                                 (int)strspn(items[k].at, "+-0123456789"), items[k].at, d, (long long)size);
            r[d++] = (range){i < 0 ? i + size : i, 1, 1, true};
        } else {
            resolve(&items[k], size, &r[d++]);
        }
    }
    for (; d < v->ndim; d++) r[d] = (range){0, 1, v->shape[d], false};
    int64_t shape[TS_MAX_DIMS], strides[TS_MAX_DIMS], s = 1;
    int nd = 0;
    for (int q = v->ndim - 1; q >= 0; q--) strides[q] = s, s *= v->shape[q];
    for (int q = 0; q < v->ndim; q++)
        if (!r[q].index) shape[nd++] = r[q].count;
    val out;
    if (!make(ps, open, nd, shape, &out)) return false;
    int64_t count = numel(&out);
    for (int64_t k = 0; k < count; k++) { /* k in the slice's row-major order -> v's offset */
        int64_t rest = k, off = 0;
        for (int q = v->ndim - 1; q >= 0; q--) {
            int64_t i = rest % r[q].count;
            rest /= r[q].count;
            off += (r[q].start + i * r[q].step) * strides[q];
        }
        out.d[k] = v->d[off];
    }
    drop(v);
    *v = out;
    return true;
}

/* ---- functions */

static bool parse_cmp(parser *ps, val *out);

/* An axis argument: an integer, or axis=integer. */
static bool read_axis(parser *ps, const val *v, int *axis) {
    skip(ps);
    if (strncmp(ps->p, "axis", 4) == 0 && !is_ident(ps->p[4])) {
        ps->p += 4;
        skip(ps);
        if (*ps->p != '=') return fail(ps, ps->p, "expected '=' after axis");
        ps->p++;
    }
    skip(ps);
    const char *at = ps->p;
    int64_t a;
    if (!read_int(ps, &a)) return fail(ps, at, "an axis is an integer (negative from the end)");
    if (a < -v->ndim || a >= v->ndim || v->ndim == 0) {
        char s[96];
        return fail_code(ps, TS_ERR_SHAPE, at, "axis %lld is out of range for a tensor of %d dimensions (%s)", (long long)a, v->ndim,
                         shape_str(v, s, sizeof s));
    }
    *axis = (int)(a < 0 ? a + v->ndim : a);
    return true;
}

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_NORM };

/* A reduction over one axis (axis >= 0) or all of v, in double. */
static bool reduce(parser *ps, const char *at, const char *fn, int kind, int axis, val *v) {
    int64_t outer = 1, len = numel(v), inner = 1, shape[TS_MAX_DIMS] = {0};
    int nd = 0;
    if (axis >= 0) {
        len = v->shape[axis];
        for (int q = 0; q < axis; q++) outer *= v->shape[q];
        for (int q = axis + 1; q < v->ndim; q++) inner *= v->shape[q];
        for (int q = 0; q < v->ndim; q++)
            if (q != axis) shape[nd++] = v->shape[q];
    }
    if (len == 0 && (kind == R_MAX || kind == R_MIN)) {
        drop(v);
        return fail(ps, at, "%s of an empty array (numpy: zero-size array to reduction operation %s which has no identity)", fn, fn);
    }
    val out;
    if (!make(ps, at, nd, shape, &out)) {
        drop(v);
        return false;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double acc = kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : 0;
            bool nan = false;
            for (int64_t k = 0; k < len; k++) {
                double x = v->d[(o * len + k) * inner + i];
                if (isnan(x)) nan = true;
                if (kind == R_SUM || kind == R_MEAN) acc += x;
                else if (kind == R_NORM) acc += x * x;
                else if (kind == R_MAX ? x > acc : x < acc) acc = x;
            }
            if (kind == R_MEAN) acc = len ? acc / (double)len : NAN;
            if (kind == R_NORM) acc = sqrt(acc);
            out.d[o * inner + i] = nan ? NAN : (float)acc; /* numpy's max and min propagate NaN */
        }
    drop(v);
    *v = out;
    return true;
}

/* where(pred): the indices of its non-zero values, [count, ndim] as np.argwhere */
static bool argwhere(parser *ps, const char *at, val *v) {
    int64_t n = numel(v), count = 0;
    for (int64_t i = 0; i < n; i++) count += v->d[i] != 0;
    int64_t shape[2] = {count, v->ndim};
    val out;
    if (!make(ps, at, 2, shape, &out)) {
        drop(v);
        return false;
    }
    int64_t row = 0;
    for (int64_t i = 0; i < n; i++) {
        if (v->d[i] == 0) continue;
        int64_t rest = i;
        for (int q = v->ndim - 1; q >= 0; q--) {
            out.d[row * v->ndim + q] = (float)(rest % v->shape[q]);
            rest /= v->shape[q];
        }
        row++;
    }
    drop(v);
    *v = out;
    return true;
}

static bool where3(parser *ps, const char *at, val *c, val *a, val *b) {
    val *v[3] = {c, a, b}, out = {0};
    int ndim;
    int64_t shape[TS_MAX_DIMS];
    bool ok = broadcast(ps, at, "where", v, 3, &ndim, shape) && make(ps, at, ndim, shape, &out);
    if (ok) {
        int64_t n = numel(&out);
        for (int64_t i = 0; i < n; i++)
            out.d[i] = c->d[offset_in(c, ndim, shape, i)] != 0 ? a->d[offset_in(a, ndim, shape, i)] : b->d[offset_in(b, ndim, shape, i)];
    }
    drop(c), drop(a), drop(b);
    if (ok) *c = out;
    return ok;
}

static const char *const functions[] = {"sum", "mean", "max", "min", "norm", "abs", "sqrt", "exp", "log", "where"};
#define N_FUNCTIONS (sizeof functions / sizeof functions[0])

static bool expect(parser *ps, char c, const char *what) {
    skip(ps);
    if (*ps->p != c) return fail(ps, ps->p, "expected '%c' %s", c, what);
    ps->p++;
    return true;
}

static bool call(parser *ps, const char *at, size_t f, val *out) {
    const char *name = functions[f];
    if (!parse_cmp(ps, out)) return false;
    skip(ps);
    if (f <= R_NORM) { /* reductions: fn(x) or fn(x, axis) */
        int axis = -1;
        if (*ps->p == ',') {
            ps->p++;
            if (!read_axis(ps, out, &axis)) return drop(out), false;
        }
        if (!expect(ps, ')', "to close the call")) return drop(out), false;
        return reduce(ps, at, name, (int)f, axis, out);
    }
    if (strcmp(name, "where") == 0) {
        if (*ps->p == ')') {
            ps->p++;
            return argwhere(ps, at, out);
        }
        val a = {0}, b = {0};
        if (!expect(ps, ',', "or ')' in where(pred) or where(pred, a, b)") || !parse_cmp(ps, &a)) return drop(out), false;
        if (!expect(ps, ',', "in where(pred, a, b)") || !parse_cmp(ps, &b)) return drop(out), drop(&a), false;
        if (!expect(ps, ')', "to close where(pred, a, b)")) return drop(out), drop(&a), drop(&b), false;
        return where3(ps, at, out, &a, &b);
    }
    if (!expect(ps, ')', "to close the call (it takes one argument)")) return drop(out), false;
    int64_t n = numel(out);
    for (int64_t i = 0; i < n; i++) {
        float x = out->d[i];
        out->d[i] = name[0] == 'a' ? fabsf(x) : name[1] == 'q' ? sqrtf(x) : name[0] == 'e' ? expf(x) : logf(x);
    }
    return true;
}

/* ---- primaries */

/* The longest given name the text at p starts with, no letter, digit or _ after it. */
static size_t match_name(const parser *ps, const char *p, size_t *len) {
    size_t best = SIZE_MAX, best_len = 0;
    for (size_t i = 0; i < ps->n_names; i++) {
        size_t l = strlen(ps->names[i]);
        if (l > best_len && strncmp(p, ps->names[i], l) == 0 && !is_ident(p[l])) best = i, best_len = l;
    }
    *len = best_len;
    return best;
}

static bool load(parser *ps, const char *at, const char *name, val *out) {
    ts_array a;
    ts_status st = ps->lookup(ps->ctx, name, &a);
    if (st) return fail_code(ps, st, at, "'%s': %s", name, ts_last_error());
    if (!make(ps, at, a.ndim, a.shape, out)) return false;
    int64_t n = numel(out);
    for (int64_t i = 0; i < n; i++) out->d[i] = (float)ts_array_value(&a, i);
    return true;
}

static bool unknown_name(parser *ps, const char *at) {
    size_t len = strspn(at, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@");
    char word[256], near[512];
    snprintf(word, sizeof word, "%.*s", (int)(len < 255 ? len : 255), at);
    return fail_code(ps, TS_ERR_NOT_FOUND, at, "no tensor named '%s'; closest: %s (a name with other characters than letters, digits, _ . / : "
                     "goes in backticks: `name`)", word, ts_closest_words(word, ps->names, ps->n_names, near, sizeof near));
}

static bool parse_primary(parser *ps, val *out) {
    skip(ps);
    const char *at = ps->p;
    char c = *at;
    if (c == '(') {
        ps->p++;
        if (!parse_cmp(ps, out)) return false;
        skip(ps);
        if (*ps->p != ')') return drop(out), fail(ps, ps->p, "expected ')' to close the '(' at column %d", (int)(at - ps->src) + 1);
        ps->p++;
        return true;
    }
    if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)at[1]))) {
        char *end;
        double x = strtod(at, &end);
        ps->p = end;
        return scalar(ps, at, x, out);
    }
    if (c == '`') {
        const char *close = strchr(at + 1, '`');
        if (!close) return fail(ps, at, "the backtick here is not closed: `name`");
        char name[512];
        if ((size_t)(close - at - 1) >= sizeof name) return fail(ps, at, "a name of %d characters; at most %zu", (int)(close - at - 1), sizeof name - 1);
        snprintf(name, sizeof name, "%.*s", (int)(close - at - 1), at + 1);
        ps->p = close + 1;
        for (size_t i = 0; i < ps->n_names; i++)
            if (strcmp(ps->names[i], name) == 0) return load(ps, at, name, out);
        return unknown_name(ps, at + 1);
    }
    if (isalpha((unsigned char)c) || c == '_') {
        size_t word = 0;
        while (is_ident(at[word])) word++;
        const char *after = at + word;
        while (isspace((unsigned char)*after)) after++;
        for (size_t f = 0; *after == '(' && f < N_FUNCTIONS; f++)
            if (strlen(functions[f]) == word && strncmp(at, functions[f], word) == 0) {
                ps->p = after + 1;
                return call(ps, at, f, out);
            }
        size_t len, k = match_name(ps, at, &len);
        if (k != SIZE_MAX) {
            ps->p = at + len;
            return load(ps, at, ps->names[k], out);
        }
        if (word == 3 && strncmp(at, "inf", 3) == 0) return ps->p = after, scalar(ps, at, INFINITY, out);
        if (word == 3 && strncmp(at, "nan", 3) == 0) return ps->p = after, scalar(ps, at, NAN, out);
        if (*after == '(') {
            char word_s[64], near[256];
            snprintf(word_s, sizeof word_s, "%.*s", (int)(word < 63 ? word : 63), at);
            return fail(ps, at, "no function '%s'; the functions: sum mean max min norm (each with an optional axis) abs sqrt exp log where; "
                        "closest: %s", word_s, ts_closest_words(word_s, functions, N_FUNCTIONS, near, sizeof near));
        }
        return unknown_name(ps, at);
    }
    size_t len, k = match_name(ps, at, &len); /* a name that begins with another character: /fc1/Gemm_output_0 */
    if (k != SIZE_MAX) {
        ps->p = at + len;
        return load(ps, at, ps->names[k], out);
    }
    if (!c) return fail(ps, at, "the expression ends where a value should come (a name, a number, a call or '(')");
    return fail(ps, at, "unexpected '%c': a value should come here (a name, a number, a call or '('); a name with such characters goes in "
                "backticks: `name`", c);
}

static bool parse_postfix(parser *ps, val *out) {
    if (!parse_primary(ps, out)) return false;
    for (;;) {
        skip(ps);
        if (*ps->p == '[') {
            if (!index_value(ps, out)) return drop(out), false;
        } else if (ps->p[0] == '.' && ps->p[1] == 'T' && !is_ident(ps->p[2])) {
            const char *at = ps->p;
            ps->p += 2;
            if (!transpose(ps, at, out)) return false;
        } else {
            return true;
        }
    }
}

static bool parse_unary(parser *ps, val *out);

static bool parse_power(parser *ps, val *out) {
    if (!parse_postfix(ps, out)) return false;
    skip(ps);
    if (ps->p[0] != '*' || ps->p[1] != '*') return true;
    const char *at = ps->p;
    ps->p += 2;
    val rhs;
    if (!parse_unary(ps, &rhs)) return drop(out), false;
    return binary(ps, at, OP_POW, out, &rhs);
}

static bool parse_unary(parser *ps, val *out) {
    skip(ps);
    const char *at = ps->p;
    if (*at != '-' && *at != '+') return parse_power(ps, out);
    if (++ps->depth > TS_EVAL_MAX_DEPTH) return fail(ps, at, "nested more than %d deep", TS_EVAL_MAX_DEPTH);
    ps->p++;
    bool ok = parse_unary(ps, out);
    ps->depth--;
    if (ok && *at == '-')
        for (int64_t i = 0, n = numel(out); i < n; i++) out->d[i] = -out->d[i];
    return ok;
}

static bool parse_mul(parser *ps, val *out) {
    if (!parse_unary(ps, out)) return false;
    for (;;) {
        skip(ps);
        const char *at = ps->p;
        int op = *at == '*' && at[1] != '*' ? OP_MUL : *at == '/' ? OP_DIV : *at == '@' ? -1 : -2;
        if (op == -2) return true;
        ps->p++;
        val rhs;
        if (!parse_unary(ps, &rhs)) return drop(out), false;
        if (!(op == -1 ? matmul(ps, at, out, &rhs) : binary(ps, at, op, out, &rhs))) return false;
    }
}

static bool parse_add(parser *ps, val *out) {
    if (!parse_mul(ps, out)) return false;
    for (;;) {
        skip(ps);
        const char *at = ps->p;
        if (*at != '+' && *at != '-') return true;
        ps->p++;
        val rhs;
        if (!parse_mul(ps, &rhs)) return drop(out), false;
        if (!binary(ps, at, *at == '+' ? OP_ADD : OP_SUB, out, &rhs)) return false;
    }
}

static bool parse_cmp(parser *ps, val *out) {
    if (++ps->depth > TS_EVAL_MAX_DEPTH) return fail(ps, ps->p, "nested more than %d deep", TS_EVAL_MAX_DEPTH);
    bool ok = parse_add(ps, out);
    while (ok) {
        skip(ps);
        const char *at = ps->p;
        int op = strncmp(at, "<=", 2) == 0 ? OP_LE : strncmp(at, ">=", 2) == 0 ? OP_GE : strncmp(at, "==", 2) == 0 ? OP_EQ
               : strncmp(at, "!=", 2) == 0 ? OP_NE : *at == '<' ? OP_LT : *at == '>' ? OP_GT : -1;
        if (op < 0) break;
        ps->p += op == OP_LT || op == OP_GT ? 1 : 2;
        val rhs;
        if (!parse_add(ps, &rhs)) {
            drop(out);
            ok = false;
            break;
        }
        ok = binary(ps, at, op, out, &rhs);
    }
    ps->depth--;
    return ok;
}

ts_status ts_eval(const char *expr, const char *const *names, size_t n_names, ts_eval_lookup lookup, void *ctx, ts_array *out) {
    if (!expr || !out || (n_names && (!names || !lookup))) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_eval: NULL argument");
    memset(out, 0, sizeof *out);
    size_t len = strlen(expr);
    if (len > TS_EVAL_MAX_CHARS) return ts_error(TS_ERR_INVALID_ARGUMENT, "eval: the expression has %zu characters; at most %d", len, TS_EVAL_MAX_CHARS);
    parser ps = {.src = expr, .p = expr, .names = names, .n_names = n_names, .lookup = lookup, .ctx = ctx};
    val v = {0};
    bool ok = parse_cmp(&ps, &v);
    if (ok) {
        skip(&ps);
        if (*ps.p) {
            ok = fail(&ps, ps.p, "unexpected '%c' after a complete expression (an operator is missing, or a name with such characters goes "
                      "in backticks: `name`)", *ps.p);
            drop(&v);
        }
    }
    if (!ok) return ts_error(ps.code ? ps.code : TS_ERR_INTERNAL, "%s", ps.msg);
    out->dtype = TS_F32;
    out->ndim = v.ndim;
    memcpy(out->shape, v.shape, sizeof v.shape);
    out->data = v.d;
    return TS_OK;
}

void ts_eval_free(ts_array *a) {
    if (!a) return;
    ts_free(a->data);
    a->data = NULL;
}
