/* autocast.c -- a model's precision on its graph (ts_options_set_precision),
 * as PyTorch's autocast: the float inputs of matmuls, batched matmuls and
 * convolutions become 16-bit copies (Cast nodes named `<input>@bf16` or
 * `<input>@f16`, one per input however many ops read it), which those ops
 * read and accumulate in f32; every other op, the losses, the master
 * weights and the optimizer stay f32. The copies are inserted right before
 * their first reader, so node ids stay in topological order. */
#include "graph/graph.h"
#include "core/half.h"
#include "graph/ops.h"

#include <stdio.h>
#include <string.h>

/* The inputs op reads as GEMM operands (bit j: input j), 0 for other ops. */
static unsigned gemm_operands(ts_op op) {
    switch (op) {
    case TS_OP_MATMUL: case TS_OP_MATMUL_T: case TS_OP_BATCH_MATMUL: return 0x3u;
    case TS_OP_CONV2D: return 0x3u; /* x and the weight; the bias is added in f32 */
    default: return 0;
    }
}

static bool wants_copy(const ts_graph *g, const ts_tensor *t, int j, ts_dtype dtype) {
    const ts_tensor *x = g->t[t->in[j]];
    return ((gemm_operands(t->op) >> j) & 1u) && x->dtype == TS_F32 && x->grid != dtype;
}

/* Moves node ids so each node follows its inputs again: old node i goes
 * to new[i]; every id the graph keeps follows. */
static void renumber(ts_graph *g, const int *to) {
    size_t n = g->n;
    ts_tensor **moved = g->t; /* reordered in place through a scratch pass below */
    for (size_t i = 0; i < n; i++) {
        ts_tensor *t = moved[i];
        for (int j = 0; j < t->n_in; j++) t->in[j] = to[t->in[j]];
    }
    for (size_t k = 0; k < g->n_aliases; k++) g->aliases[k].tensor = to[g->aliases[k].tensor];
    for (size_t k = 0; k < g->n_outputs; k++) g->outputs[k] = to[g->outputs[k]];
    for (size_t k = 0; k < g->n_marks; k++) g->marks[k].tensor = to[g->marks[k].tensor];
    for (size_t i = 0; i < n; i++) moved[i]->id = to[i];
    /* a permutation applied by cycles: no second array */
    for (size_t i = 0; i < n; i++)
        while ((size_t)g->t[i]->id != i) {
            size_t d = (size_t)g->t[i]->id;
            ts_tensor *tmp = g->t[d];
            g->t[d] = g->t[i];
            g->t[i] = tmp;
        }
    for (size_t i = 0; i < n; i++) ts_strmap_put(&g->names, g->t[i]->name, (int)i); /* replaces: cannot fail */
}

ts_status ts_graph_autocast(ts_graph *g, ts_dtype dtype) {
    if (!g) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_autocast: graph is NULL");
    if (dtype != TS_F32 && dtype != TS_BF16 && dtype != TS_F16)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "precision must be f32, bf16 or f16, not %s", ts_dtype_name(dtype));
    if (g->sticky) return ts_error(g->sticky, "ts_graph_autocast: the graph has an error from building it: %s", g->sticky_msg);
    bool shared = g->n_models > 0;
    if (dtype == TS_F32 && g->precision == TS_F32) return TS_OK;
    if (g->precision != TS_F32 && g->precision != dtype)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "precision %s: this graph's matmuls already read %s copies (an earlier model's precision); "
                        "build the graph again for a model of another precision", ts_dtype_name(dtype), ts_dtype_name(g->precision));
    if (dtype == TS_F32) return TS_OK;
    size_t n0 = g->n;
    int needed = 0;
    for (size_t i = 0; i < n0; i++)
        for (int j = 0; j < g->t[i]->n_in; j++) needed += wants_copy(g, g->t[i], j, dtype);
    if (!needed) {
        g->precision = dtype;
        return TS_OK;
    }
    if (shared)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "precision %s: another model uses this graph, and giving its matmuls %s inputs would change "
                        "that model too; make the %s model first, or build a graph for it", ts_dtype_name(dtype), ts_dtype_name(dtype), ts_dtype_name(dtype));
    int *first = ts_calloc(n0 + (size_t)needed, sizeof *first); /* per new cast: the first node that reads it */
    int *to = ts_calloc(n0 + (size_t)needed, sizeof *to);
    if (!first || !to) {
        ts_free(first), ts_free(to);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "precision %s: no memory for the casts", ts_dtype_name(dtype));
    }
    const char *file = g->file, *origin = g->origin;
    int line = g->line;
    ts_status st = TS_OK;
    for (size_t i = 0; i < n0 && !st; i++) {
        ts_tensor *t = g->t[i];
        for (int j = 0; j < t->n_in && !st; j++) {
            if (!wants_copy(g, t, j, dtype)) continue;
            const ts_tensor *x = g->t[t->in[j]];
            char name[600];
            snprintf(name, sizeof name, "%s@%s", x->name, ts_dtype_name(dtype));
            int c = ts_strmap_get(&g->names, name);
            if (c < 0) {
                g->file = t->file, g->line = t->line, g->origin = t->origin; /* built where its first reader was */
                ts_tensor *cast = ts_graph_cast_named(g, x, dtype, name);
                if (!cast) {
                    st = g->sticky;
                    break;
                }
                c = cast->id;
                first[c - (int)n0] = (int)i;
            }
            t->in[j] = c;
        }
    }
    g->file = file, g->line = line, g->origin = origin;
    if (!st) {
        /* each new cast goes right before its first reader */
        int next = 0;
        for (size_t i = 0; i < n0; i++) {
            for (size_t c = n0; c < g->n; c++)
                if (first[c - n0] == (int)i) to[c] = next++;
            to[i] = next++;
        }
        renumber(g, to);
        g->precision = dtype;
    }
    ts_free(first);
    ts_free(to);
    return st;
}

/* The twin's ops are what it reads back to the node's own inputs (as
 * compile's find_fusions walks them); a twin of more ops than this is
 * not one the pass stands for anyway. */
#define TWIN_MAX 64

ts_attn_copies ts_attention_copies(const ts_tensor *att) {
    ts_attn_copies c = {0, TS_F32, NULL};
    if (!att || att->op != TS_OP_ATTENTION || att->n_in != 5 || !att->g) return c;
    const ts_graph *g = att->g;
    int stack[TWIN_MAX * TS_MAX_INPUTS], seen[TWIN_MAX], ns = 0, n_seen = 0;
    stack[ns++] = att->in[4];
    while (ns && !c.why_not) {
        int id = stack[--ns];
        const ts_tensor *t = g->t[id];
        bool skip = t->op == TS_OP_INPUT || ts_op_holds_value(t->op);
        for (int j = 0; j < 4; j++) skip = skip || att->in[j] == id;
        for (int s = 0; s < n_seen; s++) skip = skip || seen[s] == id;
        if (skip) continue;
        if (n_seen == TWIN_MAX) break;
        seen[n_seen++] = id;
        if (t->op == TS_OP_CAST && ts_dtype_is_half(t->grid)) {
            int x = t->in[0];
            unsigned bit = x == att->in[0] ? TS_ATT_COPY_Q : x == att->in[1] ? TS_ATT_COPY_K : x == att->in[2] ? TS_ATT_COPY_V
                         : g->t[x]->op == TS_OP_SOFTMAX ? TS_ATT_COPY_P : 0;
            if (!bit) c.why_not = "its twin rounds a tensor other than q, k, v and the probabilities to 16 bits";
            else if (c.dtype != TS_F32 && c.dtype != t->grid) c.why_not = "its twin's 16-bit copies are of two types";
            c.which |= bit, c.dtype = t->grid;
        }
        for (int j = 0; j < t->n_in && ns < TWIN_MAX * TS_MAX_INPUTS; j++) stack[ns++] = t->in[j];
    }
    return c;
}
