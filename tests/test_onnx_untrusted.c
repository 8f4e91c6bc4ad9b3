/* test_onnx_untrusted.c -- the ONNX importer as a reader of untrusted files.
 * Every model here is written by the test (protobuf-c over the project's
 * ONNX schema subset) into a fresh folder, each one a hostile case:
 *
 * - external data: a symbolic link to a file outside the model's folder (or
 *   to /dev/zero, or a linked folder on the way) is refused and its bytes
 *   never appear; a FIFO is refused at once instead of blocking; a shape
 *   larger than the external file is refused before anything is allocated;
 *   bad offsets are refused; a file in a real subfolder still imports;
 * - folded constants have a total budget (TS_LIMIT_IMPORT_BYTES) naming the
 *   node that passes it, and each is freed after its last reader;
 * - counts and values read from the file that overflow or do not fit
 *   (a reshape target, dims whose product overflows, a Range, pads, int64
 *   values outside int32) are errors, never wrapped;
 * - int64 attributes out of the op's range (Conv strides and group,
 *   Softmax and Flatten axes) are errors naming node, attribute and value;
 * - pooling without `strides` uses ONNX's default stride 1;
 * - graphs nested 100,000 deep (an If's branch holding an If ...) are
 *   refused before the parser, whose recursion would overflow the stack.
 *
 * A SIGALRM bounds the program: an import that blocks (the FIFO) fails it. */
/* needs: onnx */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "onnx.pb-c.h"
#include "tensorscope.h"

#include "onnx_model.h"

/* x [2,4] -> MatMul(x, w [4,2]) -> y, w external (or given) */
static void matmul_model(void) {
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    node("MatMul", "mm", "x,w", "y");
}

/* -------------------------------------------------------- external data */

static void check_external(void) {
    printf("-- external data\n");
    char path[256], secret[128];
    /* a file outside the model's folder, in the folder above it */
    snprintf(secret, sizeof secret, "%s.secret", dir);
    FILE *f = fopen(secret, "wb");
    if (!f) abort();
    fputs("root:x:0:0:root:/root:/bin/bash\n", f); /* 32 bytes: 4 int64 */
    fclose(f);

    /* the finding: an int64 initializer from a linked file, used as a
     * Reshape target, put the file's bytes in the error message */
    snprintf(path, sizeof path, "%s/passwd.bin", dir);
    CHECK(symlink(secret, path) == 0, "a link passwd.bin -> a file outside the model's folder");
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    init_external("shape", 7, 1, (int64_t[]){4}, "passwd.bin", NULL);
    node("Reshape", "reshape", "x,shape", "y");
    ts_status st = import_as("link_reshape", NULL);
    expect("an int64 initializer through a link out of the folder", st, TS_ERR_FORMAT, "symbolic link 'passwd.bin'");
    bool leaked = strstr(ts_last_error(), "root") != NULL;
    for (int i = 0; i < 4; i++) { /* the bytes as the int64 values a Reshape target would print */
        int64_t v;
        char num[32];
        memcpy(&v, "root:x:0:0:root:/root:/bin/bash\n" + 8 * i, 8);
        snprintf(num, sizeof num, "%lld", (long long)v);
        leaked = leaked || strstr(ts_last_error(), num);
        snprintf(num, sizeof num, "%.0f", (double)v); /* as the importer holds it */
        leaked = leaked || strstr(ts_last_error(), num);
    }
    CHECK(!leaked, "the linked file's bytes appear nowhere in the message");

    /* a float weight from a link to /dev/zero with a large shape */
    snprintf(path, sizeof path, "%s/zero.bin", dir);
    CHECK(symlink("/dev/zero", path) == 0, "a link zero.bin -> /dev/zero");
    matmul_model();
    init_external("w", 1, 2, (int64_t[]){4, (int64_t)1 << 30}, "zero.bin", NULL);
    expect("a weight from a link to /dev/zero", import_as("zero", NULL), TS_ERR_FORMAT, "symbolic link 'zero.bin'");

    /* a folder on the way that is a link */
    snprintf(path, sizeof path, "%s/w.bin", dir);
    float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    write_file("w.bin", w, sizeof w);
    char up[128];
    snprintf(up, sizeof up, "%s/up", dir);
    CHECK(symlink("..", up) == 0, "a link up -> ..");
    matmul_model();
    init_external("w", 1, 2, (int64_t[]){4, 2}, "up/w.bin", NULL);
    expect("a location through a linked folder", import_as("uplink", NULL), TS_ERR_FORMAT, "symbolic link 'up'");

    /* a FIFO: refused at once (the alarm ends a blocked import) */
    snprintf(path, sizeof path, "%s/fifo.bin", dir);
    CHECK(mkfifo(path, 0600) == 0, "a FIFO fifo.bin");
    matmul_model();
    init_external("w", 1, 2, (int64_t[]){4, 2}, "fifo.bin", NULL);
    expect("a weight in a FIFO", import_as("fifo", NULL), TS_ERR_FORMAT, "not a regular file");
    /* the model file itself a FIFO: refused at once too */
    ts_graph *fg = NULL;
    ts_onnx_input fin = {"x", 2, {2, 4}, NULL};
    CHECK(ts_graph_from_onnx(&fg, path, &fin, 1) == TS_ERR_IO && strstr(ts_last_error(), "not a regular file (a FIFO)"),
          "a model that is a FIFO: %s", ts_last_error());
    matmul_model();
    init_external("w", 1, 2, (int64_t[]){4, 2}, "sub", NULL);
    snprintf(path, sizeof path, "%s/sub", dir);
    CHECK(mkdir(path, 0700) == 0, "a folder sub");
    expect("a weight in a folder", import_as("folder", NULL), TS_ERR_FORMAT, "not a regular file");
    matmul_model();
    init_external("w", 1, 2, (int64_t[]){4, 2}, "sub/../w.bin", NULL);
    expect("a location with '..'", import_as("dotdot", NULL), TS_ERR_FORMAT, "'..'");

    /* sizes: a shape larger than the file, offsets past it or malformed */
    matmul_model();
    init_external("w", 1, 2, (int64_t[]){4, (int64_t)1 << 30}, "w.bin", NULL);
    expect("a shape of 16 GiB over a 32-byte file", import_as("huge", NULL), TS_ERR_FORMAT, "shorter");
    const char *offsets[] = {"-8", "8x", "18446744073709551615", "18446744073709551616", "1"};
    const char *needles[] = {"not a non-negative number", "not a non-negative number", "shorter", "not a non-negative number", "shorter"};
    for (int i = 0; i < 5; i++) {
        matmul_model();
        init_external("w", 1, 2, (int64_t[]){4, 2}, "w.bin", offsets[i]);
        char what[64];
        snprintf(what, sizeof what, "offset %s", offsets[i]);
        expect(what, import_as("offset", NULL), TS_ERR_FORMAT, needles[i]);
    }

    /* what must still work: a file in a real subfolder, and beside the model */
    write_file("sub/w.bin", w, sizeof w);
    const char *good[] = {"sub/w.bin", "w.bin", "./sub//w.bin"};
    for (int i = 0; i < 3; i++) {
        matmul_model();
        init_external("w", 1, 2, (int64_t[]){4, 2}, good[i], NULL);
        ts_graph *g = NULL;
        ts_status got = import_as("good", &g);
        ts_array a;
        ts_tensor *p = g ? ts_graph_find(g, "w") : NULL;
        CHECK(got == TS_OK && p && ts_tensor_info(p, &a) == TS_OK && memcmp(a.data, w, sizeof w) == 0,
              "external data at '%s' imports with the file's values (%s)", good[i], got ? ts_last_error() : "ok");
        ts_graph_free(g);
    }
    unlink(secret);
}

/* ----------------------------------------------------- constant budget */

/* n ConstantOfShape [side, side] nodes, each read by a Shape; with `keep`
 * the shapes' sources stay alive to the end (one Concat reads them all). */
static void constants_model(int n, int64_t side, bool keep) {
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    node("Relu", "relu", "x", "y");
    init_i64("dims", 2, (int64_t[]){side, side});
    char cat[512] = "";
    for (int i = 0; i < n; i++) {
        char nm[32], out[32];
        snprintf(nm, sizeof nm, "cos%d", i);
        snprintf(out, sizeof out, "c%d", i);
        node("ConstantOfShape", nm, "dims", out);
        snprintf(nm, sizeof nm, "shape%d", i);
        char sh[32];
        snprintf(sh, sizeof sh, "s%d", i);
        node("Shape", nm, out, sh);
        snprintf(cat + strlen(cat), sizeof cat - strlen(cat), "%s%s", i ? "," : "", out);
    }
    if (keep) attr_int(node("Concat", "concat_all", cat, "all"), "axis", 0);
}

/* y = x + Cast(ConstantOfShape([256, 256])): a folded constant of 512 KiB
 * alive while its cast copy is made. */
static void folded_cast_model(void) {
    model_begin();
    input("x", 2, (int64_t[]){256, 256});
    output("y");
    init_i64("dims", 2, (int64_t[]){256, 256});
    node("ConstantOfShape", "cos", "dims", "c");
    attr_int(node("Cast", "cast", "c", "f"), "to", 1);
    node("Add", "add", "x,f", "y");
}

static void check_budget(void) {
    printf("-- folded constants' budget\n");
    uint64_t saved = ts_get_limit(TS_LIMIT_IMPORT_BYTES);
    CHECK_OK(ts_set_limit(TS_LIMIT_IMPORT_BYTES, 600 << 10), "an import limit of 600 KiB");
    /* 8 x [128,128] doubles = 8 x 128 KiB alive at once */
    constants_model(8, 128, true);
    expect("8 constants of 128 KiB all alive to the end", import_as("budget_kept", NULL), TS_ERR_FORMAT, "TS_MAX_IMPORT_BYTES");
    CHECK(strstr(ts_last_error(), "'cos4'") != NULL, "the refusal names the node that passed the limit (cos4): %s", ts_last_error());
    constants_model(8, 128, false);
    expect("8 constants of 128 KiB each read once", import_as("budget_freed", NULL), TS_OK, NULL);
    /* constants nothing reads are not computed: 8 x [8192,8192] (512 MiB
     * each as doubles; 4.2 GB and 20 s before) import within 600 KiB */
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    node("Relu", "relu", "x", "y");
    init_i64("dims", 2, (int64_t[]){8192, 8192});
    for (int i = 0; i < 8; i++) {
        char nm[32], out[32];
        snprintf(nm, sizeof nm, "cos%d", i);
        snprintf(out, sizeof out, "c%d", i);
        node("ConstantOfShape", nm, "dims", out);
    }
    expect("8 constants of [8192,8192] nobody reads: skipped, not computed", import_as("budget_unread", NULL), TS_OK, NULL);
    /* a graph constant made of a folded one counts too */
    folded_cast_model();
    expect("a folded constant of 512 KiB alive while another is made", import_as("budget_graph", NULL), TS_ERR_FORMAT, "'cast'");
    CHECK_OK(ts_set_limit(TS_LIMIT_IMPORT_BYTES, saved), "the limit restored");
    folded_cast_model();
    expect("the same under the default limit", import_as("budget_graph", NULL), TS_OK, NULL);
}

/* ------------------------------------------------- counts and values */

static void check_values(void) {
    printf("-- counts and values from the file\n");
    /* a reshape target whose element count overflows int64 */
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    init_i64("shape", 3, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40, 8});
    node("Reshape", "reshape", "x,shape", "y");
    expect("a reshape target of 2^40 x 2^40 x 8", import_as("reshape_overflow", NULL), TS_ERR_FORMAT, "'reshape'");
    /* the same as float values beyond int64 (a Cast of a float constant) */
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    init_f32("fshape", 1, (int64_t[]){2}, (const float[]){1e30f, -1});
    attr_int(node("Cast", "cast", "fshape", "shape"), "to", 7);
    node("Reshape", "reshape", "x,shape", "y");
    ts_status st = import_as("reshape_float", NULL);
    CHECK(st != TS_OK && strstr(ts_last_error(), "1e+30"), "a reshape target of 1e30 is refused, never cast: %s", ts_last_error());

    /* dims whose product overflows int64 (2^31 x 2^32 x 2 = 2^64) */
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    node("Relu", "relu", "x", "y");
    Tensor *t = tensor("big", 1, 3, (int64_t[]){(int64_t)1 << 31, (int64_t)1 << 32, 2});
    push((void ***)&graph->initializer, &graph->n_initializer, t);
    expect("an initializer of dims [2^31, 2^32, 2]", import_as("dims_overflow", NULL), TS_ERR_FORMAT, "2^34 elements");

    /* Range of 1e30 elements */
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    node("Relu", "relu", "x", "y");
    init_f32("start", 0, NULL, (const float[]){0});
    init_f32("limit", 0, NULL, (const float[]){1e30f});
    init_f32("delta", 0, NULL, (const float[]){1});
    node("Range", "range", "start,limit,delta", "r");
    expect("a Range of 1e30 elements", import_as("range", NULL), TS_ERR_UNSUPPORTED, "too large to fold");

    /* an int64 constant outside int32 as a Gather's indices: refused at
     * import, its exact value named (not wrapped onto row 1) */
    model_begin();
    input("x", 2, (int64_t[]){3, 4});
    output("e");
    init_f32("table", 2, (int64_t[]){3, 4}, (const float[12]){0});
    init_i64("ids", 2, (int64_t[]){1, ((int64_t)1 << 32) + 1});
    node("Relu", "relu", "x", "y");
    node("Add", "add", "y,table", "z");
    node("Gather", "embed", "z,ids", "e");
    st = import_as("ids", NULL);
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "'ids'[1] = 4294967297 are out of range"),
          "embedding ids of 2^32 + 1 are refused at import, naming the id and its exact value: %s", ts_last_error());

    /* a Conv whose pads make an output beyond any tensor */
    model_begin();
    input("x", 4, (int64_t[]){1, 1, 4, 4});
    output("y");
    init_f32("w", 4, (int64_t[]){1, 1, 1, 1}, (const float[]){1});
    attr_ints(node("Conv", "conv", "x,w", "y"), "pads", 4, (int64_t[]){2147483647, 2147483647, 2147483647, 2147483647});
    expect("a Conv with pads of 2^31-1", import_as("conv_pads", NULL), TS_ERR_SHAPE, "more than 2^34 elements");
}

/* a graph input whose dynamic dimensions have long names: the message
 * that asks for the sizes is cut, never written past its buffer */
static void check_dim_names(void) {
    printf("-- names of dynamic dimensions\n");
    model_begin();
    input("x", 3, (int64_t[]){-300, -300, -300});
    output("y");
    node("Relu", "relu", "x", "y");
    expect("three dynamic dimensions named with 300 characters each", import_as("dim_names", NULL), TS_ERR_INVALID_ARGUMENT,
           "has the dynamic shape bbbb");
}

/* ------------------------------------------------------------ attributes */

static void conv_model(const char *attr_name, int64_t v, bool list) {
    model_begin();
    input("x", 4, (int64_t[]){1, 2, 4, 4});
    output("y");
    init_f32("w", 4, (int64_t[]){2, 2, 1, 1}, (const float[4]){1, 0, 0, 1});
    Node *n = node("Conv", "conv", "x,w", "y");
    if (list) attr_ints(n, attr_name, 2, (int64_t[]){v, v});
    else attr_int(n, attr_name, v);
}

static void check_attributes(void) {
    printf("-- int64 attributes\n");
    conv_model("strides", (int64_t)1 << 32, true);
    expect("Conv strides of 2^32", import_as("conv_strides", NULL), TS_ERR_FORMAT, "'conv' (Conv, opset 17): attribute 'strides' value 0 is 4294967296");
    conv_model("group", (int64_t)1 << 32, false);
    expect("Conv group of 2^32", import_as("conv_group", NULL), TS_ERR_FORMAT, "attribute 'group' is 4294967296");
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    attr_int(node("Softmax", "softmax", "x", "y"), "axis", (int64_t)1 << 40);
    expect("Softmax axis 2^40", import_as("softmax_axis", NULL), TS_ERR_FORMAT, "'softmax' (Softmax, opset 17): attribute 'axis' is 1099511627776");
    model_begin();
    input("x", 3, (int64_t[]){2, 3, 4});
    output("y");
    attr_int(node("Flatten", "flatten", "x", "y"), "axis", -((int64_t)1 << 40));
    expect("Flatten axis -2^40", import_as("flatten_axis", NULL), TS_ERR_FORMAT, "attribute 'axis' is -1099511627776; Flatten takes -3 to 3");
    conv_model("group", 1, false);
    expect("Conv group 1 still imports", import_as("conv_ok", NULL), TS_OK, NULL);
}

/* ---------------------------------------------------------------- pooling */

static void check_pool(void) {
    printf("-- pooling defaults\n");
    const char *ops[2] = {"MaxPool", "AveragePool"};
    for (int k = 0; k < 2; k++) {
        model_begin();
        input("x", 4, (int64_t[]){1, 1, 4, 4});
        output("y");
        attr_ints(node(ops[k], "pool", "x", "y"), "kernel_shape", 2, (int64_t[]){2, 2});
        ts_graph *g = NULL;
        ts_status st = import_as("pool", &g);
        ts_array a = {0};
        CHECK(st == TS_OK && ts_tensor_info(ts_graph_output_at(g, 0), &a) == TS_OK && a.ndim == 4 && a.shape[2] == 3 && a.shape[3] == 3,
              "%s with a 2x2 kernel and no strides on 4x4 gives 3x3 (ONNX's stride 1), got %lldx%lld", ops[k],
              (long long)(a.ndim == 4 ? a.shape[2] : -1), (long long)(a.ndim == 4 ? a.shape[3] : -1));
        ts_graph_free(g);
    }
}

/* -------------------------------------------------------------- nesting */

/* Prepends field `field`'s tag (length-delimited) and the length of what
 * follows, buf[*at..end), to it. */
static void wrap(uint8_t *buf, size_t *at, size_t end, int field) {
    uint8_t head[11];
    size_t n = 0, len = end - *at;
    head[n++] = (uint8_t)(field << 3 | 2);
    do {
        head[n++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
        len >>= 7;
    } while (len);
    *at -= n;
    memcpy(buf + *at, head, n);
}

static void check_nesting(void) {
    printf("-- graphs nested deeply\n");
    enum { LEVELS = 100000 };
    size_t cap = (size_t)LEVELS * 3 * 8 + 64, end = cap, at = end;
    uint8_t *buf = malloc(cap);
    CHECK(buf != NULL, "a buffer for the model");
    if (!buf) return;
    for (int i = 0; i < LEVELS; i++) { /* Graph.node { Node.attribute { Attribute.g { ... } } } */
        wrap(buf, &at, end, 6);
        wrap(buf, &at, end, 5);
        wrap(buf, &at, end, 1);
    }
    wrap(buf, &at, end, 7); /* ModelProto.graph */
    char path[600];
    snprintf(path, sizeof path, "%s/nested.onnx", dir);
    FILE *f = fopen(path, "wb");
    bool written = f && fwrite(buf + at, 1, end - at, f) == end - at;
    if (f) fclose(f);
    free(buf);
    CHECK(written, "wrote %s", path);
    ts_graph *g = NULL;
    ts_status st = ts_graph_from_onnx(&g, path, NULL, 0);
    CHECK(st == TS_ERR_UNSUPPORTED && strstr(ts_last_error(), "more than 8 deep"),
          "100,000 nested graphs are refused naming the limit: %s", ts_last_error());
    ts_graph_free(g);
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    alarm(60); /* an import that blocks fails the test */
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_untrusted_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    check_external();
    check_budget();
    check_values();
    check_dim_names();
    check_attributes();
    check_pool();
    check_nesting();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return check_summary("test_onnx_untrusted");
}
