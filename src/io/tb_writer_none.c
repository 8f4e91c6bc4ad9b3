/* tb_writer_none.c -- TensorBoard event files in a build without
 * protobuf-c: every call says what to install (features.c). */
#include "core/core.h"

#define NO_TB() return ts_feature_unsupported("tensorboard")

ts_status ts_tb_open(ts_tb_writer **out, const char *logdir) {
    (void)logdir;
    if (out) *out = NULL;
    NO_TB();
}

ts_status ts_tb_scalar(ts_tb_writer *w, const char *tag, int64_t step, double value) {
    (void)w, (void)tag, (void)step, (void)value;
    NO_TB();
}

ts_status ts_tb_histogram(ts_tb_writer *w, const char *tag, int64_t step, const ts_summary *s) {
    (void)w, (void)tag, (void)step, (void)s;
    NO_TB();
}

ts_status ts_tb_image(ts_tb_writer *w, const char *tag, int64_t step, const void *png, size_t n, int width, int height) {
    (void)w, (void)tag, (void)step, (void)png, (void)n, (void)width, (void)height;
    NO_TB();
}

ts_status ts_tb_text(ts_tb_writer *w, const char *tag, int64_t step, const char *text) {
    (void)w, (void)tag, (void)step, (void)text;
    NO_TB();
}

ts_status ts_tb_hparams(ts_tb_writer *w, const ts_tb_hparam *hp, int n) {
    (void)w, (void)hp, (void)n;
    NO_TB();
}

ts_status ts_tb_layout(ts_tb_writer *w, const ts_tb_chart *charts, int n) {
    (void)w, (void)charts, (void)n;
    NO_TB();
}

ts_status ts_tb_hparams_end(ts_tb_writer *w, int success) {
    (void)w, (void)success;
    NO_TB();
}

ts_status ts_tb_flush(ts_tb_writer *w) {
    (void)w;
    NO_TB();
}

/* No writer can exist: closing NULL is fine, as with the real writer. */
ts_status ts_tb_close(ts_tb_writer *w) { return w ? ts_feature_unsupported("tensorboard") : TS_OK; }

const char *ts_tb_path(const ts_tb_writer *w) {
    (void)w;
    return NULL;
}
