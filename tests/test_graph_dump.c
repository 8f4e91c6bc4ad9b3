/* test_graph_dump.c -- ts_graph_dump on the tutorial MLP (plus a print op
 * and an outfeed): every node once with its op, inputs, shape and flags, in
 * id order; compiled shapes after a run with another micro-batch size;
 * source locations only when asked (argument or TS_IR_DEBUG); the dump of an
 * uncompiled graph; TS_SAVE_GRAPH_FILE written at compile in both formats,
 * every compile appended; the backward pass and optimizer step
 * (TS_DUMP_BACKWARD, TS_SAVE_GRAPH_BACKWARD).
 *
 * `test_graph_dump --dot FILE` writes the DOT dump of the MLP with a tensor
 * renamed to WEIRD_NAME (UTF-8 and characters DOT gives meaning to) and a
 * print title with quotes, backslashes, a newline and a byte that is not
 * UTF-8, and exits: tests/test_graph_dot.sh feeds it to Graphviz;
 * `--dot-backward FILE` the same model's dump with its backward pass and
 * optimizer step, and its tensor names in FILE.names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tensorscope.h"

enum { BATCH = 16, D = 2 };

/* Tensor names may not hold quotes or backslashes; print titles may. */
#define WEIRD_NAME "w\xc3\xa9ird <relu> {a|b}; [x] -> y"
#define WEIRD_TITLE "say \"hi\\\n\xff"

typedef struct mlp {
    ts_graph *g;
    ts_tensor *loss, *relu0;
    ts_outfeed *q;
    int fc1_line; /* where fc1 was built */
} mlp;

static int build(mlp *n, const char *title) {
    memset(n, 0, sizeof *n);
    ts_outfeed_config qc = {.name = "probe", .mode = TS_OUTFEED_LAST, .depth = 4};
    if (ts_outfeed_new(&n->q, &qc)) return 1;
    ts_graph *g = n->g = ts_graph_new(7);
    int64_t xs[] = {BATCH, 1, 28, 28}, ys[] = {BATCH};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_flatten(g, x, 1);
    n->fc1_line = __LINE__ + 1;
    h = n->relu0 = ts_relu(g, ts_linear(g, h, 320, "fc1"));
    h = ts_print(g, h, title);
    h = ts_relu(g, ts_linear(g, h, 100, "fc2"));
    ts_outfeed_add(g, n->q, "relu1", h);
    h = ts_log_softmax(g, ts_linear(g, h, 10, "fc3"), 1);
    n->loss = ts_nll_loss(g, h, y);
    ts_tensor_set_name(n->loss, "loss");
    return ts_graph_status(g) != TS_OK;
}

static void destroy(mlp *n) {
    ts_graph_free(n->g);
    ts_outfeed_free(n->q);
}

/* The options every model here uses: anchors on a gradient and a weight,
 * watches on fc1* values and on one gradient. */
static ts_options *make_options(void) {
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_anchor(o, "g2", "Gradient___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "w1", "fc1.weight", TS_OUTPUT_FINAL, 0);
    ts_options_watch(o, "fc1*", TS_WATCH_STATS, 1);
    ts_options_watch(o, "Gradient___fc3.weight", TS_WATCH_STATS, 1);
    return o;
}

static void quiet_log(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

/* The dump's line for `name` (copied into buf), or NULL. */
static const char *line_of(const char *dump, const char *name, char *buf, size_t n) {
    char head[512];
    snprintf(head, sizeof head, "%%%s = ", name);
    for (const char *p = dump; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (strncmp(p, head, strlen(head)) == 0 && len < n) {
            memcpy(buf, p, len);
            buf[len] = '\0';
            return buf;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int has_flag(const char *line, const char *flag) {
    char f[64];
    snprintf(f, sizeof f, " [%s]", flag);
    return strstr(line, f) != NULL;
}

/* Flags the test knows each node must (and must not) carry. */
static int check_flags(const char *dump, const ts_graph *g, int compiled) {
    int bad = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        const ts_tensor *t = ts_graph_tensor_at(g, i);
        const char *name = ts_tensor_name(t);
        char line[1024];
        if (!line_of(dump, name, line, sizeof line)) return 1;
        int is_param = strstr(name, ".weight") || strstr(name, ".bias");
        int is_fc1 = strncmp(name, "fc1", 3) == 0;
        /* gradients flow to the parameters and what depends on them */
        int want_grad = compiled && strcmp(name, "x") != 0 && strcmp(name, "labels") != 0 && strcmp(name, "Flatten:0") != 0;
        const char *want_anchor = !compiled ? NULL
                                  : strcmp(name, "fc2.bias") == 0 ? "anchored(grad)"
                                  : strcmp(name, "fc1.weight") == 0 ? "anchored"
                                  : strcmp(name, "loss") == 0 ? "anchored" : NULL;
        const char *want_watch = !compiled ? NULL
                                 : strcmp(name, "fc3.weight") == 0 ? "watched(grad)"
                                 : is_fc1 ? "watched" : NULL;
        int ok = has_flag(line, "param") == !!is_param && has_flag(line, "grad") == want_grad &&
                 (want_anchor ? has_flag(line, want_anchor) : !strstr(line, "[anchored")) &&
                 (want_watch ? has_flag(line, want_watch) : !strstr(line, "[watched")) &&
                 has_flag(line, "printed") == (strcmp(name, "Print:0") == 0) &&
                 has_flag(line, "outfeed") == (strcmp(name, "Relu:1") == 0) &&
                 has_flag(line, "loss") == (compiled && strcmp(name, "loss") == 0);
        if (!ok) {
            printf("     unexpected flags: %s\n", line);
            bad = 1;
        }
    }
    return bad;
}

/* Every node once, in id order, as `%name = Op(%in...) : dtype[shape]`;
 * tensors declared with the batch on axis 0 carry `batch` there. */
static int check_nodes(const char *dump, const ts_graph *g, int64_t batch) {
    int bad = 0;
    size_t n = ts_graph_tensor_count(g);
    const char *prev = dump;
    for (size_t i = 0; i < n; i++) {
        const ts_tensor *t = ts_graph_tensor_at(g, i);
        char line[1024], want[256];
        if (!line_of(dump, ts_tensor_name(t), line, sizeof line)) {
            printf("     no line for %s\n", ts_tensor_name(t));
            bad = 1;
            continue;
        }
        ts_array info;
        ts_tensor_info(t, &info);
        int is_param = info.data != NULL;
        /* activations and inputs carry the batch on axis 0, except the loss */
        if (!is_param && info.ndim > 0 && info.shape[0] == BATCH) info.shape[0] = batch;
        char shape[128];
        ts_array_shape_str(&info, shape, sizeof shape);
        snprintf(want, sizeof want, " : %s", shape);
        if (!strstr(line, want)) {
            printf("     %s: want '%s' in '%s'\n", ts_tensor_name(t), want, line);
            bad = 1;
        }
        char head[300];
        snprintf(head, sizeof head, "\n%%%s = ", ts_tensor_name(t));
        const char *at = strstr(dump, head);
        if (!at || at < prev) {
            printf("     %s is not after the previous node\n", ts_tensor_name(t));
            bad = 1;
        } else {
            prev = at;
        }
    }
    if (count_lines(dump) != (int)n + 1) {
        printf("     %d lines for %zu nodes + 1 header\n", count_lines(dump), n);
        bad = 1;
    }
    return bad;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)len + 1);
    if (s && fread(s, 1, (size_t)len, f) != (size_t)len) {
        free(s);
        s = NULL;
    }
    if (s) s[len] = '\0';
    fclose(f);
    return s;
}

static ts_status run_once(ts_model *m, int64_t batch) {
    int64_t rows = D * batch;
    float *x = calloc((size_t)(rows * 784), sizeof(float));
    int32_t *y = calloc((size_t)rows, sizeof(int32_t));
    for (int64_t i = 0; i < rows * 784; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int64_t i = 0; i < rows; i++) y[i] = (int32_t)(i % 10);
    ts_array in[2] = {ts_array_f32(x, 4, (int64_t[]){rows, 1, 28, 28}), ts_array_i32(y, 1, (int64_t[]){rows})};
    const char *names[] = {"x", "labels"};
    ts_status st = ts_model_run(m, names, in, 2);
    free(x);
    free(y);
    return st;
}

/* ---- an allocator that refuses its Nth call and counts live blocks */

static long alloc_calls, alloc_fail_at, alloc_live;

static void *fail_alloc(void *u, size_t n) {
    (void)u;
    if (++alloc_calls == alloc_fail_at) return NULL;
    void *p = malloc(n);
    alloc_live += p != NULL;
    return p;
}
static void *fail_realloc(void *u, void *p, size_t n) {
    (void)u;
    if (++alloc_calls == alloc_fail_at) return NULL;
    void *q = realloc(p, n);
    alloc_live += q && !p;
    return q;
}
static void fail_free(void *u, void *p) {
    (void)u;
    alloc_live -= p != NULL;
    free(p);
}

/* Every allocation of a dump refused in turn: NULL with an out-of-memory
 * message, never a crash, nothing leaked; with none refused, the same dump. */
static void check_alloc_failures(const ts_graph *g, const ts_model *m, ts_dump_format fmt, int flags) {
    char *want = ts_graph_dump(g, m, fmt, flags);
    ts_allocator a = {fail_alloc, fail_realloc, fail_free, NULL};
    int bad = 0, n_calls = 0;
    for (long n = 1; n < 1000 && want; n++) {
        alloc_calls = alloc_live = 0;
        alloc_fail_at = n;
        ts_set_allocator(&a);
        char *d = ts_graph_dump(g, m, fmt, flags);
        ts_set_allocator(NULL);
        if (d && alloc_calls < n) { /* no call left to refuse */
            bad |= strcmp(d, want) != 0;
            n_calls = (int)alloc_calls;
            fail_free(NULL, d);
            break;
        }
        if (d) fail_free(NULL, d);
        bad |= d != NULL || strstr(ts_last_error(), "out of memory") == NULL || alloc_live != 0;
    }
    CHECK(want && !bad && n_calls > 0, "%s dump%s: each of its %d allocations refused in turn gives NULL and an out-of-memory error, leaks nothing",
          fmt == TS_DUMP_DOT ? "DOT" : "text", flags & TS_DUMP_BACKWARD ? " with the backward pass" : "", n_calls);
    ts_string_free(want);
}

/* ---- the backward pass (TS_DUMP_BACKWARD) */

/* The dump's lines after "# backward", comments left out; each split at
 * " = " / " += " into outputs and the rest. */
typedef struct bwd_line {
    char outs[8][160];
    int n_out;
    char text[1024];
} bwd_line;

static int backward_lines(const char *dump, bwd_line *v, int max) {
    const char *p = dump ? strstr(dump, "\n# backward") : NULL;
    int n = 0;
    for (p = p ? p + 1 : NULL; p && *p && n < max;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (*p == '%' && len < sizeof v[n].text) {
            bwd_line *l = &v[n++];
            memcpy(l->text, p, len);
            l->text[len] = '\0';
            const char *eq = strstr(l->text, " = ");
            const char *pe = strstr(l->text, " += ");
            const char *stop = pe && (!eq || pe < eq) ? pe : eq;
            l->n_out = 0;
            for (const char *q = l->text; stop && q < stop && l->n_out < 8;) {
                const char *c = strstr(q, ", ");
                const char *e = c && c < stop ? c : stop;
                snprintf(l->outs[l->n_out++], sizeof l->outs[0], "%.*s", (int)(e - q - 1), q + 1); /* without the % */
                q = e + 2;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return n;
}

static int is_derived(const char *name) {
    static const char *const prefix[] = {"Gradient___", "Accum___", "UpdatedVar___", "Accl___", "Accl1___", "Accl2___", "Step___"};
    for (size_t k = 0; k < sizeof prefix / sizeof *prefix; k++)
        if (strncmp(name, prefix[k], strlen(prefix[k])) == 0) return 1;
    return 0;
}

/* Every derived tensor the model names (docs/architecture.md#tensor-names: Gradient___, Accum___,
 * UpdatedVar___, optimizer state) is written by exactly one line; no line
 * writes a name the model does not have; every gradient a line reads was
 * written by an earlier line (the order they run in). */
static int check_backward_names(const char *dump, const ts_model *m, int *n_lines) {
    static bwd_line lines[256];
    int n = backward_lines(dump, lines, 256), bad = 0;
    *n_lines = n;
    const char *const *names;
    size_t n_names;
    if (n == 0 || ts_model_tensor_names(m, &names, &n_names)) return 1;
    for (size_t i = 0; i < n_names; i++) {
        if (!is_derived(names[i])) continue;
        int writers = 0;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < lines[k].n_out; j++) writers += strcmp(lines[k].outs[j], names[i]) == 0;
        if (writers != 1) {
            printf("     %s is written by %d lines\n", names[i], writers);
            bad = 1;
        }
    }
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < lines[k].n_out; j++) {
            int known = 0;
            for (size_t i = 0; i < n_names; i++) known |= strcmp(names[i], lines[k].outs[j]) == 0;
            if (!known) {
                printf("     line %d writes %s, which the model does not name\n", k, lines[k].outs[j]);
                bad = 1;
            }
        }
        /* the first argument of a backward op is the gradient it reads */
        const char *g = strstr(lines[k].text, "Backward(%");
        if (!g) continue;
        char read[160];
        snprintf(read, sizeof read, "%.*s", (int)strcspn(g + 10, ",)"), g + 10);
        int before = 0;
        for (int q = 0; q < k; q++)
            for (int j = 0; j < lines[q].n_out; j++) before |= strcmp(lines[q].outs[j], read) == 0;
        if (!before) {
            printf("     line %d reads %s before any line writes it: %s\n", k, read, lines[k].text);
            bad = 1;
        }
    }
    return bad;
}

static int has_line(const char *dump, const char *want) {
    char pat[1200];
    snprintf(pat, sizeof pat, "\n%s\n", want);
    int found = dump && strstr(dump, pat) != NULL;
    if (!found) printf("     no line '%s'\n", want);
    return found;
}

static void test_backward(const mlp *n, const ts_model *m) {
    char *d = ts_graph_dump(n->g, m, TS_DUMP_TEXT, TS_DUMP_BACKWARD);
    char *plain = ts_graph_dump(n->g, m, TS_DUMP_TEXT, 0);
    CHECK(d && plain && strncmp(d, plain, strlen(plain)) == 0 && strstr(d + strlen(plain), "# backward, once per micro-batch"),
          "TS_DUMP_BACKWARD: the forward dump, then a '# backward, once per micro-batch' section");
    int n_lines = 0;
    CHECK(d && check_backward_names(d, m, &n_lines) == 0,
          "each of the model's Gradient___, Accum___, UpdatedVar___ and Accl___ tensors is written by exactly one of the %d lines, "
          "each gradient read after the line that writes it", n_lines);
    CHECK(has_line(d, "%Gradient___loss = OnesLike(%loss) : f32[]") &&
              has_line(d, "%Gradient___LogSoftmax:0 += NllLossBackward(%Gradient___loss, %labels) : f32[16,10]") &&
              has_line(d, "%Gradient___fc3/Add:0 += LogSoftmaxBackward(%Gradient___LogSoftmax:0, %LogSoftmax:0) : f32[16,10]") &&
              has_line(d, "%Gradient___fc2/MatMul:0, %Gradient___fc2.bias += AddBackward(%Gradient___fc2/Add:0) : f32[16,100], f32[100] [anchored]") &&
              has_line(d, "%Gradient___Relu:0 += PrintBackward(%Gradient___Print:0) : f32[16,320]") &&
              has_line(d, "%Gradient___fc1.weight += MatMulBackward(%Gradient___fc1/MatMul:0, %Flatten:0, %fc1.weight) : f32[320,784]"),
          "backward lines: the loss's seed, each op's backward with the gradient and forward tensors it reads and the "
          "gradients it adds into (an anchored one flagged)");
    CHECK(strstr(d ? d : "", "\n# optimizer step, after every micro-batch\n") &&
              has_line(d, "%Accum___fc1.weight = Alias(%Gradient___fc1.weight) : f32[320,784]") &&
              has_line(d, "%UpdatedVar___fc3.bias, %Accl___fc3.bias = SGD(%fc3.bias, %Accum___fc3.bias, %Accl___fc3.bias, lr=0.01, "
                          "momentum=0.9) : f32[10], f32[10]") &&
              has_line(d, "%Gradient___Relu:1, %Gradient___fc3.weight += MatMulBackward(%Gradient___fc3/MatMul:0, %Relu:1, %fc3.weight) "
                          ": f32[16,100], f32[10,100] [watched]"),
          "optimizer step: Accum___ (the gradient's buffer at A = 1), then SGD writing UpdatedVar___ and the momentum Accl___; "
          "a watched gradient flagged after its shape");
    const char *fc1 = d ? strstr(d, "AddBackward(%Gradient___fc1/Add:0)") : NULL;
    char want[256];
    snprintf(want, sizeof want, " @ %s:%d\n", __FILE__, n->fc1_line);
    char *loc = ts_graph_dump(n->g, m, TS_DUMP_TEXT, TS_DUMP_BACKWARD | TS_DUMP_LOCATIONS);
    const char *fc1_loc = loc ? strstr(loc, "AddBackward(%Gradient___fc1/Add:0)") : NULL;
    CHECK(fc1 && !strstr(d, " @ ") && fc1_loc && strncmp(strchr(fc1_loc, '\n') - strlen(want) + 1, want, strlen(want)) == 0,
          "with TS_DUMP_LOCATIONS a backward op says where its op was built: '%.*s'", (int)strlen(want) - 1, want);
    ts_string_free(loc);
    ts_string_free(plain);
    ts_string_free(d);
}

/* The DOT dump for tests/test_graph_dot.sh; with the backward pass (A = 2,
 * SGD with momentum), the model's tensor names go to PATH.names. */
static int write_dot(const char *path, int backward) {
    mlp n;
    if (build(&n, WEIRD_TITLE)) return 1;
    ts_status st = ts_tensor_set_name(n.relu0, WEIRD_NAME);
    ts_options *o = make_options();
    ts_model *m = NULL;
    if (!st && backward) st = ts_options_set_gradient_accumulation(o, 2);
    if (!st) st = ts_model_training(&m, n.g, n.loss, o, ts_sgd(0.01f, backward ? 0.9f : 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    char *dot = st ? NULL : ts_graph_dump(n.g, m, TS_DUMP_DOT, TS_DUMP_LOCATIONS | (backward ? TS_DUMP_BACKWARD : 0));
    FILE *f = dot ? fopen(path, "w") : NULL;
    int bad = !f || fputs(dot, f) == EOF;
    if (f) bad |= fclose(f) != 0;
    const char *const *names;
    size_t n_names;
    if (!bad && backward && !ts_model_tensor_names(m, &names, &n_names)) {
        char np[1024];
        snprintf(np, sizeof np, "%s.names", path);
        f = fopen(np, "w");
        for (size_t i = 0; f && i < n_names; i++) fprintf(f, "%s\n", names[i]);
        bad |= !f || fclose(f) != 0;
    }
    if (bad) fprintf(stderr, "test_graph_dump --dot: %s\n", st ? ts_last_error() : "cannot write the file");
    ts_string_free(dot);
    ts_model_free(m);
    ts_options_free(o);
    destroy(&n);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--dot") == 0) return write_dot(argv[2], 0);
    if (argc == 3 && strcmp(argv[1], "--dot-backward") == 0) return write_dot(argv[2], 1);
    ts_set_log_callback(quiet_log, NULL); /* the print op logs every run */
    unsetenv("TS_IR_DEBUG");
    unsetenv("TS_SAVE_GRAPH_FILE");
    unsetenv("TS_SAVE_GRAPH_FMT");
    unsetenv("TS_SAVE_GRAPH_BACKWARD");

    mlp n;
    CHECK(build(&n, "probe") == 0, "built the MLP with a print op and an outfeed");
    ts_graph *g = n.g;

    /* uncompiled graph: declared shapes, no model flags, no locations */
    char *plain = ts_graph_dump(g, NULL, TS_DUMP_TEXT, 0);
    CHECK(plain != NULL, "dump of an uncompiled graph");
    if (!plain) return check_summary("test_graph_dump");
    CHECK(check_nodes(plain, g, BATCH) == 0, "uncompiled: every node once, in id order, with its declared shape");
    CHECK(check_flags(plain, g, 0) == 0, "uncompiled: param/printed/outfeed flags only");
    char line[1024];
    CHECK(line_of(plain, "fc1/MatMul:0", line, sizeof line) &&
              strstr(line, "= MatMul(%Flatten:0, %fc1.weight, transpose_b=true) : f32[16,320]"),
          "fc1/MatMul:0 line names its op and inputs: %s", line);
    CHECK(line_of(plain, "loss", line, sizeof line) && strstr(line, "= NllLoss(%LogSoftmax:0, %labels) : f32[]"),
          "loss line: %s", line);
    CHECK(strstr(plain, " @ ") == NULL, "no source locations unless asked");

    char *loc = ts_graph_dump(g, NULL, TS_DUMP_TEXT, 1);
    char want[512];
    snprintf(want, sizeof want, " @ %s:%d", __FILE__, n.fc1_line);
    CHECK(loc && line_of(loc, "fc1/Add:0", line, sizeof line) && strstr(line, want),
          "locations=1: fc1/Add:0 line has '%s'", want);
    int all_loc = loc != NULL;
    for (size_t i = 0; loc && i < ts_graph_tensor_count(g); i++)
        all_loc &= line_of(loc, ts_tensor_name(ts_graph_tensor_at(g, i)), line, sizeof line) && strstr(line, " @ ") != NULL;
    CHECK(all_loc, "locations=1: every node has ' @ file:line'");
    setenv("TS_IR_DEBUG", "1", 1);
    char *env_loc = ts_graph_dump(g, NULL, TS_DUMP_TEXT, 0);
    unsetenv("TS_IR_DEBUG");
    CHECK(env_loc && loc && strcmp(env_loc, loc) == 0, "TS_IR_DEBUG=1 adds the same locations");
    ts_string_free(loc);
    ts_string_free(env_loc);

    /* compile with TS_SAVE_GRAPH_FILE (text by default) */
    char dir[] = "/tmp/ts_graph_dumpXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir %s", dir);
    char txt_path[256], dot_path[256];
    snprintf(txt_path, sizeof txt_path, "%s/graph.txt", dir);
    snprintf(dot_path, sizeof dot_path, "%s/graph.dot", dir);
    setenv("TS_SAVE_GRAPH_FILE", txt_path, 1);
    ts_options *o = make_options();
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, n.loss, o, ts_sgd(0.01f, 0.9f, 0.0f)), "training model");
    CHECK_OK(ts_model_compile(m), "compile");
    char *compiled = ts_graph_dump(g, m, TS_DUMP_TEXT, 0);
    CHECK(compiled && check_nodes(compiled, g, BATCH) == 0, "compiled: every node with its shape");
    CHECK(compiled && check_flags(compiled, g, 1) == 0,
          "compiled: grad, anchored(grad) on fc2.bias, anchored on fc1.weight and loss, watched on fc1*, watched(grad) on fc3.weight");
    test_backward(&n, m);
    char *saved = read_file(txt_path);
    const char *body = saved ? strchr(saved, '\n') : NULL;
    CHECK(saved && compiled && strncmp(saved, "# ---- compile ", 15) == 0 && strstr(saved, ": training model, inputs x f32[16,1,28,28], labels i32[16]\n") && body &&
              strcmp(body + 1, compiled) == 0,
          "TS_SAVE_GRAPH_FILE: %s holds a '# ---- compile N: training model, inputs x f32[16,1,28,28], labels i32[16]' line and the text dump",
          txt_path);
    free(saved);
    /* a second compile (an inference model of the same graph) appends: the
     * training graph is not overwritten by the evaluation graph */
    ts_model *evm = NULL;
    CHECK_OK(ts_model_inference(&evm, g, &n.loss, 1, NULL), "inference model");
    CHECK_OK(ts_model_compile(evm), "compile it");
    char *inf_dump = ts_graph_dump(g, evm, TS_DUMP_TEXT, 0);
    saved = read_file(txt_path);
    const char *second = saved ? strstr(saved, "# ---- compile ") : NULL;
    second = second ? strstr(second + 1, "# ---- compile ") : NULL;
    CHECK(saved && compiled && inf_dump && strncmp(strchr(saved, '\n') + 1, compiled, strlen(compiled)) == 0 && second &&
              strstr(second, ": inference model, inputs x f32[16,1,28,28], labels i32[16]\n") && strcmp(strchr(second, '\n') + 1, inf_dump) == 0,
          "a second compile appends its graph after the first (%zu bytes in all)", saved ? strlen(saved) : (size_t)0);
    free(saved);
    /* TS_SAVE_GRAPH_BACKWARD=1: training dumps with their backward pass, the
     * inference model's without (it has none) */
    unlink(txt_path);
    setenv("TS_SAVE_GRAPH_BACKWARD", "1", 1);
    CHECK_OK(ts_model_compile(m), "recompile the training model with TS_SAVE_GRAPH_BACKWARD=1");
    CHECK_OK(ts_model_compile(evm), "recompile the inference model");
    unsetenv("TS_SAVE_GRAPH_BACKWARD");
    char *with_bwd = ts_graph_dump(g, m, TS_DUMP_TEXT, TS_DUMP_BACKWARD);
    saved = read_file(txt_path);
    second = saved ? strstr(saved + 1, "# ---- compile ") : NULL;
    CHECK(saved && with_bwd && second && strncmp(strchr(saved, '\n') + 1, with_bwd, strlen(with_bwd)) == 0 &&
              second == strchr(saved, '\n') + 1 + strlen(with_bwd) && strstr(second, ": inference model") &&
              strcmp(strchr(second, '\n') + 1, inf_dump) == 0,
          "TS_SAVE_GRAPH_BACKWARD=1: the training block holds the backward pass, the inference block after it does not");
    free(saved);
    ts_string_free(with_bwd);
    /* the backward pass of a model that has none is an error, as are unknown flags */
    CHECK(!ts_graph_dump(g, evm, TS_DUMP_TEXT, TS_DUMP_BACKWARD) && strstr(ts_last_error(), "inference model runs no backward"),
          "TS_DUMP_BACKWARD of an inference model: NULL (%s)", ts_last_error());
    CHECK(!ts_graph_dump(g, NULL, TS_DUMP_DOT, TS_DUMP_BACKWARD) && strstr(ts_last_error(), "needs a compiled training model"),
          "TS_DUMP_BACKWARD without a model: NULL (%s)", ts_last_error());
    CHECK(!ts_graph_dump(g, m, TS_DUMP_TEXT, 4) && strstr(ts_last_error(), "unknown flags"), "flags 4: NULL (%s)", ts_last_error());
    ts_string_free(inf_dump);
    ts_model_free(evm);
    ts_string_free(compiled);

    setenv("TS_SAVE_GRAPH_FILE", dot_path, 1);
    setenv("TS_SAVE_GRAPH_FMT", "dot", 1);
    CHECK_OK(ts_model_compile(m), "recompile with TS_SAVE_GRAPH_FMT=dot");
    char *dot = ts_graph_dump(g, m, TS_DUMP_DOT, 0);
    saved = read_file(dot_path);
    body = saved ? strchr(saved, '\n') : NULL;
    CHECK(saved && dot && strncmp(saved, "// ---- compile ", 16) == 0 && body && strcmp(body + 1, dot) == 0 &&
              strncmp(body + 1, "digraph tensorscope {\n", 22) == 0,
          "TS_SAVE_GRAPH_FILE: %s holds a '// ---- compile' comment and the DOT dump", dot_path);
    CHECK(dot && strstr(dot, "label=\"fc2.bias\\nParam\\nf32[100]\\nparam grad anchored(grad)\"") &&
              strstr(dot, "shape=box") && strstr(dot, "shape=ellipse"),
          "DOT: fc2.bias labelled with op, shape and flags; params boxes, inputs ellipses");
    int edges = 0;
    for (const char *p = dot; p && (p = strstr(p, " -> ")); p++) edges++;
    /* inputs of Flatten, Relu x2, Print, LogSoftmax: 1 each; MatMul, Add x3 and NllLoss: 2 each */
    int want_edges = 5 * 1 + 7 * 2;
    CHECK(edges == want_edges, "DOT: %d edges (want %d, one per input of every node)", edges, want_edges);
    free(saved);
    ts_string_free(dot);
    unsetenv("TS_SAVE_GRAPH_FMT");

    /* a bad path: the compile reports it (TS_ERR_IO naming the variable) */
    setenv("TS_SAVE_GRAPH_FILE", "/nonexistent-dir/graph.txt", 1);
    ts_status st = ts_model_compile(m);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "TS_SAVE_GRAPH_FILE") && strstr(ts_last_error(), "/nonexistent-dir"),
          "TS_SAVE_GRAPH_FILE that cannot be written fails the compile: %s", ts_last_error());
    /* a device is written through, never replaced */
    setenv("TS_SAVE_GRAPH_FILE", "/dev/null", 1);
    CHECK_OK(ts_model_compile(m), "TS_SAVE_GRAPH_FILE=/dev/null");
    struct stat sb;
    CHECK(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode), "/dev/null is still a character device");
    unsetenv("TS_SAVE_GRAPH_FILE");

    /* compiled shapes: run with micro-batch 8 (recompiles), dump shows 8 */
    CHECK_OK(run_once(m, 8), "run with micro-batch 8 instead of the declared 16");
    char *small = ts_graph_dump(g, m, TS_DUMP_TEXT, 0);
    CHECK(small && check_nodes(small, g, 8) == 0, "after the run: compiled shapes have batch 8");
    CHECK(small && line_of(small, "fc1/MatMul:0", line, sizeof line) && strstr(line, ": f32[8,320]"),
          "fc1/MatMul:0 is f32[8,320] in the compiled dump: %s", line);
    ts_string_free(small);
    plain = (ts_string_free(plain), ts_graph_dump(g, NULL, TS_DUMP_TEXT, 0));
    CHECK(plain && line_of(plain, "fc1/MatMul:0", line, sizeof line) && strstr(line, ": f32[16,320]"),
          "without the model the declared f32[16,320] is shown");
    ts_string_free(plain);

    /* an inference model of the same graph: the loss is not computed */
    ts_model *inf = NULL;
    ts_tensor *logp = ts_graph_find(g, "LogSoftmax:0");
    CHECK_OK(ts_model_inference(&inf, g, &logp, 1, NULL), "inference model of LogSoftmax:0");
    CHECK_OK(ts_model_compile(inf), "compile the inference model");
    char *idump = ts_graph_dump(g, inf, TS_DUMP_TEXT, 0);
    CHECK(idump && line_of(idump, "loss", line, sizeof line) && strstr(line, ": f32[] [unused]") && !strstr(line, "[grad]"),
          "inference: the loss is [unused] with its declared shape: %s", line);
    CHECK(idump && line_of(idump, "LogSoftmax:0", line, sizeof line) && strstr(line, ": f32[16,10] [anchored]") &&
              !strstr(line, "[grad]"),
          "inference: the output is anchored, no gradients: %s", line);
    ts_string_free(idump);
    ts_model_free(inf);

    check_alloc_failures(g, m, TS_DUMP_TEXT, TS_DUMP_LOCATIONS);
    check_alloc_failures(g, m, TS_DUMP_DOT, TS_DUMP_LOCATIONS);
    check_alloc_failures(g, m, TS_DUMP_TEXT, TS_DUMP_LOCATIONS | TS_DUMP_BACKWARD);
    check_alloc_failures(g, m, TS_DUMP_DOT, TS_DUMP_LOCATIONS | TS_DUMP_BACKWARD);

    /* bad arguments */
    CHECK(ts_graph_dump(NULL, NULL, TS_DUMP_TEXT, 0) == NULL, "NULL graph: NULL (%s)", ts_last_error());
    CHECK(ts_graph_dump(g, NULL, (ts_dump_format)7, 0) == NULL, "unknown format: NULL (%s)", ts_last_error());
    ts_graph *other = ts_graph_new(1);
    CHECK(ts_graph_dump(other, m, TS_DUMP_TEXT, 0) == NULL, "model of another graph: NULL (%s)", ts_last_error());
    ts_graph_free(other);

    ts_model_free(m);
    ts_options_free(o);
    destroy(&n);
    unlink(txt_path);
    unlink(dot_path);
    rmdir(dir);
    ts_set_log_callback(NULL, NULL);
    return check_summary("test_graph_dump");
}
