/* test_crc32c.c -- CRC-32C against published vectors and a bitwise
 * reference, TFRecord masking against values computed by TensorBoard's own
 * Python code, and the framing of a real event file read back by hand. */
/* needs: tensorboard */
#include "files.h"
#include "check.h"
#include "core/core.h"
#include "core/crc32c.h"
#include "io/tfrecord.h"
#include "tensorboard.pb-c.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One bit at a time, straight from the definition: the oracle for the
 * table-driven code. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_vectors(void) {
    uint8_t b[32];
    CHECK(ts_crc32c("123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = 0xE3069283");
    memset(b, 0, sizeof b);
    CHECK(ts_crc32c(b, 32) == 0x8A9136AAu, "crc32c(32 x 0x00) = 0x8A9136AA");
    memset(b, 0xFF, sizeof b);
    CHECK(ts_crc32c(b, 32) == 0x62A8AB43u, "crc32c(32 x 0xFF) = 0x62A8AB43");
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(ts_crc32c(b, 32) == 0x46DD794Eu, "crc32c(0..31) = 0x46DD794E");
    CHECK(ts_crc32c("", 0) == 0, "crc32c of nothing = 0");

    /* every length and split point exercises the 8-byte and 1-byte paths */
    uint8_t r[203];
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof r; i++) {
        s = s * 1103515245u + 12345u;
        r[i] = (uint8_t)(s >> 16);
    }
    int bad_len = 0, bad_split = 0;
    for (size_t n = 0; n <= sizeof r; n++)
        if (ts_crc32c(r + 1, n - (n == sizeof r)) != crc32c_bitwise(r + 1, n - (n == sizeof r)))
            bad_len++;
    for (size_t k = 0; k <= sizeof r; k++)
        if (ts_crc32c_extend(ts_crc32c(r, k), r + k, sizeof r - k) != crc32c_bitwise(r, sizeof r))
            bad_split++;
    CHECK(bad_len == 0, "table-driven = bitwise reference for lengths 0..203, unaligned (%d bad)",
          bad_len);
    CHECK(bad_split == 0, "crc32c_extend(crc32c(a), b) = crc32c(a b) at every split (%d bad)",
          bad_split);
}

static void test_mask(void) {
    /* expected values from tensorboard.compat.tensorflow_stub's masked_crc32c */
    CHECK(ts_crc32c_mask(0xE3069283u) == 0xC78AB0E5u, "mask(crc32c(\"123456789\")) = 0xC78AB0E5");
    CHECK(ts_crc32c_mask(0) == 0xA282EAD8u, "mask(0) = 0xA282EAD8");
    uint8_t hdr[TS_TFRECORD_HEADER];
    ts_tfrecord_header(hdr, 8);
    CHECK(get_u32(hdr + 8) == 0x0F2486FFu, "header of an 8-byte record has masked crc 0x0F2486FF");
    uint32_t xs[] = {0, 1, 0x80000000u, 0xFFFFFFFFu, 0xE3069283u, 0x12345678u};
    int bad = 0;
    for (size_t i = 0; i < TS_ARRAY_LEN(xs); i++)
        if (ts_crc32c_unmask(ts_crc32c_mask(xs[i])) != xs[i]) bad++;
    CHECK(bad == 0, "unmask(mask(x)) = x (%d bad)", bad);
}

/* Walks the records with nothing but ts_crc32c, then with ts_tfrecord_next,
 * and decodes the first as Event{file_version}. */
static void test_framing(void) {
    char dir[] = "/tmp/ts_crc32c_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char logdir[64];
    snprintf(logdir, sizeof logdir, "%s/a/b", dir);
    ts_tb_writer *w = NULL;
    time_t t0 = time(NULL);
    CHECK_OK(ts_tb_open(&w, logdir), "ts_tb_open creates %s and its parent", logdir);
    if (!w) return;
    char path[512];
    snprintf(path, sizeof path, "%s", ts_tb_path(w));
    CHECK_OK(ts_tb_scalar(w, "loss", 7, 0.5), "ts_tb_scalar");
    CHECK_OK(ts_tb_close(w), "ts_tb_close");

    size_t len = 0;
    uint8_t *buf = (uint8_t *)test_read_file(path, &len);
    CHECK(buf != NULL && len > 0, "event file %s read back (%zu bytes)", path, len);
    int records = 0, bad_crc = 0;
    size_t at = 0, first_at = 0, first_n = 0;
    while (buf && len - at >= 12) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | buf[at + (size_t)i];
        if (ts_crc32c_mask(ts_crc32c(buf + at, 8)) != get_u32(buf + at + 8)) bad_crc++;
        if (n > len - at - 16) {
            bad_crc++;
            break;
        }
        if (ts_crc32c_mask(ts_crc32c(buf + at + 12, (size_t)n)) != get_u32(buf + at + 12 + n))
            bad_crc++;
        if (records++ == 0) {
            first_at = at + 12;
            first_n = (size_t)n;
        }
        at += 16 + (size_t)n;
    }
    CHECK(records == 2 && at == len, "2 records fill the file exactly (%d, %zu of %zu bytes)",
          records, at, len);
    CHECK(bad_crc == 0, "both CRCs of every record match (%d bad)", bad_crc);

    size_t pos = 0, n = 0;
    const uint8_t *d = NULL;
    int seen = 0;
    ts_status st;
    while ((st = ts_tfrecord_next(buf, len, &pos, &d, &n, path)) == TS_OK && d) seen++;
    CHECK(st == TS_OK && seen == 2, "ts_tfrecord_next reads the same 2 records");

    TensorscopeTb__Event *ev =
        buf ? tensorscope_tb__event__unpack(NULL, first_n, buf + first_at) : NULL;
    CHECK(ev != NULL, "first record decodes as an Event");
    if (ev) {
        CHECK(ev->what_case == TENSORSCOPE_TB__EVENT__WHAT_FILE_VERSION &&
                  strcmp(ev->file_version, "brain.Event:2") == 0,
              "first record is file_version brain.Event:2");
        CHECK(ev->wall_time >= (double)t0 - 1 && ev->wall_time <= (double)time(NULL) + 1,
              "its wall_time is now (%.3f)", ev->wall_time);
        tensorscope_tb__event__free_unpacked(ev, NULL);
    }

    /* corruption and truncation are errors, never a crash */
    if (buf && len > 40) {
        buf[first_at + 2] ^= 0x10;
        pos = 0;
        CHECK(ts_tfrecord_next(buf, len, &pos, &d, &n, path) == TS_ERR_FORMAT,
              "a flipped data bit is a CRC error: %s", ts_last_error());
        buf[first_at + 2] ^= 0x10;
        buf[3] ^= 0x01;
        pos = 0;
        CHECK(ts_tfrecord_next(buf, len, &pos, &d, &n, path) == TS_ERR_FORMAT,
              "a flipped length bit is a CRC error: %s", ts_last_error());
        buf[3] ^= 0x01;
        pos = 0;
        CHECK(ts_tfrecord_next(buf, first_at + first_n + 3, &pos, &d, &n, path) ==
                  TS_ERR_FORMAT,
              "a truncated record is an error: %s", ts_last_error());
        pos = 0;
        CHECK(ts_tfrecord_next(buf, 5, &pos, &d, &n, path) == TS_ERR_FORMAT,
              "a truncated header is an error: %s", ts_last_error());
    }
    free(buf);
    unlink(path);
    rmdir(logdir);
    snprintf(logdir, sizeof logdir, "%s/a", dir);
    rmdir(logdir);
    rmdir(dir);
}

int main(void) {
    test_vectors();
    test_mask();
    test_framing();
    return check_summary("test_crc32c");
}
