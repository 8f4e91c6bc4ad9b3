/* names.c -- matching tensor names against user patterns. */
#include "core.h"

#include <fnmatch.h>
#include <string.h>

bool ts_name_matches(const char *pattern, const char *name) {
    if (strpbrk(pattern, "*?["))
        return fnmatch(pattern, name, 0) == 0;
    return strstr(name, pattern) != NULL;
}

size_t ts_edit_distance(const char *a, const char *b) {
    size_t n = strlen(b), row[256];
    if (n >= TS_ARRAY_LEN(row)) n = TS_ARRAY_LEN(row) - 1;
    for (size_t j = 0; j <= n; j++) row[j] = j;
    for (size_t i = 1; a[i - 1]; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= n; j++) {
            size_t up = row[j];
            size_t sub = diag + (a[i - 1] != b[j - 1]);
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[n];
}
