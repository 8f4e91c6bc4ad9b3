/* cmd_diff.c -- `diff A B`: two runs of one model, tensor by tensor
 * (docs/observation.md#a-diff-of-two-runs). Tensors pair by name, in graph
 * order: the forward's values, then the backward's gradients (in the order
 * the backward computes them), then the update's tensors. Each pair is
 * bit-equal (ts_array_hash), close (compare's element rule) or differs;
 * the first that is not bit-equal and the first that differs are named
 * with their op, source line and inputs' state when the model is given. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

enum { PHASE_FORWARD, PHASE_BACKWARD, PHASE_UPDATE };
static const char *const PHASE_NAME[] = {"forward", "backward", "update"};
static const char *const KIND_WORD[] = {"bit-equal", "close", "DIFFERS"};

typedef struct diff_row {
    const char *name;
    int phase;
    long pos; /* within the phase */
    ts_diff_result r;
    char error[160]; /* another shape: why it was not compared */
} diff_row;

typedef struct diff_view {
    const diff_row *rows;
    int n;
    int strict; /* explaining a bit difference: only bit-equal matches */
} diff_view;

static const diff_row *find_diff_row(const diff_view *v, const char *name) {
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->rows[i].name, name) == 0) return &v->rows[i];
    return NULL;
}

static int diff_state(void *ctx, const char *name, const char **word) {
    const diff_view *v = ctx;
    const diff_row *r = find_diff_row(v, name);
    if (!r) {
        if (word) *word = "not in both dumps";
        return -1;
    }
    if (word) *word = r->error[0] ? "has another shape" : r->r.kind == TS_DIFF_BIT_EQUAL ? "bit-equal" : r->r.kind == TS_DIFF_CLOSE ? "close" : "differs";
    if (r->error[0]) return 1;
    return r->r.kind == TS_DIFF_BIT_EQUAL ? 0 : r->r.kind == TS_DIFF_CLOSE && !v->strict ? 0 : 1;
}

/* The phase of a dumped name: Gradient___X the backward, any other
 * PREFIX___X (Accum___, UpdatedVar___, Accl___, ...) the update. */
static int phase_of(const char *name, const char **base) {
    const char *sep = strstr(name, "___");
    *base = sep ? sep + 3 : name;
    return !sep ? PHASE_FORWARD : strncmp(name, "Gradient___", 11) == 0 ? PHASE_BACKWARD : PHASE_UPDATE;
}

static long graph_index(ts_graph *g, const char *name) {
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++)
        if (strcmp(ts_tensor_name(ts_graph_tensor_at(g, i)), name) == 0) return (long)i;
    return -1;
}

static int cmp_diff_rows(const void *a, const void *b) {
    const diff_row *x = a, *y = b;
    if (x->phase != y->phase) return x->phase - y->phase;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static void print_first(const char *what, ts_graph *g, const diff_view *v, const diff_row *r) {
    char detail[4096];
    cli_explain(g, r->name, diff_state, (void *)v, detail, sizeof detail);
    printf("%s: %s (%s; max abs %.3g, max rel %.3g)\n  %s\n", what, r->name, PHASE_NAME[r->phase], r->r.cmp.max_abs, r->r.cmp.max_rel,
           g ? detail : "give the model (--model and its flags) to name its op, source line and inputs");
}

int cmd_diff(int argc, char **argv) {
    const char *model = NULL;
    double atol = 1e-5, rtol = 1e-4;
    long batch = 0;
    bool exact = false;
    cli_list inputs = {0};
    cli_import imp = {0};
    const cli_flag flags[] = {
        {"--atol", FLAG_FLOAT, &atol, "A", "absolute tolerance (default 1e-5)"},
        {"--rtol", FLAG_FLOAT, &rtol, "R", "relative tolerance (default 1e-4): close when |a-b| <= atol + rtol*|b|"},
        {"--exact", FLAG_BOOL, &exact, NULL, "a tensor that is not bit-equal is a difference (exit status 1)"},
        {"--model", FLAG_STRING, &model, "NAME|FILE.onnx", "the runs' model (mlp, cnn, gpt or an ONNX file): graph order, ops, lines"},
        {"--input", FLAG_LIST, &inputs, "NAME:SHAPE", "static shape of a model input (as for train)"},
        {"--batch-size", FLAG_INT, &batch, "B", "micro-batch size of the model (default: the dump's x or tokens, else 64)"},
        CLI_GPT_FLAGS(imp),
        {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    const char *pa = NULL, *pb = NULL;
    int first = 2;
    if (argc > first && strncmp(argv[first], "--", 2) != 0) pa = argv[first++];
    if (argc > first && strncmp(argv[first], "--", 2) != 0) pb = argv[first++];
    bool help;
    int rc = cli_parse("diff", "A B [--model M] [--atol A] [--rtol R] [--exact]   (A, B: .npz files or --dump-npy directories)", flags,
                       argc, argv, first, NULL, &help);
    if (rc || help) return rc;
    if (!pa || !pb) return cli_usage_error("diff", "give two dumps: tensorscope diff A B (each an .npz or a directory of .npy files)");
    if (!(atol >= 0) || !(rtol >= 0)) return cli_usage_error("diff", "--atol and --rtol must be >= 0");
    if (batch < 0) return cli_usage_error("diff", "--batch-size must be >= 1");
    const cli_need needs[] = {{"A", cli_file_feature(pa)}, {"B", cli_file_feature(pb)}, {"--model", cli_file_feature(model)}};
    if ((rc = cli_need_features("diff", needs, sizeof needs / sizeof needs[0]))) return rc;

    cli_dump da = {0}, db = {0};
    cli_model cm = {0};
    diff_row *rows = NULL;
    int n = 0;
    if (cli_dump_load(pa, &da) || cli_dump_load(pb, &db)) {
        rc = cli_runtime_error("reading the dumps");
        goto done;
    }
    if (model) {
        const ts_array *x = cli_dump_find(&da, "x") ? cli_dump_find(&da, "x") : cli_dump_find(&da, "tokens");
        if (!batch) batch = x && x->ndim > 0 ? (long)x->shape[0] : 64;
        const ts_array *tok = cli_dump_find(&da, "tokens");
        if (!imp.block_size && !inputs.n && tok && tok->ndim == 2) imp.block_size = (long)tok->shape[1];
        imp.inputs = &inputs;
        ts_status st = cli_model_open(model, batch, 0, NULL, &imp, &cm);
        if (st) {
            rc = cm.error[0] ? cli_usage_error("diff", "%s", cm.error) : st == TS_ERR_NOT_FOUND ? cli_unknown_model("diff", model)
                                                                                                  : cli_runtime_error("building the model");
            goto done;
        }
    }
    /* the order: the model's graph, else the order A (else B) records, else names */
    const cli_dump *od = da.ordered || !db.ordered ? &da : &db;
    size_t na = cli_dump_count(&da), nb = cli_dump_count(&db);
    rows = calloc(na + 1, sizeof *rows);
    if (!rows) {
        rc = cli_runtime_error("out of memory");
        goto done;
    }
    for (size_t i = 0; i < na; i++) {
        const char *name = cli_dump_name(&da, i), *base;
        const ts_array *b = cli_dump_find(&db, name);
        if (!b) continue;
        diff_row *r = &rows[n++];
        r->name = name;
        r->phase = phase_of(name, &base);
        long rec = od == &da ? (long)i : -1;
        for (size_t j = 0; rec < 0 && j < nb; j++)
            if (strcmp(cli_dump_name(&db, j), name) == 0) rec = (long)j;
        long gi = cm.g ? graph_index(cm.g, base) : -1;
        long pos = gi >= 0 ? gi : (cm.g ? (long)ts_graph_tensor_count(cm.g) : 0) + rec; /* names the graph lacks: after */
        r->pos = r->phase == PHASE_BACKWARD && (gi >= 0 || !cm.g) ? -pos : pos;     /* the backward runs in reverse */
        if (ts_diff_arrays(cli_dump_array(&da, i), b, atol, rtol, &r->r)) {
            snprintf(r->error, sizeof r->error, "%s", ts_last_error());
            r->r.kind = TS_DIFF_DIFFERS;
        }
    }
    if (!n) {
        rc = cli_usage_error("diff", "no tensor name is in both %s and %s (are they dumps of the same model?)", pa, pb);
        goto done;
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_diff_rows);
    const char *how = cm.g ? "the model's graph order" : od->ordered ? "the order the dump records" : "name order (neither dump records its order)";
    printf("diff %s %s: %d tensors in both, in %s (forward, backward, update); close: |a-b| <= atol + rtol*|b| (atol %g, rtol %g)\n", pa,
           pb, n, how, atol, rtol);
    printf("%-9s %-9s %-40s %-16s %-16s %-10s %-10s\n", "phase", "state", "tensor", "hash A", "hash B", "max abs", "max rel");
    int counts[3] = {0}, first_bits = -1, first_diff = -1;
    for (int i = 0; i < n; i++) {
        const diff_row *r = &rows[i];
        counts[r->r.kind]++;
        if (r->r.kind != TS_DIFF_BIT_EQUAL && first_bits < 0) first_bits = i;
        if (r->r.kind == TS_DIFF_DIFFERS && first_diff < 0) first_diff = i;
        if (r->error[0]) printf("%-9s %-9s %-40s %s\n", PHASE_NAME[r->phase], "DIFFERS", r->name, r->error);
        else
            printf("%-9s %-9s %-40s %016llx %016llx %-10.3g %-10.3g\n", PHASE_NAME[r->phase], KIND_WORD[r->r.kind], r->name,
                   (unsigned long long)r->r.hash_a, (unsigned long long)r->r.hash_b, r->r.cmp.max_abs, r->r.cmp.max_rel);
    }
    int only_a = (int)na - n, only_b = 0;
    for (size_t j = 0; j < nb; j++) only_b += !cli_dump_find(&da, cli_dump_name(&db, j));
    if (only_a || only_b) printf("not compared: %d tensor%s only in %s, %d only in %s\n", only_a, only_a == 1 ? "" : "s", pa, only_b, pb);
    printf("\n%d bit-equal, %d close, %d differ\n", counts[0], counts[1], counts[2]);
    diff_view strict = {rows, n, 1}, loose = {rows, n, 0};
    if (first_bits >= 0) print_first("first tensor not bit-equal", cm.g, &strict, &rows[first_bits]);
    if (first_diff >= 0 && first_diff != first_bits) print_first("first tensor that differs", cm.g, &loose, &rows[first_diff]);
    if (first_bits < 0) printf("the runs are bit-identical\n");
    rc = first_diff >= 0 || (exact && first_bits >= 0) ? CLI_RUNTIME : CLI_OK;
done:
    free(rows);
    ts_graph_free(cm.g);
    cli_dump_free(&da);
    cli_dump_free(&db);
    return rc;
}
