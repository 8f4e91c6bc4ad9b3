/* test_limits.c -- the limits on reading untrusted files (ts_set_limit):
 * defaults, the environment variables read at first use, a value set by
 * the API winning over the environment, sizes parsed like the CLI's, bad
 * values refused (0, an unknown limit, nonsense in the environment warned
 * about and the default kept), and the refusal message naming the limit
 * and how to raise it. */
#include "check.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

static int warnings;
static void capture(void *user, int level, const char *msg) {
    (void)user, (void)msg;
    if (level == TS_LOG_WARN) warnings++;
}

int main(void) {
    ts_set_log_callback(capture, NULL);
    uint64_t v = 0;
    CHECK(ts_parse_size("4096", &v) == TS_OK && v == 4096, "4096 -> %llu", (unsigned long long)v);
    CHECK(ts_parse_size("1.5K", &v) == TS_OK && v == 1536, "1.5K -> %llu", (unsigned long long)v);
    CHECK(ts_parse_size("512MB", &v) == TS_OK && v == 512ull << 20, "512MB -> %llu", (unsigned long long)v);
    CHECK(ts_parse_size("2g", &v) == TS_OK && v == 2ull << 30, "2g -> %llu", (unsigned long long)v);
    CHECK(ts_parse_size("1T", &v) == TS_OK && v == 1ull << 40, "1T -> %llu", (unsigned long long)v);
    const char *bad[] = {"", "G", "-1", "1X", "1GG", "nan", "1e30", "12 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(ts_parse_size(bad[i], &v) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "not a size"),
              "'%s' is refused: %s", bad[i], ts_last_error());

    /* nonsense in the environment: warned about, the default kept */
    setenv("TS_MAX_IMPORT_BYTES", "lots", 1);
    CHECK(ts_get_limit(TS_LIMIT_IMPORT_BYTES) == 1ull << 30, "import limit defaults to 1 GiB with a bad variable");
    CHECK(warnings == 1, "the bad TS_MAX_IMPORT_BYTES is warned about once (%d warnings)", warnings);
    /* a good value in the environment is read at first use */
    setenv("TS_MAX_ARCHIVE_BYTES", "3M", 1);
    CHECK(ts_get_limit(TS_LIMIT_ARCHIVE_BYTES) == 3ull << 20, "TS_MAX_ARCHIVE_BYTES=3M is read");
    /* the API wins over the environment */
    CHECK_OK(ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, 12345), "set the archive limit");
    CHECK(ts_get_limit(TS_LIMIT_ARCHIVE_BYTES) == 12345, "the set value is kept");
    CHECK(ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, 0) == TS_ERR_INVALID_ARGUMENT, "a limit of 0 is refused");
    CHECK(ts_get_limit(TS_LIMIT_ARCHIVE_BYTES) == 12345, "a refused value changes nothing");
    CHECK(ts_set_limit((ts_limit)7, 10) == TS_ERR_INVALID_ARGUMENT, "an unknown limit is refused");
    CHECK(ts_get_limit((ts_limit)7) == 0, "an unknown limit reads as 0");

    /* the refusal names what, how much, the limit and both ways to raise it */
    ts_status s = ts_limit_exceeded(TS_LIMIT_ARCHIVE_BYTES, "member 'x' of a.npz", 99999);
    const char *m = ts_last_error();
    CHECK(s == TS_ERR_FORMAT && strstr(m, "member 'x' of a.npz") && strstr(m, "99999") && strstr(m, "12345") &&
              strstr(m, "TS_MAX_ARCHIVE_BYTES") && strstr(m, "TS_LIMIT_ARCHIVE_BYTES"),
          "refusal message: %s", m);
    return check_summary("test_limits");
}
