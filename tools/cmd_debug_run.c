/* cmd_debug_run.c -- `debug-run --outfile F.tar.gz [--tidy] [--timeout S]
 * [--watch-memory[=MS]] -- CMD ...` */
#include "cli.h"

#include <signal.h>

int cmd_debug_run(int argc, char **argv) {
    const char *outfile = NULL;
    bool tidy = false;
    double timeout = 0;
    long watch_memory = -1; /* --watch-memory[=MS]: -1 off, 0 the default period */
    const cli_flag flags[] = {{"--outfile", FLAG_STRING, &outfile, "F.tar.gz", "archive to write (required)"},
                              {"--tidy", FLAG_BOOL, &tidy, NULL, "remove the work directory afterwards"},
                              {"--timeout", FLAG_FLOAT, &timeout, "S", "kill the command after S seconds"},
                              {"--watch-memory", FLAG_OPT_INT, &watch_memory, "[=MS]",
                               "sample RSS/PSS/USS of the command and its children every MS ms (default 100); the peak is logged at the end"},
                              {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help;
    int rest;
    int rc = cli_parse("debug-run", "--outfile F.tar.gz [--tidy] [--timeout S] [--watch-memory[=MS]] -- CMD ...", flags, argc, argv, 2, &rest, &help);
    if (rc || help) return rc;
    if (!outfile) return cli_usage_error("debug-run", "--outfile F.tar.gz is required");
    if (timeout < 0) return cli_usage_error("debug-run", "--timeout must be >= 0");
    if (rest >= argc) return cli_usage_error("debug-run", "give the command to run after '--'");
    const cli_need needs[] = {{"debug-run", "debug-bundle"}};
    if ((rc = cli_need_features("debug-run", needs, 1))) return rc;
    int status = 0, interrupted = 0;
    ts_debug_run_config c = {.outfile = outfile, .argv = argv + rest, .tidy = tidy, .timeout_s = timeout, .interrupted = &interrupted};
    if (watch_memory >= 0 && ts_memwatch_start((int)watch_memory)) return cli_runtime_error("debug-run --watch-memory");
    ts_status st = ts_debug_run(&c, &status);
    ts_memwatch_stop(); /* logs the peak over this process and the command's */
    if (st) { /* the library's messages name debug-run already */
        fprintf(stderr, "tensorscope: %s\n", ts_last_error());
        return CLI_RUNTIME;
    }
    if (interrupted) { /* Ctrl-C: forwarded to the command, what exists archived */
        fprintf(stderr, "tensorscope: debug-run interrupted by %s: the command was stopped (exit status %d); debug bundle written to %s\n",
                interrupted == SIGINT ? "SIGINT" : interrupted == SIGTERM ? "SIGTERM" : "SIGHUP", status, outfile);
        return 128 + interrupted; /* 130, 143: what shells expect */
    }
    fprintf(stderr, "tensorscope: debug bundle written to %s (command exit status %d)\n", outfile, status);
    return status == 0 ? CLI_OK : CLI_RUNTIME;
}
