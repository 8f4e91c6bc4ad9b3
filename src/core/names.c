/* names.c -- matching tensor names against user patterns; the devices a
 * user names. */
#include "core.h"

#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ts_name_matches(const char *pattern, const char *name) {
    if (!pattern || !name) return 0;
    if (strpbrk(pattern, "*?[")) return fnmatch(pattern, name, 0) == 0;
    return strcmp(name, pattern) == 0;
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

const char *ts_closest_names(const char *name, ts_name_at get, const void *ctx, size_t n, char *buf, size_t cap) {
    size_t best[3], dist[3] = {(size_t)-1, (size_t)-1, (size_t)-1};
    for (size_t i = 0; i < n; i++) {
        size_t d = ts_edit_distance(name, get(ctx, i));
        for (int k = 0; k < 3; k++)
            if (d < dist[k]) {
                for (int j = 2; j > k; j--) dist[j] = dist[j - 1], best[j] = best[j - 1];
                dist[k] = d, best[k] = i;
                break;
            }
    }
    size_t used = 0;
    if (cap) buf[0] = '\0';
    for (int k = 0; k < 3 && dist[k] != (size_t)-1 && used < cap; k++)
        used += (size_t)snprintf(buf + used, cap - used, "%s'%s'", k ? ", " : "", get(ctx, best[k]));
    return buf;
}

/* The length of a name's `Kind___` head (0 when none). */
static size_t head_len(const char *name) {
    size_t n = 0;
    for (const char *p = strstr(name, "___"); p; p = strstr(p + 1, "___")) n = (size_t)(p - name) + 3;
    return n;
}

bool ts_name_differs_by_prefix(const char *a, const char *b) {
    size_t ha = head_len(a), hb = head_len(b);
    if (ha != hb || strncmp(a, b, ha) != 0) return false;
    const char *ra = a + ha, *rb = b + hb;
    size_t la = strlen(ra), lb = strlen(rb);
    if (la == lb || !la || !lb) return false;
    const char *lng = la > lb ? ra : rb, *shrt = la > lb ? rb : ra;
    size_t cut = (la > lb ? la : lb) - (la > lb ? lb : la);
    return (lng[cut - 1] == '.' || lng[cut - 1] == '/') && strcmp(lng + cut, shrt) == 0;
}

size_t ts_name_resolve_prefix(const char *what, const char *name, ts_name_at get, const void *ctx, size_t n, size_t *hit) {
    size_t found = 0, first = 0;
    char list[768];
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!ts_name_differs_by_prefix(name, get(ctx, i))) continue;
        if (!found++) first = i;
        if (used < sizeof list - 1)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", found > 1 ? ", " : "", get(ctx, i));
    }
    if (found > 1) {
        ts_error(TS_ERR_NOT_FOUND, "%s: '%s' is none of this model's names, and %zu differ from it only by a module prefix: %s; "
                        "give the one you mean in full", what, name, found, list);
        return found;
    }
    if (found) {
        *hit = first;
        ts_logf(TS_LOG_INFO, "%s: '%s' matched tensor '%s' (the names differ only by a module prefix)", what, name, get(ctx, first));
    }
    return found;
}

static const char *word_at(const void *words, size_t i) { return ((const char *const *)words)[i]; }

const char *ts_closest_words(const char *word, const char *const *words, size_t n, char *buf, size_t cap) {
    if (!buf || !cap) return buf;
    buf[0] = '\0';
    if (!word || !words) return buf;
    return ts_closest_names(word, word_at, words, n, buf, cap);
}

ts_status ts_device_name_parse(const char *name, ts_device_kind *kind, int *ordinal) {
    *kind = TS_DEVICE_CPU;
    *ordinal = 0;
    if (name && !strcmp(name, "cpu")) return TS_OK;
    if (name && !strcmp(name, "cpu-staged")) {
        *kind = TS_DEVICE_CPU_STAGED;
        return TS_OK;
    }
    if (name && !strncmp(name, "cuda", 4)) {
        const char *n = name + 4;
        long v = 0;
        bool ok = *n == 0;
        if (*n == ':') {
            char *end = NULL;
            v = n[1] >= '0' && n[1] <= '9' && strlen(n + 1) <= 4 ? strtol(n + 1, &end, 10) : -1;
            ok = v >= 0 && v < 1024 && end && *end == 0;
        }
        if (ok) {
            *kind = TS_DEVICE_CUDA;
            *ordinal = (int)v;
            return TS_OK;
        }
    }
    return ts_error(TS_ERR_INVALID_ARGUMENT, "device '%s' is not one tensorscope knows: the choices are cpu, cuda and cuda:N (N a GPU's number, 0 for the first)",
                    name ? name : "(null)");
}
