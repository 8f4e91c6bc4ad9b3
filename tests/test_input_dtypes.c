/* test_input_dtypes.c -- what a run takes for an input of another dtype:
 * i64 token ids and labels, u8 bools and integers of every other width
 * (i8, i16, u16, u32, u64, bool) for an i32 input, f64 values and integers
 * for an f32 input, converted for the run; a value the input's dtype cannot
 * hold (an id beyond i32, an f64 beyond f32's range) is an error naming it,
 * never wrapped; i32 values for an f32 input within 2^24 (exact in f32);
 * other pairs (f32 data for an i32 input) stay an error.
 * Gather indices outside [-D, D) are an error before the run. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "check.h"

int main(void)
{
    /* rows of a table by ids: out[i] = table[ids[i]] */
    ts_graph *g = ts_graph_new(1);
    int64_t ts[2] = {5, 2}, is[1] = {4};
    ts_tensor *table = ts_input(g, "table", TS_F32, 2, ts);
    ts_tensor *ids = ts_input(g, "ids", TS_I32, 1, is);
    ts_tensor *rows = ts_embedding(g, table, ids);
    ts_tensor *cast = ts_unary(g, "CastFloat", ids, 0, 0);
    ts_tensor *outs[2] = {rows, cast};
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, 2, NULL), "an inference model over an i32 input");
    double tv[10];
    for (int i = 0; i < 10; i++)
        tv[i] = 0.5 * i + 1e-9; /* f64 values; the f32 input takes them rounded */
    ts_array table64 = {.dtype = TS_F64, .ndim = 2, .shape = {5, 2}, .data = tv};
    int64_t id64[4] = {4, 0, 3, 1};
    ts_array ids64 = {.dtype = TS_I64, .ndim = 1, .shape = {4}, .data = id64};
    const char *names[2] = {"table", "ids"};
    ts_array in[2] = {table64, ids64}, out;
    int ok = m && !ts_model_run(m, names, in, 2) && !ts_model_anchored(m, ts_tensor_name(rows), &out);
    CHECK(ok, "i64 ids and f64 values are taken by the i32 and f32 inputs: %s", ok ? "" : ts_last_error());
    int bad = 0;
    for (int i = 0; ok && i < 4; i++)
        for (int c = 0; c < 2; c++)
            bad += ((const float *)out.data)[i * 2 + c] != (float)tv[id64[i] * 2 + c];
    CHECK(ok && bad == 0, "the rows gathered by the i64 ids are the f64 table's rows, rounded to f32");

    uint8_t b8[4] = {1, 0, 1, 1};
    in[1] = (ts_array){.dtype = TS_U8, .ndim = 1, .shape = {4}, .data = b8};
    ok = !ts_model_run(m, names, in, 2) && !ts_model_anchored(m, ts_tensor_name(cast), &out);
    CHECK(ok && ((const float *)out.data)[0] == 1 && ((const float *)out.data)[1] == 0 && ((const float *)out.data)[3] == 1,
          "u8 bools feed an i32 input as 1 and 0: %s", ok ? "" : ts_last_error());

    /* every other integer width, and bool */
    int8_t i8[4] = {3, 0, 4, 1};
    int16_t i16[4] = {2, 3, 4, 0};
    uint16_t u16[4] = {4, 0, 3, 1};
    uint32_t u32[4] = {4, 0, 3, 1};
    uint64_t u64[4] = {4, 0, 3, 1};
    uint8_t bo[4] = {1, 0, 0, 1};
    struct { ts_dtype dt; void *data; double v0, v3; } widths[] = {
        {TS_I8, i8, 3, 1}, {TS_I16, i16, 2, 0}, {TS_U16, u16, 4, 1}, {TS_U32, u32, 4, 1}, {TS_U64, u64, 4, 1}, {TS_BOOL, bo, 1, 1},
    };
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
        in[1] = (ts_array){.dtype = widths[k].dt, .ndim = 1, .shape = {4}, .data = widths[k].data};
        ok = !ts_model_run(m, names, in, 2) && !ts_model_anchored(m, ts_tensor_name(cast), &out);
        CHECK(ok && ((const float *)out.data)[0] == (float)widths[k].v0 && ((const float *)out.data)[3] == (float)widths[k].v3,
              "%s data feeds an i32 input with its values: %s", ts_dtype_name(widths[k].dt), ok ? "" : ts_last_error());
    }
    u64[2] = (uint64_t)INT32_MAX + 1;
    in[1] = (ts_array){.dtype = TS_U64, .ndim = 1, .shape = {4}, .data = u64};
    ts_status st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "2147483648") && strstr(ts_last_error(), "[2]"),
          "a u64 beyond i32 is an error naming it, not wrapped: %s", ts_last_error());
    u32[1] = UINT32_MAX;
    in[1] = (ts_array){.dtype = TS_U32, .ndim = 1, .shape = {4}, .data = u32};
    st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "4294967295"), "and a u32 beyond i32: %s", ts_last_error());
    int16_t t16[10] = {0, 1, 2, 3, 4, 5, 6, 7, -8, 9};
    in[0] = (ts_array){.dtype = TS_I16, .ndim = 2, .shape = {5, 2}, .data = t16};
    in[1] = ids64;
    ok = !ts_model_run(m, names, in, 2) && !ts_model_anchored(m, ts_tensor_name(rows), &out);
    CHECK(ok && ((const float *)out.data)[0] == -8 && ((const float *)out.data)[1] == 9, "i16 values feed an f32 input: %s",
          ok ? "" : ts_last_error());
    in[0] = table64;

    int64_t big[4] = {0, 1, (int64_t)INT32_MAX + 1, 2};
    in[1] = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {4}, .data = big};
    st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "2147483648") && strstr(ts_last_error(), "[2]"),
          "an i64 id beyond i32 is an error naming it and where, not wrapped: %s", ts_last_error());
    int64_t neg[4] = {0, 1, (int64_t)INT32_MIN - 1, 2};
    in[1].data = neg;
    st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "-2147483649"), "and one below: %s", ts_last_error());

    in[1] = ids64;
    tv[3] = 1e300;
    st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "f32's range") && strstr(ts_last_error(), "[3]"),
          "an f64 beyond f32's range is an error: %s", ts_last_error());
    tv[3] = INFINITY;
    ok = !ts_model_run(m, names, in, 2) && !ts_model_anchored(m, ts_tensor_name(rows), &out);
    CHECK(ok && isinf(((const float *)out.data)[3 * 2 + 1]), "an f64 infinity stays an infinity: %s", ok ? "" : ts_last_error());

    /* i32 values for the f32 input: exact up to 2^24 */
    int32_t ti[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 16777216};
    in[0] = (ts_array){.dtype = TS_I32, .ndim = 2, .shape = {5, 2}, .data = ti};
    ok = !ts_model_run(m, names, in, 2) && !ts_model_anchored(m, ts_tensor_name(rows), &out);
    CHECK(ok && ((const float *)out.data)[0] == 8 && ((const float *)out.data)[1] == 16777216.0f,
          "i32 values feed an f32 input (2^24 exactly): %s", ok ? "" : ts_last_error());
    ti[3] = 16777217;
    st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "16777217"), "2^24 + 1, which f32 rounds, is an error: %s", ts_last_error());
    in[0] = table64;

    float f32ids[4] = {4, 0, 3, 1};
    in[1] = (ts_array){.dtype = TS_F32, .ndim = 1, .shape = {4}, .data = f32ids};
    st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "must be i32 data, got f32") && strstr(ts_last_error(), "integer and bool data"),
          "f32 data for an i32 input stays an error that says what it takes: %s", ts_last_error());
    ts_model_free(m);
    ts_graph_free(g);

    /* gather indices: [-D, D) (negative from the end), checked before the run */
    g = ts_graph_new(1);
    table = ts_input(g, "table", TS_F32, 2, (int64_t[]){2, 3});
    ids = ts_input(g, "ids", TS_I32, 1, (int64_t[]){2});
    ts_tensor *ids2 = ts_input(g, "ids2", TS_I32, 2, (int64_t[]){1, 2});
    ts_tensor *ge[2] = {ts_gather(g, table, ids, 1), ts_gather_elements(g, table, ids2, 1)};
    const char *names3[3] = {"table", "ids", "ids2"};
    ts_array in3[3];
    m = NULL;
    CHECK_OK(ts_model_inference(&m, g, ge, 2, NULL), "a model gathering along axis 1");
    float t6[6] = {10, 11, 12, 20, 21, 22};
    int64_t good[2] = {-3, 2}, bad3[2] = {0, 3}, bad4[2] = {-4, 0};
    in3[0] = ts_array_f32(t6, 2, (int64_t[]){2, 3});
    in3[1] = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {2}, .data = good};
    in3[2] = (ts_array){.dtype = TS_I64, .ndim = 2, .shape = {1, 2}, .data = good};
    ok = m && !ts_model_run(m, names3, in3, 3) && !ts_model_anchored(m, ts_tensor_name(ge[0]), &out);
    CHECK(ok && ((const float *)out.data)[0] == 10 && ((const float *)out.data)[1] == 12 && ((const float *)out.data)[3] == 22,
          "gather by -3 and 2 along a dim of 3 takes columns 0 and 2: %s", ok ? "" : ts_last_error());
    ok = ok && !ts_model_anchored(m, ts_tensor_name(ge[1]), &out);
    CHECK(ok && ((const float *)out.data)[0] == 10 && ((const float *)out.data)[1] == 12, "gather_elements by them takes 10 and 12: %s",
          ok ? "" : ts_last_error());
    for (int k = 1; k <= 2; k++) {
        in3[k].data = bad3;
        st = ts_model_run(m, names3, in3, 3);
        CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[-3, 3)"), "an index of 3 is an error at run: %s", ts_last_error());
        in3[k].data = bad4;
        st = ts_model_run(m, names3, in3, 3);
        CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "-4"), "and one of -4: %s", ts_last_error());
        in3[k].data = good;
    }
    ts_model_free(m);
    ts_graph_free(g);
    return check_summary("test_input_dtypes");
}
