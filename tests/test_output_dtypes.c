/* test_output_dtypes.c -- a tensor's output dtype (ts_tensor_set_output_dtype,
 * what the ONNX importer declares for int64, bool, double, ... outputs): its
 * anchored values come back in that dtype, converted exactly from the dtype
 * they are computed in; a value the dtype does not hold (2.5 for an integer,
 * 300 for u8, 2 for bool) is an error that names it; .npy files keep it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* Element 1 of an anchored array, as a double. */
static double second(const ts_array *a) {
    switch (a->dtype) {
    case TS_U8: return ((const uint8_t *)a->data)[1];
    case TS_I8: return ((const int8_t *)a->data)[1];
    case TS_I16: return ((const int16_t *)a->data)[1];
    case TS_U16: return ((const uint16_t *)a->data)[1];
    case TS_U32: return ((const uint32_t *)a->data)[1];
    case TS_I32: return ((const int32_t *)a->data)[1];
    case TS_U64: return (double)((const uint64_t *)a->data)[1];
    case TS_F64: return ((const double *)a->data)[1];
    default: return -12345;
    }
}

int main(void)
{
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 1, (int64_t[]){4});
    ts_tensor *y = ts_relu(g, x);
    ts_tensor *z = ts_relu(g, y);
    CHECK(ts_tensor_set_output_dtype(y, (ts_dtype)99) == TS_ERR_INVALID_ARGUMENT, "an unknown dtype is refused: %s", ts_last_error());
    CHECK_OK(ts_tensor_set_output_dtype(y, TS_I64), "y is returned as i64");
    CHECK_OK(ts_tensor_set_output_dtype(z, TS_BOOL), "z as bool");
    ts_tensor *outs[2] = {y, z};
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, 2, NULL), "an inference model");
    const char *names[1] = {"x"};
    float xv[4] = {-3, 0, 1, 7};
    ts_array in = ts_array_f32(xv, 1, (int64_t[]){4}), out;
    int ok = m && !ts_model_run(m, names, &in, 1) && !ts_model_anchored(m, ts_tensor_name(y), &out);
    CHECK(ok && out.dtype == TS_I64 && ts_array_numel(&out) == 4, "y comes back as i64, 4 values: %s", ok ? "" : ts_last_error());
    const int64_t *yi = ok ? (const int64_t *)out.data : NULL;
    CHECK(yi && yi[0] == 0 && yi[1] == 0 && yi[2] == 1 && yi[3] == 7, "with the values relu gave");
    ts_status st = ts_model_anchored(m, ts_tensor_name(z), &out);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "7 at [3]") && strstr(ts_last_error(), "bool"),
          "7 is no bool: an error naming it: %s", ts_last_error());

    xv[3] = 1;
    ok = !ts_model_run(m, names, &in, 1) && !ts_model_anchored(m, ts_tensor_name(z), &out);
    CHECK(ok && out.dtype == TS_BOOL && ((const uint8_t *)out.data)[2] == 1 && ((const uint8_t *)out.data)[0] == 0,
          "0 and 1 come back as bool: %s", ok ? "" : ts_last_error());
    char path[64];
    snprintf(path, sizeof path, "test_output_dtypes_%d.npy", (int)getpid());
    ts_array back;
    ok = ok && !ts_npy_save(path, &out) && !ts_npy_load(path, &back);
    CHECK(ok && back.dtype == TS_U8 && ((const uint8_t *)back.data)[2] == 1, "a bool output saves as .npy bool (read back as u8): %s",
          ok ? "" : ts_last_error());
    if (ok) ts_npy_free(&back);
    remove(path);

    xv[2] = 2.5f;
    st = ts_model_run(m, names, &in, 1);
    CHECK(!st, "the run itself succeeds: %s", st ? ts_last_error() : "");
    st = ts_model_anchored(m, ts_tensor_name(y), &out);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "2.5 at [2]") && strstr(ts_last_error(), "i64"),
          "2.5 for an i64 output is an error, not truncated: %s", ts_last_error());
    ts_model_free(m);
    ts_graph_free(g);

    /* the integer widths' ranges */
    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 1, (int64_t[]){2});
    struct { ts_dtype dt; float ok_v, bad_v; } ranges[] = {
        {TS_U8, 255, 256}, {TS_I8, -128, 128}, {TS_I16, -32768, 32768}, {TS_U16, 65535, -1}, {TS_U32, 4294967040.0f, -1},
        {TS_I32, -2147483648.0f, 2147483648.0f}, {TS_U64, 1e19f, -1}, {TS_F64, 0.1f, 0}};
    size_t nr = sizeof ranges / sizeof ranges[0];
    ts_tensor *r[8];
    for (size_t k = 0; k < nr; k++) {
        r[k] = ts_scale(g, x, 1.0f);
        CHECK_OK(ts_tensor_set_output_dtype(r[k], ranges[k].dt), "an output of each dtype");
    }
    m = NULL;
    CHECK_OK(ts_model_inference(&m, g, r, (int)nr, NULL), "a model with them");
    for (size_t k = 0; k < nr; k++) {
        float v[2] = {ranges[k].ok_v, ranges[k].ok_v};
        in = ts_array_f32(v, 1, (int64_t[]){2});
        ok = !ts_model_run(m, names, &in, 1) && !ts_model_anchored(m, ts_tensor_name(r[k]), &out);
        CHECK(ok && out.dtype == ranges[k].dt && second(&out) == (double)ranges[k].ok_v, "%s holds %g: %s",
              ts_dtype_name(ranges[k].dt), (double)ranges[k].ok_v, ok ? "" : ts_last_error());
        if (ranges[k].dt == TS_F64) continue;
        v[1] = ranges[k].bad_v;
        ok = !ts_model_run(m, names, &in, 1);
        st = ts_model_anchored(m, ts_tensor_name(r[k]), &out);
        CHECK(ok && st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "at [1]"), "%s does not hold %g: %s",
              ts_dtype_name(ranges[k].dt), (double)ranges[k].bad_v, ts_last_error());
    }
    ts_model_free(m);
    ts_graph_free(g);
    return check_summary("test_output_dtypes");
}
