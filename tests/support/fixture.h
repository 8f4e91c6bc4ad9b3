/* fixture.h -- reading the binary reference fixtures written by
 * tests/reference/make_fixtures.py, and comparing arrays against them.
 *
 * File format (all integers little-endian):
 *
 *     magic    8 bytes  "TSFIXTR\0"
 *     version  u32      1 (FIXTURE_VERSION)
 *     count    u32      number of entries
 *     per entry:
 *       name_len u32, name bytes (no NUL)
 *       dtype    u32    0 = f32, 2 = i32 (the values of ts_dtype)
 *       ndim     u32    0..TS_MAX_DIMS (0 = a scalar of one element)
 *       shape    i64[ndim]
 *       data     prod(shape) * 4 bytes, little-endian, C order
 *
 * Test support, not library API: errors are printed to stderr. */
#ifndef TS_TEST_FIXTURE_H
#define TS_TEST_FIXTURE_H

#include <stdint.h>

#include "tensorscope.h"

#define FIXTURE_MAGIC "TSFIXTR"
#define FIXTURE_VERSION 1u

typedef struct fixture_entry {
    char *name;
    ts_array array; /* data owned by the fixture, 4-byte aligned */
} fixture_entry;

typedef struct fixture {
    char *path;
    uint32_t version;
    int n;
    fixture_entry *entries;
} fixture;

/* Reads and validates a whole fixture file; NULL (with a message on stderr
 * naming the path and the problem) when it is missing, truncated or corrupt. */
fixture *fixture_load(const char *path);
/* Same, from bytes in memory (`path` only names them in messages). */
fixture *fixture_parse(const void *bytes, size_t n, const char *path);
void fixture_free(fixture *f);
/* The entry called `name`, or NULL. */
const ts_array *fixture_get(const fixture *f, const char *name);
/* How many of must[0..n_must) occur in x[0..n): the cases a fixture of bit
 * patterns promises (a smaller set would pass a test vacuously). */
int fixture_count_present(const uint32_t *x, int64_t n, const uint32_t *must, size_t n_must);

/* Compares got[0..n) with want[0..n) elementwise: an element matches when
 * |got - want| <= atol + rtol * |want| (NumPy's allclose; NaN never matches).
 * Prints `what max_abs=... max_rel=... OK|MISMATCH` (max_rel over elements
 * with want != 0; on a mismatch also the count and the worst element) and
 * returns 0 when all match, 1 otherwise. */
int ts_expect_close(const char *what, const float *got, const float *want, int64_t n,
                    double rtol, double atol);

/* ts_expect_close on two f32 arrays after checking dtypes and shapes. A
 * `want` with fewer rows than `got` (same trailing dims) is compared with
 * got's first rows: the fixtures keep only the leading rows of big
 * parameter snapshots. Returns 0 on a match, 1 otherwise (with a line). */
int ts_expect_array_close(const char *what, const ts_array *got, const ts_array *want,
                          double rtol, double atol);

#endif
