/* corpus.c -- a text file as a character corpus: the vocabulary is its
 * distinct bytes in byte order, token ids index it; the last tenth is held
 * out. Windows of T+1 tokens are drawn at offsets from splitmix64 (the
 * generator a reference can reproduce: offset = next() % (n - T)). */
#include "core/core.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct ts_corpus {
    int32_t *ids;
    int64_t n, n_train;
    int vocab;
    char chars[257];
    int16_t id_of[256]; /* -1: not in the corpus */
};

void ts_corpus_free(ts_corpus *c) {
    if (!c) return;
    ts_free(c->ids);
    ts_free(c);
}

ts_status ts_corpus_load(ts_corpus **out, const char *path) {
    if (!out || !path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_corpus_load: NULL argument");
    *out = NULL;
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(file, sizeof file, "%s/input.txt", path);
    else snprintf(file, sizeof file, "%s", path);
    FILE *f = fopen(file, "rb");
    if (!f) return ts_error(TS_ERR_IO, "cannot open the text corpus '%s' (a text file, or a directory holding input.txt)", file);
    ts_corpus *c = ts_calloc(1, sizeof *c);
    unsigned char *buf = NULL;
    long len = -1;
    if (c && fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0) buf = ts_malloc((size_t)len + 1);
    ts_status s = TS_OK;
    if (!c || !buf) s = len < 0 ? ts_error(TS_ERR_IO, "cannot read '%s'", file) : TS_ERR_OUT_OF_MEMORY;
    else if (fread(buf, 1, (size_t)len, f) != (size_t)len) s = ts_error(TS_ERR_IO, "cannot read '%s'", file);
    else if (len < 1) s = ts_error(TS_ERR_FORMAT, "'%s' is empty: a corpus needs text", file);
    fclose(f);
    if (!s && !(c->ids = ts_malloc((size_t)len * sizeof *c->ids))) s = TS_ERR_OUT_OF_MEMORY;
    if (s) {
        ts_free(buf);
        ts_corpus_free(c);
        return s;
    }
    bool seen[256] = {false};
    for (long i = 0; i < len; i++) seen[buf[i]] = true;
    for (int b = 0; b < 256; b++) {
        c->id_of[b] = (int16_t)(seen[b] ? c->vocab : -1);
        if (seen[b]) c->chars[c->vocab++] = (char)b;
    }
    for (long i = 0; i < len; i++) c->ids[i] = c->id_of[buf[i]];
    ts_free(buf);
    c->n = len;
    c->n_train = len - len / 10;
    *out = c;
    return TS_OK;
}

int ts_corpus_vocab_size(const ts_corpus *c) { return c ? c->vocab : 0; }
const char *ts_corpus_vocab(const ts_corpus *c) { return c ? c->chars : NULL; }

int64_t ts_corpus_length(const ts_corpus *c, int held_out) {
    if (!c) return 0;
    return held_out ? c->n - c->n_train : c->n_train;
}

ts_status ts_corpus_sample(const ts_corpus *c, int held_out, int64_t batch, int64_t T, uint64_t *rng, int32_t *x, int32_t *y) {
    if (!c || !rng || !x || !y || batch < 1 || T < 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_corpus_sample: a corpus, a generator state, buffers and batch, T >= 1 are required");
    int64_t first = held_out ? c->n_train : 0, n = ts_corpus_length(c, held_out);
    if (n <= T)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_corpus_sample: the %s split has %lld tokens, fewer than a window of T+1 = %lld",
                        held_out ? "held-out" : "training", (long long)n, (long long)T + 1);
    for (int64_t b = 0; b < batch; b++) {
        int64_t off = first + (int64_t)(ts_splitmix64(rng) % (uint64_t)(n - T));
        memcpy(x + b * T, c->ids + off, (size_t)T * sizeof *x);
        memcpy(y + b * T, c->ids + off + 1, (size_t)T * sizeof *y);
    }
    return TS_OK;
}

ts_status ts_corpus_window(const ts_corpus *c, int held_out, int64_t offset, int64_t T, int32_t *x, int32_t *y) {
    int64_t first = held_out ? c->n_train : 0, n = ts_corpus_length(c, held_out);
    if (!c || !x || !y || T < 1 || offset < 0 || offset + T >= n)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_corpus_window: the window [%lld, %lld] is not inside the split", (long long)offset,
                        (long long)(offset + T));
    memcpy(x, c->ids + first + offset, (size_t)T * sizeof *x);
    memcpy(y, c->ids + first + offset + 1, (size_t)T * sizeof *y);
    return TS_OK;
}

ts_status ts_corpus_encode(const ts_corpus *c, const char *text, int32_t *ids, int64_t *n) {
    if (!c || !text || !ids || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_corpus_encode: NULL argument");
    int64_t k = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (c->id_of[*p] < 0)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "the character '%c' (byte %d) at position %lld is not in the corpus's vocabulary",
                            *p >= 0x20 && *p < 0x7f ? *p : '?', *p, (long long)(p - (const unsigned char *)text));
        ids[k++] = c->id_of[*p];
    }
    *n = k;
    return TS_OK;
}
