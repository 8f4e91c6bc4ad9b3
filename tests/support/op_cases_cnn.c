/* op_cases_cnn.c -- the hand-written op cases of the cnn family
 * (op_check.h), what the rows' generated samples (op_gen.c: a 3x3 or
 * 2x2x2 kernel at stride 1 with a bias, 2x2 pools at stride 2) do not
 * reach: Conv2d, Conv3d, ConvTranspose2d/3d, MaxPool2d (and its indices),
 * AvgPool2d, GlobalAvgPool and BatchNorm with the geometries their kernels
 * treat apart (padding on each side, stride, dilation, ceil_mode, groups,
 * 1x1 direct, no bias, several sample chunks, overlapping windows, frozen
 * batch norm). */
#include "check.h"
#include "op_check.h"

#include <stdio.h>

/* x [N,C,H,W] (*) w [OC,C/groups,KH,KW] (+ b [OC]) */
static void conv_case(ts_op_checker *c, const char *label, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                      int64_t KW, const ts_conv2d_params *p, bool bias) {
    ts_graph *g = ts_graph_new(1);
    int64_t groups = p && p->groups ? p->groups : 1;
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){N, C, H, W});
    ts_tensor *w = ts_param(g, "w", 4, (int64_t[]){OC, C / groups, KH, KW});
    ts_tensor *b = bias ? ts_param(g, "b", 1, (int64_t[]){OC}) : NULL;
    ts_tensor *y = ts_conv2d(g, x, w, b, p);
    CHECK(y != NULL, "Conv2d %s builds", label);
    if (y) ts_op_check(c, label, y, NULL);
    ts_graph_free(g);
}

/* x [N,C,H,W] by w [C,OC/groups,KH,KW] (+ b [OC]), transposed */
static void convt_case(ts_op_checker *c, const char *label, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                       int64_t KW, const ts_conv_transpose2d_params *p, bool bias) {
    ts_graph *g = ts_graph_new(1);
    int64_t groups = p && p->groups ? p->groups : 1;
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){N, C, H, W});
    ts_tensor *w = ts_param(g, "w", 4, (int64_t[]){C, OC / groups, KH, KW});
    ts_tensor *b = bias ? ts_param(g, "b", 1, (int64_t[]){OC}) : NULL;
    ts_tensor *y = ts_conv_transpose2d(g, x, w, b, p);
    CHECK(y != NULL, "ConvTranspose2d %s builds", label);
    if (y) ts_op_check(c, label, y, NULL);
    ts_graph_free(g);
}

/* x [N,C,D,H,W] by w [OC,C/groups,KD,KH,KW] (Conv3d) or, transposed,
 * [C,OC/groups,KD,KH,KW] (ConvTranspose3d), + b [OC] */
static void conv3d_case(ts_op_checker *c, const char *label, bool transposed, const int64_t *xs, int64_t OC, const int64_t *k,
                        const ts_conv3d_params *p, bool bias) {
    ts_graph *g = ts_graph_new(1);
    int64_t groups = p && p->groups ? p->groups : 1;
    ts_tensor *x = ts_input(g, "x", TS_F32, 5, xs);
    int64_t ws[5] = {transposed ? xs[1] : OC, transposed ? OC / groups : xs[1] / groups, k[0], k[1], k[2]};
    ts_tensor *w = ts_param(g, "w", 5, ws);
    ts_tensor *b = bias ? ts_param(g, "b", 1, (int64_t[]){OC}) : NULL;
    ts_tensor *y = transposed ? ts_conv_transpose3d(g, x, w, b, p) : ts_conv3d(g, x, w, b, p);
    CHECK(y != NULL, "%s %s builds", transposed ? "ConvTranspose3d" : "Conv3d", label);
    if (y) ts_op_check(c, label, y, NULL);
    ts_graph_free(g);
}

/* kind 0: AvgPool2d, 1: MaxPool2d, 2: MaxPool2dIndices (row-major), 3: (column-major) */
static void pool_case(ts_op_checker *c, int kind, const char *label, int64_t N, int64_t C, int64_t H, int64_t W,
                      const ts_pool2d_params *p) {
    static const char *const names[] = {"AvgPool2d", "MaxPool2d", "MaxPool2dIndices", "MaxPool2dIndices"};
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){N, C, H, W});
    ts_tensor *y = kind == 0 ? ts_avg_pool2d(g, x, p) : kind == 1 ? ts_max_pool2d(g, x, p) : ts_max_pool2d_indices(g, x, p, kind == 3);
    CHECK(y != NULL, "%s %s builds", names[kind], label);
    if (y) ts_op_check(c, label, y, NULL);
    ts_graph_free(g);
}

static void global_case(ts_op_checker *c, const char *label, int64_t N, int64_t C, int64_t H, int64_t W) {
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){N, C, H, W});
    ts_tensor *y = ts_global_avg_pool2d(g, x);
    CHECK(y != NULL, "GlobalAvgPool %s builds", label);
    if (y) ts_op_check(c, label, y, NULL);
    ts_graph_free(g);
}

/* x [N,C] (ndim 2) or [N,C,H,W]; the harness runs a training model with
 * update_state: batch statistics and the running buffers updated (compared
 * after the forward), or with frozen the running ones (positive inputs: the
 * running variance must be) */
static void bn_case(ts_op_checker *c, const char *label, int ndim, const int64_t *xs, float eps, float momentum, int frozen) {
    ts_graph *g = ts_graph_new(1);
    int64_t C = xs[1];
    ts_tensor *x = ts_input(g, "x", TS_F32, ndim, xs);
    ts_tensor *w = ts_param(g, "w", 1, &C), *b = ts_param(g, "b", 1, &C);
    ts_tensor *rm = ts_buffer(g, "rm", 1, &C), *rv = ts_buffer(g, "rv", 1, &C);
    ts_tensor *y = ts_batch_norm(g, x, w, b, rm, rv, eps, momentum, frozen);
    CHECK(y != NULL, "BatchNorm %s builds", label);
    ts_op_case_opts o = {.positive = frozen != 0};
    if (y) ts_op_check(c, label, y, &o);
    ts_graph_free(g);
}

void ts_op_cases_cnn(ts_op_checker *c) {
    /* ---- ConvTranspose2d: stride 1 (the unit-stride paths), strides with
     * output padding, asymmetric padding, dilation, groups, 1x1, a U-Net's
     * 2x2 stride 2 upsampling at a size with several sample chunks */
    convt_case(c, "transpose 3x3 bias [2,3,5,6]", 2, 3, 5, 6, 4, 3, 3, NULL, true);
    convt_case(c, "transpose 3x3 stride 2 pad 1 output pad 1 [2,4,5,5]", 2, 4, 5, 5, 3, 3, 3,
               &(ts_conv_transpose2d_params){.stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1,
                                             .output_pad_h = 1, .output_pad_w = 1}, true);
    convt_case(c, "transpose 2x4 stride 3,1 pad 0,1,2,0 dilation 2 [3,2,4,6]", 3, 2, 4, 6, 5, 2, 4,
               &(ts_conv_transpose2d_params){.stride_h = 3, .pad_bottom = 1, .pad_left = 2, .dilation_h = 2, .dilation_w = 2}, false);
    convt_case(c, "transpose groups 2 3x3 stride 2 [2,4,5,4]", 2, 4, 5, 4, 6, 3, 3,
               &(ts_conv_transpose2d_params){.groups = 2, .stride_h = 2, .stride_w = 2}, true);
    convt_case(c, "transpose 1x1 [2,5,6,7]", 2, 5, 6, 7, 3, 1, 1, NULL, true);
    convt_case(c, "transpose 2x2 stride 2 [16,32,16,16]", 16, 32, 16, 16, 16, 2, 2,
               &(ts_conv_transpose2d_params){.stride_h = 2, .stride_w = 2}, true);

    /* ---- Conv3d and ConvTranspose3d: padding on each side, strides,
     * dilation, groups, output padding, no bias */
    conv3d_case(c, "3d 3x3x3 pad 1 bias [2,2,4,5,6]", false, (int64_t[]){2, 2, 4, 5, 6}, 3, (int64_t[]){3, 3, 3},
                &(ts_conv3d_params){.pad_front = 1, .pad_back = 1, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, true);
    conv3d_case(c, "3d 2x3x2 stride 2,1,3 asym pad dilation 2,1,2 groups 2 [2,4,7,5,8]", false, (int64_t[]){2, 4, 7, 5, 8}, 6,
                (int64_t[]){2, 3, 2},
                &(ts_conv3d_params){.stride_d = 2, .stride_w = 3, .pad_front = 1, .pad_bottom = 2, .pad_left = 1, .dilation_d = 2,
                                    .dilation_w = 2, .groups = 2},
                false);
    conv3d_case(c, "transpose 3d 3x3x3 bias [2,3,3,4,5]", true, (int64_t[]){2, 3, 3, 4, 5}, 2, (int64_t[]){3, 3, 3}, NULL, true);
    conv3d_case(c, "transpose 3d 3x2x3 stride 2 pad 1 output pad 1,0,1 dilation 1,2,1 groups 2 [2,4,3,4,3]", true,
                (int64_t[]){2, 4, 3, 4, 3}, 6, (int64_t[]){3, 2, 3},
                &(ts_conv3d_params){.stride_d = 2, .stride_h = 2, .stride_w = 2, .pad_front = 1, .pad_back = 1, .pad_top = 1,
                                    .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .output_pad_d = 1, .output_pad_w = 1, .dilation_h = 2,
                                    .groups = 2},
                false);

    /* ---- Conv2d */
    conv_case(c, "3x3 pad 1 bias [2,3,7,9]", 2, 3, 7, 9, 4, 3, 3, &(ts_conv2d_params){.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1},
              true);
    conv_case(c, "3x3 no pad no bias [1,2,5,6]", 1, 2, 5, 6, 3, 3, 3, NULL, false);
    conv_case(c, "3x3 stride 2 asym pad dilation 2 [2,3,11,10]", 2, 3, 11, 10, 5, 3, 3,
              &(ts_conv2d_params){.stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 0, .pad_left = 2, .pad_right = 1,
                                  .dilation_h = 2, .dilation_w = 2},
              false);
    conv_case(c, "2x5 stride 1,3 dilation 3,1 pad 0,2,1,0 bias [3,2,9,13]", 3, 2, 9, 13, 3, 2, 5,
              &(ts_conv2d_params){.stride_h = 1, .stride_w = 3, .pad_bottom = 2, .pad_left = 1, .dilation_h = 3}, true);
    conv_case(c, "groups 2 3x3 same bias [2,4,8,7]", 2, 4, 8, 7, 6, 3, 3, &(ts_conv2d_params){.groups = 2, .same = 1}, true);
    conv_case(c, "depthwise groups 5 3x3 stride 2 pad 1 [3,5,9,9]", 3, 5, 9, 9, 5, 3, 3,
              &(ts_conv2d_params){.groups = 5, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1},
              false);
    conv_case(c, "groups 3 x2 channels 1x1 [2,6,5,5]", 2, 6, 5, 5, 6, 1, 1, &(ts_conv2d_params){.groups = 3}, true);
    conv_case(c, "1x1 direct bias [3,5,6,7]", 3, 5, 6, 7, 7, 1, 1, NULL, true);
    conv_case(c, "1x1 direct no bias [2,3,1,1]", 2, 3, 1, 1, 2, 1, 1, NULL, false);
    conv_case(c, "1x1 stride 2 [2,4,7,7]", 2, 4, 7, 7, 3, 1, 1, &(ts_conv2d_params){.stride_h = 2, .stride_w = 2}, false);
    conv_case(c, "1x1 pad 1 [2,3,4,5]", 2, 3, 4, 5, 2, 1, 1, &(ts_conv2d_params){.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1},
              true);
    conv_case(c, "kernel = input 4x5 [3,2,4,5]", 3, 2, 4, 5, 3, 4, 5, NULL, true);
    /* C*9*OH*OW = 294912 floats a sample: the CUDA workspace takes 28 at a time, so 30 samples are two chunks */
    conv_case(c, "3x3 pad 1 [30,32,32,32] (several sample chunks)", 30, 32, 32, 32, 4, 3, 3,
              &(ts_conv2d_params){.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, true);

    /* ---- MaxPool2d (padding at most half the kernel) */
    pool_case(c, 1, "3x3 stride 2 pad 1 [2,3,11,13]", 2, 3, 11, 13,
              &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1,
                                  .pad_right = 1});
    pool_case(c, 1, "3x2 stride 1 pad 1,0,1,1 [1,2,6,5]", 1, 2, 6, 5,
              &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 2, .stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_left = 1, .pad_right = 1});
    pool_case(c, 1, "4x4 stride 3,1 pad 2 [2,2,10,9]", 2, 2, 10, 9,
              &(ts_pool2d_params){.kernel_h = 4, .kernel_w = 4, .stride_h = 3, .stride_w = 1, .pad_top = 2, .pad_bottom = 2, .pad_left = 2,
                                  .pad_right = 2});
    pool_case(c, 1, "3x3 stride 2 [4,8,64,64] (131072 elements)", 4, 8, 64, 64,
              &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2});

    /* ---- AvgPool2d: padding counted (exclude_pad 0) or not */
    for (int ex = 0; ex < 2; ex++) {
        char l[128];
        const char *tag = ex ? "exclude pad" : "include pad";
        snprintf(l, sizeof l, "2x2 stride 2 %s [2,3,9,7]", tag);
        pool_case(c, 0, l, 2, 3, 9, 7, &(ts_pool2d_params){.kernel_h = 2, .kernel_w = 2, .exclude_pad = ex});
        snprintf(l, sizeof l, "3x3 stride 1 pad 1 %s [2,3,7,8]", tag);
        pool_case(c, 0, l, 2, 3, 7, 8,
                  &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_bottom = 1,
                                      .pad_left = 1, .pad_right = 1, .exclude_pad = ex});
        snprintf(l, sizeof l, "3x2 stride 2,1 pad 1,0,1,1 %s [1,2,8,5]", tag);
        pool_case(c, 0, l, 1, 2, 8, 5,
                  &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 2, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_left = 1, .pad_right = 1,
                                      .exclude_pad = ex});
        snprintf(l, sizeof l, "4x4 stride 3 pad 2 %s [2,2,10,9]", tag);
        pool_case(c, 0, l, 2, 2, 10, 9,
                  &(ts_pool2d_params){.kernel_h = 4, .kernel_w = 4, .stride_h = 3, .stride_w = 3, .pad_top = 2, .pad_bottom = 2,
                                      .pad_left = 2, .pad_right = 2, .exclude_pad = ex});
    }
    pool_case(c, 0, "3x3 stride 2 pad 1 [4,8,64,64] (131072 elements)", 4, 8, 64, 64,
              &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1,
                                  .pad_right = 1});

    /* ---- dilation, ceil_mode and padding past half the window, both pools */
    for (int kind = 0; kind < 2; kind++) {
        pool_case(c, kind, "2x2 dilation 2,3 stride 1,2 ceil [2,3,9,10]", 2, 3, 9, 10,
                  &(ts_pool2d_params){.kernel_h = 2, .kernel_w = 2, .stride_h = 1, .stride_w = 2, .dilation_h = 2, .dilation_w = 3,
                                      .ceil_mode = 1});
        pool_case(c, kind, "3x3 stride 2,3 pad 2,2,1,0 ceil include pad [2,2,11,13]", 2, 2, 11, 13,
                  &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 3, .pad_top = 2, .pad_bottom = 1,
                                      .pad_left = 2, .ceil_mode = 1});
        pool_case(c, kind, "3x3 stride 2,3 pad 2,2,1,0 ceil exclude pad [2,2,11,13]", 2, 2, 11, 13,
                  &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 3, .pad_top = 2, .pad_bottom = 1,
                                      .pad_left = 2, .ceil_mode = 1, .exclude_pad = 1});
    }

    /* ---- MaxPool2dIndices, row- and column-major */
    for (int kind = 2; kind < 4; kind++) {
        pool_case(c, kind, kind == 2 ? "3x3 stride 2 pad 1 [2,3,11,13]" : "3x3 stride 2 pad 1 column-major [2,3,11,13]", 2, 3, 11, 13,
                  &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1,
                                      .pad_left = 1, .pad_right = 1});
        pool_case(c, kind, kind == 2 ? "2x2 dilation 2 ceil [2,2,8,9]" : "2x2 dilation 2 ceil column-major [2,2,8,9]", 2, 2, 8, 9,
                  &(ts_pool2d_params){.kernel_h = 2, .kernel_w = 2, .dilation_h = 2, .dilation_w = 2, .ceil_mode = 1});
    }

    /* ---- GlobalAvgPool */
    global_case(c, "[3,4,1,1]", 3, 4, 1, 1);
    global_case(c, "[2,3,150,150] (135000 elements)", 2, 3, 150, 150);

    /* ---- BatchNorm */
    bn_case(c, "[4,3,5,7] eps 1e-3 momentum 0.3", 4, (int64_t[]){4, 3, 5, 7}, 1e-3f, 0.3f, 0);
    bn_case(c, "[1,4] one sample (unbiased = biased)", 2, (int64_t[]){1, 4}, 1e-5f, 0.1f, 0);
    bn_case(c, "[1,3,1,1] one element a channel", 4, (int64_t[]){1, 3, 1, 1}, 1e-5f, 1.0f, 0);
    bn_case(c, "[4,3,5,7] frozen (running statistics)", 4, (int64_t[]){4, 3, 5, 7}, 1e-5f, 0.1f, 1);
    bn_case(c, "[6,7] frozen", 2, (int64_t[]){6, 7}, 1e-2f, 0.5f, 1);
    bn_case(c, "[2,3,300,130] (234000 elements)", 4, (int64_t[]){2, 3, 300, 130}, 1e-5f, 0.1f, 0);
}
