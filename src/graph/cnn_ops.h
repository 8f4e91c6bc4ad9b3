/* cnn_ops.h -- shape rules, costs and scratch sizes of the convolutional
 * ops, for their rows in the op table (ops.c); their kernels read the same
 * attributes. Attributes:
 *   Conv2d       attr: stride h,w | pad top,bottom,left,right | dilation h,w | groups
 *   ConvTranspose2d  Conv2d's, then output padding h,w
 *   MaxPool2d,
 *   AvgPool2d    attr: stride h,w | pad top,bottom,left,right | kernel h,w | exclude_pad
 *   Conv3d       attr: stride d,h,w | dilation d,h,w | pad front,top,left |
 *                pad back,bottom,right | groups
 *   ConvTranspose3d  Conv3d's, then output padding d,h,w
 *   BatchNorm    fattr: eps, momentum; attr: frozen
 *   DropoutMask  fattr: p; attr: seed */
#ifndef TS_CNN_OPS_H
#define TS_CNN_OPS_H

#include "graph/ops.h"

enum { CA_SH = 0, CA_SW, CA_PT, CA_PB, CA_PL, CA_PR, CA_DH, CA_DW, CA_GROUPS, CA_OPH, CA_OPW };
enum { C3_S = 0, C3_D = 3, C3_P0 = 6, C3_P1 = 9, C3_GROUPS = 12, C3_OP = 13 }; /* each of S, D, P0, P1, OP: d,h,w */
enum { PA_KH = 6, PA_KW = 7, PA_EXCLUDE_PAD = 8, PA_DH = 9, PA_DW = 10, PA_CEIL = 11, PA_COLUMN_MAJOR = 12 };

ts_status ts_shape_conv2d(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_conv_transpose2d(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_conv3d(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_pool2d(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_global_pool(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_batch_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_dropout_mask(const ts_tensor *n, const ts_shape *in, ts_shape *out);

double ts_flops_conv2d(const ts_shape *in, const ts_shape *out);
double ts_flops_conv_transpose2d(const ts_shape *in, const ts_shape *out);
double ts_flops_conv3d(const ts_shape *in, const ts_shape *out);
double ts_flops_pool2d(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_max_pool2d(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_batch_norm(const ts_shape *in, const ts_shape *out);

#endif
