/* test_dataset_arrays.c -- datasets from arrays (ts_dataset_from_arrays):
 * any sample shape, float64 samples and int64 labels converted once, the
 * loader serving [B, ...] batches of them in order, and every bad input a
 * clear error: float labels, negative labels, sample counts that differ,
 * missing data; integer x (token ids) kept as i32, an id beyond int32 an
 * error. */
#include <string.h>

#include "check.h"
#include "tensorscope.h"

int main(void) {
    double x[5 * 2 * 3];
    int64_t y[5];
    for (int i = 0; i < 30; i++) x[i] = i * 0.5;
    for (int i = 0; i < 5; i++) y[i] = 4 - i;
    ts_array xa = {.dtype = TS_F64, .ndim = 3, .shape = {5, 2, 3}, .data = x};
    ts_array ya = {.dtype = TS_I64, .ndim = 1, .shape = {5}, .data = y};
    ts_dataset *d = NULL;
    CHECK_OK(ts_dataset_from_arrays(&d, &xa, &ya), "f64 [5,2,3] samples with i64 labels");
    CHECK(ts_dataset_size(d) == 5, "5 samples");
    ts_array im, lb;
    CHECK_OK(ts_dataset_arrays(d, &im, &lb), "views");
    CHECK(im.dtype == TS_F32 && im.ndim == 3 && im.shape[1] == 2 && im.shape[2] == 3 && ((float *)im.data)[29] == 14.5f,
          "samples stored as f32 [5,2,3]");
    CHECK(lb.dtype == TS_I32 && ((int32_t *)lb.data)[0] == 4, "labels stored as i32");
    x[0] = 99; /* copied: the caller's arrays may go */
    CHECK(((float *)im.data)[0] == 0.0f, "the dataset holds a copy");
    ts_loader *l = NULL;
    CHECK_OK(ts_loader_new(&l, d, (ts_loader_config){.batch_size = 2}), "a loader over it");
    ts_array bx, by;
    CHECK_OK(ts_loader_next(l, 1, &bx, &by), "first batch");
    CHECK(bx.ndim == 3 && bx.shape[0] == 2 && bx.shape[1] == 2 && bx.shape[2] == 3 && ((float *)bx.data)[6] == 3.0f &&
              by.shape[0] == 2 && ((int32_t *)by.data)[1] == 3,
          "batches are [2,2,3] samples and [2] labels, in order");
    ts_loader_free(l);
    ts_dataset_free(d);
    d = NULL;

    float xf[4] = {0};
    float yf[2] = {0, 1};
    int32_t yneg[2] = {0, -1}, y3[3] = {0, 1, 2};
    ts_array x2 = ts_array_f32(xf, 2, (int64_t[]){2, 2});
    ts_array ybad = ts_array_f32(yf, 1, (int64_t[]){2});
    CHECK(ts_dataset_from_arrays(&d, &x2, &ybad) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "must be integers") && !d,
          "float labels: %s", ts_last_error());
    ts_array yn = ts_array_i32(yneg, 1, (int64_t[]){2});
    CHECK(ts_dataset_from_arrays(&d, &x2, &yn) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "label 1 is -1") && !d,
          "a negative label: %s", ts_last_error());
    ts_array y3a = ts_array_i32(y3, 1, (int64_t[]){3});
    CHECK(ts_dataset_from_arrays(&d, &x2, &y3a) == TS_ERR_SHAPE && strstr(ts_last_error(), "same number of samples") && !d,
          "2 samples and 3 labels: %s", ts_last_error());
    CHECK(ts_dataset_from_arrays(&d, NULL, &y3a) == TS_ERR_INVALID_ARGUMENT && !d, "no x: %s", ts_last_error());
    CHECK(ts_dataset_load_arrays(&d, NULL, "no/such/data.npz") == TS_ERR_IO && !d, "a missing .npz: %s", ts_last_error());

    /* integer x (token ids): kept as i32, batched as i32, never wrapped */
    int64_t ids[6] = {7, 0, 2147483647, -5, 3, 1}, lab2[3] = {0, 1, 0};
    ts_array xa64 = {.dtype = TS_I64, .ndim = 2, .shape = {3, 2}, .data = ids};
    ts_array la64 = {.dtype = TS_I64, .ndim = 1, .shape = {3}, .data = lab2};
    CHECK_OK(ts_dataset_from_arrays(&d, &xa64, &la64), "i64 token ids [3,2]");
    ts_array ix = {0};
    if (d) ts_dataset_arrays(d, &ix, NULL);
    CHECK(d && ix.dtype == TS_I32 && ((const int32_t *)ix.data)[2] == 2147483647 && ((const int32_t *)ix.data)[3] == -5,
          "integer x is stored as i32 ids, exactly (2^31-1 and -5 too)");
    ts_loader *ld = NULL;
    ts_array ib, il;
    CHECK(d && !ts_loader_new(&ld, d, (ts_loader_config){.batch_size = 2, .first = 1, .count = 2}) && !ts_loader_next(ld, 1, &ib, &il) &&
              ib.dtype == TS_I32 && ib.shape[0] == 2 && ((const int32_t *)ib.data)[0] == 2147483647 && ((const int32_t *)ib.data)[1] == -5 && ((const int32_t *)ib.data)[2] == 3,
          "the loader serves them as i32 batches: %s", ts_last_error());
    ts_loader_free(ld);
    ts_dataset_free(d);
    d = NULL;
    ids[4] = (int64_t)1 << 31;
    CHECK(ts_dataset_from_arrays(&d, &xa64, &la64) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "x[4] is 2147483648") && !d,
          "an id beyond int32 is an error, not wrapped: %s", ts_last_error());
    return check_summary("test_dataset_arrays");
}
