/* fuzz_env.c -- the TS_* environment variables the library reads, through
 * the calls that read them: TS_CHECK_NUMERICS and TS_OPBYOP when a model is
 * made, TS_SAVE_GRAPH_FILE (here /dev/null, written through) with
 * TS_SAVE_GRAPH_FMT and TS_IR_DEBUG at compile, TS_IR_DEBUG in graph dumps.
 * Any value gives a model or an error (or a logged warning), never a crash.
 * (TS_LOG_LEVEL is read once per process, so it is not fuzzed here.)
 *
 * Input: the values of those variables in that order, separated by NUL
 * bytes; a missing value leaves the variable unset. */
#include <stdlib.h>
#include <string.h>

#include "tensorscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void quiet(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

static ts_graph *g;
static ts_tensor *out;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const vars[] = {"TS_CHECK_NUMERICS", "TS_OPBYOP", "TS_SAVE_GRAPH_FMT", "TS_IR_DEBUG"};
    if (!g) {
        ts_set_log_callback(quiet, NULL);
        g = ts_graph_new(1);
        ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){2, 3});
        out = ts_log_softmax(g, ts_relu(g, ts_linear(g, x, 4, "fc")), 1);
        setenv("TS_SAVE_GRAPH_FILE", "/dev/null", 1);
    }
    if (size > 1024) return 0;
    char buf[1025];
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *p = buf;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if (p <= buf + size) {
            setenv(vars[i], p, 1);
            p += strlen(p) + 1;
        } else {
            unsetenv(vars[i]);
        }
    }
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_model *m = NULL;
    ts_status st = ts_model_inference(&m, g, &out, 1, o);
    if (st == TS_OK) st = ts_model_compile(m);
    if (st != TS_OK && !ts_last_error()[0]) __builtin_trap();
    char *dump = ts_graph_dump(g, m, TS_DUMP_TEXT, 0);
    ts_string_free(dump);
    ts_model_free(m);
    ts_options_free(o);
    return 0;
}
