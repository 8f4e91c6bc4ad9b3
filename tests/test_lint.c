/* test_lint.c -- the model lint (docs/observation.md#comparing-against-a-reference): the seed tutorial's
 * LogSoftmax(dim=0) is flagged, as are NLL loss on values that are not
 * log-probabilities, a parameter with no path to the loss and a print op
 * whose result is unused; the tutorial's corrected model has no warning. */
#include <string.h>

#include "check.h"

enum { B = 16, IN = 20 };

typedef struct variant {
    int softmax_dim;    /* 1 = right, 0 = over the batch */
    int use_log_softmax; /* 0: NLL on the raw scores */
    int dead_param;     /* a parameter that feeds nothing */
    int unused_print;   /* a print op whose result nobody reads (2: one made beside its tensor) */
} variant;

/* Returns the lint warnings (joined) of the variant's training model. */
static size_t lint_of(variant v, char *joined, size_t cap) {
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, 32, "fc1"));
    if (v.unused_print == 1) ts_print(g, h, "hidden");
    if (v.unused_print == 2) ts_print_beside(g, h, "hidden");
    h = ts_linear(g, h, 10, "fc2");
    if (v.use_log_softmax) h = ts_log_softmax(g, h, v.softmax_dim);
    if (v.dead_param) ts_param(g, "orphan.weight", 1, (int64_t[]){4});
    ts_tensor *loss = ts_nll_loss(g, h, y);
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    const char *const *w = NULL;
    size_t n = 0;
    joined[0] = '\0';
    if (ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0, 0)) == TS_OK) {
        CHECK(ts_model_lint(m, &w, &n) == TS_ERR_STATE, "lint before compile is a state error");
        CHECK_OK(ts_model_compile(m), "compile");
        CHECK_OK(ts_model_lint(m, &w, &n), "lint");
        for (size_t i = 0; i < n; i++) {
            strncat(joined, w[i], cap - strlen(joined) - 2);
            strncat(joined, "\n", cap - strlen(joined) - 1);
        }
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return n;
}

int main(void) {
    ts_set_log_level(TS_LOG_ERROR); /* the warnings are checked, not shown */
    static char w[8192];
    size_t n = lint_of((variant){1, 1, 0, 0}, w, sizeof w);
    CHECK(n == 0, "the corrected tutorial model has no warning (%zu: %s)", n, w);

    n = lint_of((variant){0, 1, 0, 0}, w, sizeof w);
    CHECK(n == 1 && strstr(w, "LogSoftmax:0") && strstr(w, "batch dimension") && strstr(w, "use dim 1"),
          "the seed tutorial's LogSoftmax(dim=0) is flagged: %s", w);
    CHECK(strstr(w, "test_lint.c:") != NULL, "... with the line that built it");

    n = lint_of((variant){1, 0, 0, 0}, w, sizeof w);
    CHECK(n == 1 && strstr(w, "not a LogSoftmax") && strstr(w, "fc2/Add:0"), "NLL loss on raw scores is flagged: %s", w);

    n = lint_of((variant){1, 1, 1, 0}, w, sizeof w);
    CHECK(n == 1 && strstr(w, "orphan.weight") && strstr(w, "never trained"), "a parameter with no path to the loss: %s", w);

    n = lint_of((variant){1, 1, 0, 1}, w, sizeof w);
    CHECK(n == 1 && strstr(w, "print op") && strstr(w, "not used"), "an unused print op is noted: %s", w);
    n = lint_of((variant){1, 1, 0, 2}, w, sizeof w);
    CHECK(n == 0, "a print op made beside its tensor (ts_print_beside, the CLI's --print-tensor) is meant to be unread (%zu: %s)", n, w);

    n = lint_of((variant){0, 0, 1, 1}, w, sizeof w);
    CHECK(n == 3, "three mistakes at once give three warnings (%zu)", n);
    /* dropout in an inference model; batch norm trained on one value per channel */
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){1, IN});
    ts_tensor *h = ts_dropout(g, ts_linear(g, x, 8, "fc1"), 0.5f);
    h = ts_batch_norm_layer(g, h, "bn1");
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){1});
    ts_tensor *logp = ts_log_softmax(g, ts_linear(g, h, 10, "fc2"), 1);
    ts_tensor *loss = ts_nll_loss(g, logp, y);
    ts_options *o = ts_options_new();
    ts_model *inf = NULL, *tr = NULL;
    const char *const *lw;
    size_t ln = 0;
    CHECK_OK(ts_model_inference(&inf, g, &logp, 1, o), "an inference model with dropout");
    CHECK_OK(ts_model_compile(inf), "compile it");
    CHECK(!ts_model_lint(inf, &lw, &ln) && ln == 1 && strstr(lw[0], "dropout") && strstr(lw[0], "inference model"),
          "dropout in an inference model is noted: %s", ln ? lw[0] : "(none)");
    CHECK_OK(ts_model_training(&tr, g, loss, o, ts_sgd(0.1f, 0, 0)), "a training model at batch size 1");
    CHECK_OK(ts_model_compile(tr), "compile it");
    CHECK(!ts_model_lint(tr, &lw, &ln) && ln == 1 && strstr(lw[0], "bn1/BatchNorm:0") && strstr(lw[0], "variance is 0"),
          "batch norm trained on one sample is flagged: %s", ln ? lw[0] : "(none)");
    ts_model_free(inf);
    ts_model_free(tr);
    ts_options_free(o);
    ts_graph_free(g);
    return check_summary("test_lint");
}
