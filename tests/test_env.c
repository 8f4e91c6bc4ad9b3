/* test_env.c -- the library's environment variables are parsed strictly:
 * TS_OPBYOP=no/false/0/off leaves checks off (it used to turn them on),
 * 1/true/yes/on turns them on, nonsense is warned about and taken as off;
 * TS_LOG_LEVEL takes 0-5 or a level name, and a bad value is warned about
 * once and leaves the default (info). */
#include "check.h"
#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char last_warning[512];
static int warnings;
static void capture(void *user, int level, const char *msg) {
    (void)user;
    if (level == TS_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
    }
}

/* loss = mean(log(x * w)) with x = -1: NaN from the Log, which an op-by-op
 * check stops at and an unchecked run lets through. */
static ts_status run_with_opbyop(const char *value) {
    setenv("TS_OPBYOP", value, 1);
    ts_graph *g = ts_graph_new(1);
    int64_t s[] = {4};
    ts_tensor *x = ts_input(g, "x", TS_F32, 1, s);
    ts_tensor *w = ts_param(g, "w", 1, s);
    ts_tensor *loss = ts_mean(g, ts_log(g, ts_mul(g, x, w)));
    float one[4] = {1, 1, 1, 1}, xv[4] = {-1, -1, -1, -1};
    ts_array wa = ts_array_f32(one, 1, s), xa = ts_array_f32(xv, 1, s);
    ts_param_set(w, &wa);
    ts_model *m = NULL;
    const char *names[] = {"x"};
    ts_status st = ts_model_training(&m, g, loss, NULL, ts_sgd(0.1f, 0, 0));
    if (!st) st = ts_model_run(m, names, &xa, 1);
    ts_model_free(m);
    ts_graph_free(g);
    unsetenv("TS_OPBYOP");
    return st;
}

int main(void) {
    ts_set_log_callback(capture, NULL);
    setenv("TS_LOG_LEVEL", "loud", 1);
    CHECK(ts_get_log_level() == TS_LOG_INFO, "TS_LOG_LEVEL=loud: the default level info stays (got %d)", ts_get_log_level());
    CHECK(warnings == 1 && strstr(last_warning, "TS_LOG_LEVEL='loud'") && strstr(last_warning, "debug"),
          "TS_LOG_LEVEL=loud is warned about, naming the value and the accepted ones: %s", last_warning);
    unsetenv("TS_LOG_LEVEL");

    int l = -1;
    CHECK(ts_parse_log_level("DEBUG", &l) && l == TS_LOG_DEBUG, "level 'DEBUG' -> 4");
    CHECK(ts_parse_log_level("5", &l) && l == TS_LOG_TRACE, "level '5' -> 5");
    CHECK(ts_parse_log_level("warning", &l) && l == TS_LOG_WARN, "level 'warning' -> 2");
    CHECK(!ts_parse_log_level("6", &l) && !ts_parse_log_level("", &l) && !ts_parse_log_level("3x", &l), "6, '' and 3x are not levels");
    bool b = false;
    CHECK(ts_parse_bool("Yes", &b) && b && ts_parse_bool("OFF", &b) && !b && !ts_parse_bool("2", &b), "booleans: Yes, OFF; 2 is none");

    const char *off[] = {"0", "no", "false", "off"}, *on[] = {"1", "yes", "true", "on"};
    for (int i = 0; i < 4; i++) {
        warnings = 0;
        ts_status st = run_with_opbyop(off[i]);
        CHECK(st == TS_OK && warnings == 0, "TS_OPBYOP=%s: no op-by-op check, the NaN run goes through (%s)", off[i], ts_status_name(st));
        st = run_with_opbyop(on[i]);
        CHECK(st == TS_ERR_NUMERICS, "TS_OPBYOP=%s: every op checked, the Log's NaN stops the run (%s)", on[i], ts_status_name(st));
    }
    warnings = 0;
    ts_status st = run_with_opbyop("maybe");
    CHECK(st == TS_OK && warnings >= 1 && strstr(last_warning, "TS_OPBYOP='maybe'") && strstr(last_warning, "taken as off"),
          "TS_OPBYOP=maybe: warned about and taken as off: %s", last_warning);
    ts_set_log_callback(NULL, NULL);
    return check_summary("test_env");
}
