/* test_features.c -- the optional features (ts_has_feature): the library
 * says what configure built (TS_FEATURES, from CMake), and every call of a
 * feature the build lacks fails with TS_ERR_UNSUPPORTED naming the package
 * to install, leaving its outputs empty, without writing a file. In a full
 * build the refusals are not reachable and only the agreement is checked;
 * the minimal core (every TS_WITH_* off, .ci/run's build-core/) checks all. */
#include "check.h"
#include "core/core.h"
#include "import/onnx_consts.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[] = {"plots", "onnx", "tensorboard", "npz", "debug-bundle", "unwind", "mpi", "cuda"};

/* A refusal of feature `name`: TS_ERR_UNSUPPORTED whose message says what
 * to install and to rebuild. */
static int refused(ts_status st, const char *install) {
    const char *m = ts_last_error();
    return st == TS_ERR_UNSUPPORTED && strstr(m, install) && strstr(m, "then rebuild tensorscope");
}

static void plots(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/h.png", dir);
    float v[4] = {1, 2, 3, 4};
    ts_array a = {.dtype = TS_F32, .ndim = 1, .shape = {4}, .data = v};
    ts_status st = ts_plot_gradient_histogram(path, &a, 1);
    CHECK(refused(st, "apt-get install libcairo2-dev") && strstr(ts_last_error(), "plots need cairo"),
          "ts_plot_gradient_histogram: %s", ts_last_error());
    CHECK(access(path, F_OK) != 0, "... and no file is written");
    double x[2] = {0, 1};
    ts_series s = {"loss", x, x, 2};
    CHECK(refused(ts_plot_lines(path, "t", "x", &s, 1), "libcairo2-dev"), "ts_plot_lines refused");
    CHECK(refused(ts_plot_tiles(path, "t", &a), "libcairo2-dev"), "ts_plot_tiles refused");
    unsigned char *png = (unsigned char *)v;
    size_t n = 7;
    int w = 0, h = 0;
    float p[4] = {1, 0, 0.5f, 0.5f};
    CHECK(refused(ts_plot_attention_png(&png, &n, &w, &h, "a", p, 1, 2, NULL), "libcairo2-dev") && png == NULL && n == 0,
          "ts_plot_attention_png refused, *png NULL and *n 0");
    png = (unsigned char *)v;
    n = 7;
    CHECK(refused(ts_plot_tiles_png(&png, &n, &w, &h, "t", &a), "libcairo2-dev") && png == NULL && n == 0,
          "ts_plot_tiles_png refused, *png NULL and *n 0");
    ts_buffer_free(NULL); /* still there for buffers of other calls */
}

static void tensorboard(const char *dir) {
    char logdir[512];
    snprintf(logdir, sizeof logdir, "%s/tb", dir);
    ts_tb_writer *w = (ts_tb_writer *)dir;
    ts_status st = ts_tb_open(&w, logdir);
    CHECK(refused(st, "apt-get install libprotobuf-c-dev protobuf-c-compiler") && strstr(ts_last_error(), "TensorBoard") &&
              w == NULL,
          "ts_tb_open: %s; the writer is NULL", ts_last_error());
    CHECK(access(logdir, F_OK) != 0, "... and the log directory is not made");
    CHECK(refused(ts_tb_scalar(NULL, "loss", 1, 0.5), "protobuf-c-compiler"), "ts_tb_scalar refused");
    const char *const re[] = {"^loss/"};
    const ts_tb_chart chart = {"loss", "loss", re, 1};
    CHECK(refused(ts_tb_layout(NULL, &chart, 1), "protobuf-c-compiler"), "ts_tb_layout refused");
    CHECK(ts_tb_close(NULL) == TS_OK && ts_tb_path(NULL) == NULL, "closing no writer is fine, as with the real writer");
}

static void onnx(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    FILE *f = fopen(path, "wb");
    if (f) fclose(f);
    ts_graph *g = (ts_graph *)dir;
    ts_status st = ts_graph_from_onnx(&g, path, NULL, 0);
    CHECK(refused(st, "apt-get install libprotobuf-c-dev protobuf-c-compiler") && strstr(ts_last_error(), "ONNX import") &&
              g == NULL,
          "ts_graph_from_onnx: %s; the graph is NULL", ts_last_error());
    g = (ts_graph *)dir;
    CHECK(refused(ts_onnx_import_bytes(&g, (const uint8_t *)"x", 1, path, NULL, 0), "protobuf-c") && g == NULL,
          "ts_onnx_import_bytes refused");
    /* the rest of the graph API has nothing to do with ONNX */
    ts_graph *h = ts_graph_new(1);
    ts_tensor *x = ts_input(h, "x", TS_F32, 2, (int64_t[]){2, 3});
    CHECK(x && ts_tensor_alias(x) == NULL, "ts_tensor_alias of a built tensor: NULL");
    ts_graph_free(h);
}

static void npz(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/a.npz", dir);
    float v[2] = {1, 2};
    ts_array a = {.dtype = TS_F32, .ndim = 1, .shape = {2}, .data = v};
    const char *nm = "a";
    ts_status st = ts_npz_save(path, &nm, &a, 1);
    CHECK(refused(st, "apt-get install libarchive-dev") && strstr(ts_last_error(), ".npz files need libarchive"),
          "ts_npz_save: %s", ts_last_error());
    CHECK(access(path, F_OK) != 0, "... and no file is written");
    ts_npz *z = (ts_npz *)dir;
    CHECK(refused(ts_npz_load("tests/fixtures/none.npz", &z), "libarchive-dev") && z == NULL, "ts_npz_load refused, *out NULL");
    CHECK(ts_npz_count(NULL) == 0 && ts_npz_find(NULL, "a") == NULL && ts_npz_name(NULL, 0) == NULL &&
              ts_npz_array(NULL, 0) == NULL,
          "the accessors see no archive");
    ts_npz_free(NULL);
    FILE *f = fopen(path, "wb"); /* a user's .npz (its contents are never read) */
    if (f) fclose(f);
    ts_dataset *d = NULL;
    st = ts_dataset_load_arrays(&d, NULL, path);
    CHECK(st == TS_ERR_UNSUPPORTED && strstr(ts_last_error(), "libarchive-dev") && d == NULL,
          ".npz data says the same: %s", ts_last_error());
}

static void debug_bundle(const char *dir) {
    char out[512];
    snprintf(out, sizeof out, "%s/b.tar.gz", dir);
    char *argv[] = {"true", NULL};
    ts_debug_run_config c = {.outfile = out, .argv = argv};
    int child = -7;
    ts_status st = ts_debug_run(&c, &child);
    CHECK(refused(st, "apt-get install libarchive-dev") && strstr(ts_last_error(), "debug-run"), "ts_debug_run: %s",
          ts_last_error());
    CHECK(child == -7 && access(out, F_OK) != 0, "... before running anything, and no archive");
}

int main(void) {
    const char *configured = getenv("TS_FEATURES"); /* what CMake found, space-separated */
    CHECK(configured != NULL, "TS_FEATURES is set by ctest (%s)", configured ? configured : "unset");
    if (!configured) return check_summary("test_features");
    char list[512] = "";
    for (size_t i = 0; i < TS_ARRAY_LEN(names); i++) {
        char want[64];
        snprintf(want, sizeof want, " %s ", names[i]);
        char padded[512];
        snprintf(padded, sizeof padded, " %s ", configured);
        int built = strstr(padded, want) != NULL;
        CHECK(ts_has_feature(names[i]) == built, "%s: %s, as configure said", names[i], built ? "built" : "not built");
        ts_status st = ts_require_feature(names[i]);
        CHECK(built ? st == TS_OK : st == TS_ERR_UNSUPPORTED && strstr(ts_last_error(), names[i][0] == 'c' ? "CUDA" : "install"),
              "ts_require_feature(\"%s\"): %s%s%s", names[i], ts_status_name(st), st ? ": " : "", st ? ts_last_error() : "");
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s %s", i ? ", " : "", names[i], built ? "yes" : "no");
    }
    CHECK(strcmp(ts_features(), list) == 0, "ts_features(): '%s'", ts_features());
    CHECK(ts_has_feature("cairo") == 0 && ts_has_feature(NULL) == 0, "an unknown name (or NULL) is not a feature");
    ts_status st = ts_require_feature("cairo");
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'cairo'") && strstr(ts_last_error(), "plots, onnx"),
          "ts_require_feature of an unknown name lists the names: %s", ts_last_error());

    char dir[256];
    snprintf(dir, sizeof dir, "%s/ts_features.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    if (!ts_has_feature("plots")) plots(dir);
    if (!ts_has_feature("tensorboard")) tensorboard(dir);
    if (!ts_has_feature("onnx")) onnx(dir);
    if (!ts_has_feature("npz")) npz(dir);
    if (!ts_has_feature("debug-bundle")) debug_bundle(dir);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
    return check_summary("test_features");
}
