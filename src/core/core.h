/* core.h -- what every layer of the library shares: errors, memory, logs,
 * small string helpers. Internal: nothing here is API. */
#ifndef TS_CORE_H
#define TS_CORE_H

#define TS_NO_SOURCE_LOCATIONS /* the library defines the builder functions */
#include "tensorscope.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
#define TS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TS_UNUSED __attribute__((unused))
#else
#define TS_PRINTF(a, b)
#define TS_UNUSED
#endif

#define TS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A float's bits, and the float of bits (memcpy: no aliasing rules broken). */
static inline uint32_t ts_float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float ts_bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Sets this thread's last error and returns `code`, so a failure reads
 * `return ts_error(TS_ERR_SHAPE, "...%s", name);`. */
ts_status ts_error(ts_status code, const char *fmt, ...) TS_PRINTF(2, 3);
/* Prepends "context: " to the current last error (keeps the code). */
ts_status ts_error_wrap(ts_status code, const char *fmt, ...) TS_PRINTF(2, 3);

/* Allocation through the user's allocator. Failures set the last error. */
void *ts_malloc(size_t n);
void *ts_calloc(size_t count, size_t size);
void *ts_realloc(void *p, size_t n);
void ts_free(void *p);
char *ts_strdup(const char *s);
/* Grows *p (of *cap elements of `elem` bytes) to hold at least `need`. */
ts_status ts_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Logging through the user's callback; cheap when the level is off. Each
 * call's module is its source file's directory (src/import -> onnx,
 * src/backend/cuda -> cuda, ...), whose level TS_LOG_VMODULE may raise, as
 * it may the file's own (memwatch=4); TS_LOG_PREFIX=1 puts the time and
 * the call's file:line before the message. */
#define TS_LOG_MODULES 13
void ts_logf_at(const char *file, int line, int level, const char *fmt, ...) TS_PRINTF(4, 5);
void ts_logf_in(const char *file, int level, const char *fmt, ...) TS_PRINTF(3, 4); /* no line */
bool ts_log_enabled_in(const char *file, int level);
void ts_log_message_at(const char *file, int line, int level, const char *msg);
void ts_log_message_in(const char *file, int level, const char *msg);
#define ts_logf(...) ts_logf_at(__FILE__, __LINE__, __VA_ARGS__)
#define ts_log_enabled(level) ts_log_enabled_in(__FILE__, level)
/* Hands a finished message of any length to the sink as it is. */
#define ts_log_message(level, msg) ts_log_message_at(__FILE__, __LINE__, level, msg)
/* The module of a source file (0..TS_LOG_MODULES-1; -1 outside src/) and
 * its name as users write it ("onnx"). */
int ts_log_module_of(const char *file);
const char *ts_log_module_name(int module);
/* A print op's output: shown unless logs are off, handed to a callback at
 * TS_LOG_PRINT and tagged `[tensorscope print]` on stderr. */
void ts_log_print(const char *msg);

/* Text safe to show on a terminal (escape.c): C0 controls other than \n
 * and \t, DEL and bytes that are not UTF-8 become `\x1b`, the C1 controls
 * (U+0080..U+009F) `\u009b`; valid UTF-8 (μ, σ, ∈) stays as it is. Every
 * last-error message and log line goes through it, so a name from a model
 * file cannot drive the user's terminal. ts_escape_text writes at most
 * cap - 1 bytes and a NUL (never half an escape) and returns the length
 * the whole text needs, as snprintf does. Escaping is idempotent. */
bool ts_text_needs_escape(const char *s);
/* Bytes of the valid UTF-8 character at s (1 for ASCII), 0 when it is not
 * one (overlong forms, surrogates, past U+10FFFF, a cut sequence). */
size_t ts_utf8_len(const char *s);
size_t ts_escape_text(char *dst, size_t cap, const char *src);

/* Environment values, parsed strictly (env.c). ts_parse_bool takes
 * 1/0, true/false, yes/no, on/off (any case); ts_parse_log_level takes 0-5
 * or off/error/warn/info/debug/trace. ts_env_flag reads a boolean variable:
 * unset or empty is off, anything else not understood is warned about and
 * taken as off. */
bool ts_parse_bool(const char *s, bool *out);
bool ts_parse_log_level(const char *s, int *out);
bool ts_env_flag(const char *name);
/* Opens `path` for reading only if it is a regular file, not a symbolic
 * link (a FIFO is refused at once, not waited on): *fd (the caller closes it) and the file's real
 * size, what every reader of untrusted files checks a stated size against
 * before allocating. `what` (".npy file", "ONNX model") names the kind of
 * file in the errors. ts_file_fopen_read: the same as a stdio stream. */
ts_status ts_file_open_read(const char *path, const char *what, int *fd, uint64_t *size);
ts_status ts_file_fopen_read(const char *path, const char *what, FILE **f, uint64_t *size);
/* The refusal when reading a file would pass a limit (ts_set_limit):
 * TS_ERR_FORMAT saying what needed how many bytes, the limit, and how to
 * raise it. `what` is e.g. "folding ConstantOfShape node 'x'". */
ts_status ts_limit_exceeded(ts_limit which, const char *what, uint64_t need);
/* The refusal of a feature this build lacks (features.c): always
 * TS_ERR_UNSUPPORTED naming the library and the package to install. For
 * the *_none.c stand-ins of the optional features. */
ts_status ts_feature_unsupported(const char *name);

/* A device as the user names it (names.c): "cpu", "cuda", "cuda:N"
 * (N < 1024) and, for tests, "cpu-staged" (the device path on the CPU).
 * TS_ERR_INVALID_ARGUMENT listing the choices for anything else. */
typedef enum ts_device_kind { TS_DEVICE_CPU, TS_DEVICE_CPU_STAGED, TS_DEVICE_CUDA } ts_device_kind;
ts_status ts_device_name_parse(const char *name, ts_device_kind *kind, int *ordinal);

/* Edit distance, for "did you mean" suggestions. */
size_t ts_edit_distance(const char *a, const char *b);
/* The (up to) three of n names closest to `name`, quoted and
 * comma-separated into buf: `'fc1/Add:0', 'fc1/MatMul:0', 'fc1.bias'`. */
typedef const char *(*ts_name_at)(const void *ctx, size_t i);
const char *ts_closest_names(const char *name, ts_name_at get, const void *ctx, size_t n, char *buf, size_t cap);
/* Whether two names differ only by a module prefix: after the same
 * `Kind___` head (Gradient___, ...), one's rest is the other's with whole
 * leading components before it (`model.fc2.bias` and `fc2.bias`,
 * `net/fc1/Relu:0` and `fc1/Relu:0`). Equal names are not. */
bool ts_name_differs_by_prefix(const char *a, const char *b);
/* How many of n names `name` equals but for a module prefix: one is in
 * *hit, with one log line saying which (`what` names the lookup); several
 * set a TS_ERR_NOT_FOUND error listing them; none sets no error (the caller
 * says what it looked for). */
size_t ts_name_resolve_prefix(const char *what, const char *name, ts_name_at get, const void *ctx, size_t n, size_t *hit);

/* Element i of an array of any dtype, as a double (NaN for an unknown dtype). */
double ts_array_value(const ts_array *a, int64_t i);
/* Writes v (which ts_dtype_holds for the array's dtype) at element i. */
void ts_array_set_value(ts_array *a, int64_t i, double v);
bool ts_dtype_is_integer(ts_dtype t); /* the integer dtypes and bool */
/* Whether v is exact in t: an integer within t's range (0 or 1 for bool),
 * for f32 a NaN, an infinity or a value within f32's range, any for f64,
 * bf16 and f16 (rounded to nearest even as a cast does). */
bool ts_dtype_holds(ts_dtype t, double v);
/* How many of x[0..n) are NaN or infinite. */
int64_t ts_f32_nonfinite(const float *x, int64_t n);
/* String -> int map for name lookups (strmap.c). Keys are borrowed: keep
 * each key string alive, unchanged, while it is in the map. Zero-initialise. */
typedef struct ts_strmap {
    size_t cap, n, used; /* used counts removed slots too */
    struct ts_strmap_slot {
        const char *key;
        uint64_t hash;
        int value;
    } *slots;
} ts_strmap;
uint64_t ts_strmap_hash(const char *s);
int ts_strmap_get(const ts_strmap *m, const char *key); /* -1 when absent */
ts_status ts_strmap_put(ts_strmap *m, const char *key, int value); /* inserts or replaces */
void ts_strmap_del(ts_strmap *m, const char *key);
void ts_strmap_free(ts_strmap *m);

/* splitmix64: the next 64 random bits of *state (rng.c). */
uint64_t ts_splitmix64(uint64_t *state);

/* Monotonic clock in nanoseconds. */
uint64_t ts_now_ns(void);

/* A tensor's shape: the graph's vocabulary, which every layer (the
 * timeline's slices too, core/trace.h) passes around. */
typedef struct ts_shape {
    int ndim;
    int64_t d[TS_MAX_DIMS];
} ts_shape;

#endif
