/* env.c -- the library's environment variables, parsed strictly: a value
 * that is not understood is warned about, never silently taken for
 * something else (docs/observation.md lists the variables). */
#include "core.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool ts_parse_bool(const char *s, bool *out) {
    static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < TS_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) return *out = true, true;
        if (strcasecmp(s, no[i]) == 0) return *out = false, true;
    }
    return false;
}

bool ts_env_flag(const char *name) {
    const char *v = getenv(name);
    bool on = false;
    if (!v || !*v) return false;
    if (!ts_parse_bool(v, &on))
        ts_logf(TS_LOG_WARN, "%s='%s' is not a boolean (use 1/0, true/false, yes/no or on/off); taken as off", name, v);
    return on;
}

bool ts_parse_log_level(const char *s, int *out) {
    static const char *names[] = {"off", "error", "warn", "info", "debug", "trace"};
    for (int i = 0; i < (int)TS_ARRAY_LEN(names); i++)
        if (strcasecmp(s, names[i]) == 0 || (s[0] == '0' + i && s[1] == '\0')) return *out = i, true;
    if (strcasecmp(s, "warning") == 0) return *out = TS_LOG_WARN, true;
    return false;
}
