/* test_escape.c -- names from a model reach messages escaped: a tensor
 * name holding terminal control sequences (ESC, BEL, the C1 controls in
 * UTF-8 or as a bare byte, DEL, bytes that are not UTF-8) shows up in
 * ts_last_error() and in the log callback as visible escapes (`\x1b`,
 * `\u009b`), never raw, whichever error or log line quotes it: a name
 * given twice, an input of the wrong shape, an anchor of an unknown name
 * with its closest names, the print op's line. Valid UTF-8 (μ) stays as it
 * is. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

/* What a terminal would act on: C0 controls other than \n and \t, DEL,
 * and the byte 0x9b (the 8-bit CSI, alone or as the tail of U+009B). */
static int raw_control(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f || *p == 0x9b) return 1;
    return 0;
}

static char logged[16][1024];
static int n_logged;
static void capture(void *user, int level, const char *msg) {
    (void)user, (void)level;
    if (n_logged < 16) snprintf(logged[n_logged++], sizeof logged[0], "%s", msg);
}

/* The last error is `want` status, has no raw control and holds `escaped`. */
static void expect(ts_status st, ts_status want, const char *what, const char *escaped) {
    const char *msg = ts_last_error();
    CHECK(st == want && !raw_control(msg) && strstr(msg, escaped), "%s: %s, no raw control, shows '%s'", what, ts_status_name(st), escaped);
    if (raw_control(msg) || !strstr(msg, escaped)) {
        printf("     message: ");
        for (const unsigned char *p = (const unsigned char *)msg; *p; p++) printf(*p < 0x20 || *p >= 0x7f ? "<%02x>" : "%c", *p);
        printf("\n");
    }
}

int main(void) {
    /* names the graph accepts but a terminal acts on: the C1 CSI (U+009B),
     * the bare 8-bit CSI byte, DEL; and a μ that must stay */
    const char *c1 = "a\xce\xbc\xc2\x9b" "2J\x9b" "2J\x7f";
    const char *c1_escaped = "a\xce\xbc\\u009b2J\\x9b2J\\x7f";
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, c1, TS_F32, 2, (int64_t[]){2, 3});
    CHECK(x != NULL, "an input named with C1 controls and DEL is accepted by the graph");
    CHECK(ts_input(g, c1, TS_F32, 2, (int64_t[]){2, 3}) == NULL, "the same name twice is refused");
    expect(ts_graph_status(g), TS_ERR_INVALID_ARGUMENT, "the duplicate name's error", c1_escaped);
    ts_graph_free(g);

    g = ts_graph_new(1);
    x = ts_input(g, c1, TS_F32, 2, (int64_t[]){2, 3});
    ts_tensor *w = ts_param(g, "w", 2, (int64_t[]){2, 3});
    ts_tensor *loss = ts_mean(g, ts_print(g, ts_add(g, x, w), "p\x1b]0;pwned\x07"));
    CHECK(loss != NULL, "a graph printing under a title with an OSC sequence");
    /* the classic: retitle the window, clear the screen */
    ts_options *o = ts_options_new();
    ts_options_anchor(o, NULL, "\x1b]0;pwned\x07x\x1b[2J", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0, 0));
    if (!st) st = ts_model_compile(m);
    expect(st, TS_ERR_NOT_FOUND, "an anchor of an unknown name: the error lists the closest names", c1_escaped);
    CHECK(strstr(ts_last_error(), "\\x1b]0;pwned\\x07x\\x1b[2J") != NULL, "the unknown name itself is escaped");
    ts_model_free(m);
    ts_options_free(o);

    /* an input of the wrong shape */
    o = ts_options_new();
    st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0, 0));
    float xs[6] = {1, 2, 3, 4, 5, 6};
    ts_array in = ts_array_f32(xs, 2, (int64_t[]){3, 2});
    if (!st) st = ts_model_run(m, (const char *[]){c1}, &in, 1);
    expect(st, TS_ERR_SHAPE, "an input of the wrong shape", c1_escaped);
    ts_model_free(m);
    ts_options_free(o);

    /* the print op's line through the log callback */
    ts_set_log_callback(capture, NULL);
    o = ts_options_new();
    st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0, 0));
    in = ts_array_f32(xs, 2, (int64_t[]){2, 3});
    if (!st) st = ts_model_run(m, (const char *[]){c1}, &in, 1);
    CHECK_OK(st, "a run of that model");
    int seen = 0, raw = 0;
    for (int i = 0; i < n_logged; i++) {
        raw |= raw_control(logged[i]);
        seen |= strstr(logged[i], "p\\x1b]0;pwned\\x07: f32[2,3]") != NULL;
    }
    CHECK(n_logged > 0 && seen && !raw, "the print line reaches the log callback escaped (%d lines, escaped title seen: %d, raw control: %d)", n_logged, seen, raw);
    ts_set_log_callback(NULL, NULL);

    /* the one-line summary and the stats table row the CLI prints */
    ts_stats stats = {.count = 6, .mean = 3.5, .std = 1.7, .min = 1, .max = 6};
    char line[512];
    ts_summary_line(c1, NULL, &stats, line, sizeof line);
    CHECK(!raw_control(line) && strstr(line, c1_escaped) && strstr(line, "\xce\xbc=3.5"), "the summary line shows the name escaped, its \xce\xbc intact: %s", line);
    ts_stats_table_row(0, c1, &stats, line, sizeof line);
    CHECK(!raw_control(line) && strstr(line, c1_escaped), "the stats table row shows the name escaped: %s", line);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return check_summary("test_escape");
}
