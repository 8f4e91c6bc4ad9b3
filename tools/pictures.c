/* pictures.c -- what CNN users look at: the feature maps of one sample
 * (`--feature-maps TENSOR[:SAMPLE]`) and a conv layer's kernels
 * (`--filters PARAM`), as PNG grids with a shared colour scale, and as
 * images in the TensorBoard log with --tensorboard. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* The tiles of a as a PNG file at path and, with tb, as the image `tag`. */
static ts_status save_tiles(const char *path, const char *title, const ts_array *a, ts_tb_writer *tb, const char *tag, int64_t step) {
    ts_status st = ts_plot_tiles(path, title, a);
    if (st || !tb) return st;
    unsigned char *png = NULL;
    size_t n = 0;
    int w = 0, h = 0;
    st = ts_plot_tiles_png(&png, &n, &w, &h, title, a);
    if (!st) st = ts_tb_image(tb, tag, step, png, n, w, h);
    ts_buffer_free(png);
    return st;
}

int cli_feature_maps(const cli_model *em, const ts_array *x, const char *spec, const char *dir, ts_tb_writer *tb, int64_t step) {
    char name[512], file[600], path[1200], title[700], tag[600];
    long sample;
    if (!cli_parse_picture_spec(em->g, spec, name, sizeof name, &sample))
        return cli_usage_error("train", "--feature-maps %s: no such tensor (list them with 'tensorscope names --model ...')", spec);
    ts_tensor *t = ts_graph_find(em->g, name);
    ts_array info;
    ts_tensor_info(t, &info);
    if (info.data || info.ndim != 4)
        return cli_usage_error("train", "--feature-maps %s: takes a 4-D activation [N,C,H,W] such as conv1/Conv2d:0 or Relu:0; '%s' is %s%d-D",
                               spec, name, info.data ? "a parameter, " : "", info.ndim);
    if (sample >= info.shape[0])
        return cli_usage_error("train", "--feature-maps %s: sample %ld is not in the batch of %lld", spec, sample, (long long)info.shape[0]);
    ts_model *m = NULL;
    ts_array out;
    const char *in_name = "x";
    ts_status st = ts_model_inference(&m, em->g, &t, 1, NULL);
    if (!st) st = ts_model_run(m, &in_name, x, 1);
    if (!st) st = ts_model_anchored(m, name, &out);
    if (st) {
        ts_model_free(m);
        return cli_runtime_error("computing the feature maps");
    }
    /* [1, N, C, H, W] (every sample of the one run) or [N, C, H, W] */
    int64_t C = info.shape[1], H = info.shape[2], W = info.shape[3];
    ts_array one = {.dtype = TS_F32, .ndim = 3, .shape = {C, H, W}, .data = (float *)out.data + sample * C * H * W};
    cli_file_safe(name, file, sizeof file);
    snprintf(path, sizeof path, "%s/feature_maps_%s_%ld.png", dir, file, sample);
    snprintf(title, sizeof title, "%s, held-out sample %ld: %lld channels of %lldx%lld", name, sample, (long long)C, (long long)H, (long long)W);
    snprintf(tag, sizeof tag, "act/%s/sample_%ld", name, sample);
    st = save_tiles(path, title, &one, tb, tag, step);
    ts_model_free(m);
    if (st) return cli_runtime_error("writing the feature maps");
    printf("Saved feature maps of %s (sample %ld) to %s\n", name, sample, path);
    return CLI_OK;
}

int cli_filters(const cli_model *cm, const char *param, const char *dir, ts_tb_writer *tb, int64_t step) {
    char file[600], path[1200], title[700], tag[600];
    ts_tensor *t = ts_graph_find(cm->g, param);
    ts_array info;
    if (!t || ts_tensor_info(t, &info) || !info.data || info.ndim != 4)
        return cli_usage_error("train", "--filters %s: takes a conv layer's 4-D weight such as conv1.weight%s", param,
                               t ? "" : " (no such tensor; list them with 'tensorscope names --model ...')");
    ts_array a = info;
    if (info.shape[1] == 1) { /* one input channel: one tile per output channel */
        a.ndim = 3;
        a.shape[1] = info.shape[2], a.shape[2] = info.shape[3];
    }
    cli_file_safe(param, file, sizeof file);
    snprintf(path, sizeof path, "%s/filters_%s.png", dir, file);
    snprintf(title, sizeof title, "%s: %lld x %lld kernels of %lldx%lld%s", param, (long long)info.shape[0], (long long)info.shape[1],
             (long long)info.shape[2], (long long)info.shape[3], info.shape[1] > 1 ? " (row: output, column: input channel)" : "");
    snprintf(tag, sizeof tag, "weight/%s", param);
    if (save_tiles(path, title, &a, tb, tag, step)) return cli_runtime_error("writing the filters");
    printf("Saved filters of %s to %s\n", param, path);
    return CLI_OK;
}
