/* cmd_stacks.c -- `stacks PID`: every thread's native stack of a running
 * tensorscope process (PyTorch/XLA's dump_stacks.py), through the crash
 * handler's SIGUSR1 dump, written into a file this command reads
 * (ts_process_stacks), so nobody needs to watch the other terminal. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int cmd_stacks(int argc, char **argv) {
    static const char usage[] = "PID [--timeout S]";
    double timeout = 30;
    const cli_flag flags[] = {{"--timeout", FLAG_FLOAT, &timeout, "S", "seconds to wait for the process's answer (default 30)"},
                              {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help;
    bool has_pid = argc > 2 && strncmp(argv[2], "-", 1) != 0;
    int rc = cli_parse("stacks", usage, flags, argc, argv, has_pid ? 3 : 2, NULL, &help);
    if (rc || help) return rc;
    if (!has_pid) return cli_usage_error("stacks", "give the process id of a running tensorscope process (e.g. tensorscope stacks $(pgrep -f 'tensorscope train'))");
    char *end;
    errno = 0;
    long pid = strtol(argv[2], &end, 10);
    if (errno || end == argv[2] || *end || pid < 1 || pid > INT_MAX) return cli_usage_error("stacks", "'%s' is not a process id", argv[2]);
    if (!(timeout > 0)) return cli_usage_error("stacks", "--timeout must be > 0 seconds, got %g", timeout);
    char *text = NULL;
    if (ts_process_stacks((int)pid, timeout, &text)) {
        fprintf(stderr, "tensorscope %s\n", ts_last_error());
        return CLI_RUNTIME;
    }
    fputs(text, stdout);
    ts_string_free(text);
    return CLI_OK;
}
