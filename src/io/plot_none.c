/* plot_none.c -- the plots of a build without cairo (TS_WITH_CAIRO off or
 * cairo not found): every call says what to install (features.c). */
#include "core/core.h"

#define NO_PLOTS() return ts_feature_unsupported("plots")

ts_status ts_plot_gradient_histogram(const char *png_path, const ts_array *arrays, int n) {
    (void)png_path, (void)arrays, (void)n;
    NO_PLOTS();
}

ts_status ts_plot_gradient_histogram_captioned(const char *png_path, const ts_array *arrays, int n, const char *caption) {
    (void)png_path, (void)arrays, (void)n, (void)caption;
    NO_PLOTS();
}

ts_status ts_plot_panels(const char *path, const char *title, const char *x_label, const ts_plot_panel *panels, int n_panels) {
    (void)path, (void)title, (void)x_label, (void)panels, (void)n_panels;
    NO_PLOTS();
}

ts_status ts_plot_lines(const char *path, const char *title, const char *x_label, const ts_series *series, int n_series) {
    (void)path, (void)title, (void)x_label, (void)series, (void)n_series;
    NO_PLOTS();
}

ts_status ts_plot_tiles(const char *path, const char *title, const ts_array *a) {
    (void)path, (void)title, (void)a;
    NO_PLOTS();
}

ts_status ts_plot_errors(const char *path, const char *const *names, const double *max_rel, const double *tol, const int *pass,
                         int n, int first_failure) {
    (void)path, (void)names, (void)max_rel, (void)tol, (void)pass, (void)n, (void)first_failure;
    NO_PLOTS();
}

ts_status ts_plot_precision(const char *path, const char *const *names, const double *rel_error, const double *threshold, int n,
                            int jump) {
    (void)path, (void)names, (void)rel_error, (void)threshold, (void)n, (void)jump;
    NO_PLOTS();
}

ts_status ts_plot_attention(const char *png_path, const char *title, const float *probs, int heads, int T, const char *labels) {
    (void)png_path, (void)title, (void)probs, (void)heads, (void)T, (void)labels;
    NO_PLOTS();
}

ts_status ts_plot_attention_png(unsigned char **png, size_t *n, int *width, int *height, const char *title, const float *probs,
                                int heads, int T, const char *labels) {
    (void)width, (void)height, (void)title, (void)probs, (void)heads, (void)T, (void)labels;
    if (png) *png = NULL;
    if (n) *n = 0;
    NO_PLOTS();
}

ts_status ts_plot_tiles_png(unsigned char **png, size_t *n, int *width, int *height, const char *title, const ts_array *a) {
    (void)width, (void)height, (void)title, (void)a;
    if (png) *png = NULL;
    if (n) *n = 0;
    NO_PLOTS();
}

ts_status ts_plot_memory(const char *path, const char *title, const double *bytes, const char *const *class_names, int n_classes,
                         int n_points, int backward_at, int peak) {
    (void)path, (void)title, (void)bytes, (void)class_names, (void)n_classes, (void)n_points, (void)backward_at, (void)peak;
    NO_PLOTS();
}

ts_status ts_plot_heatmap(const char *path, const char *title, const char *const *row_names, int n_rows, const int64_t *steps, int n_cols,
                          const double *values, int log_scale) {
    (void)path, (void)title, (void)row_names, (void)n_rows, (void)steps, (void)n_cols, (void)values, (void)log_scale;
    NO_PLOTS();
}
