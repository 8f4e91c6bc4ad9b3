/* fuzz_cli_args.c -- the CLI's flag parser (tools/args.c: cli_parse with
 * flags of every kind) and what parses flag values: the NAME[:MODE[:N]]
 * anchor spec, MODE[:N] output modes, sizes and A:B step ranges. The parser returns usage
 * errors, never exits; any argv gives OK or a usage error, never a crash, and
 * what it stores is within range. Run with -close_fd_mask=3 (the usage
 * messages go to stdout / stderr).
 *
 * Input: the arguments after `tensorscope train`, separated by NUL bytes. */
#include <limits.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    static char buf[4097];
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[80] = {"tensorscope", "train"};
    int argc = 2;
    for (char *p = buf; p <= buf + size && argc < 79;) {
        argv[argc++] = p;
        p += strlen(p) + 1;
    }
    argv[argc] = NULL;

    long n = 0;
    double x = 0;
    bool b = false;
    const char *str = NULL, *mode = NULL, *size_text = NULL, *steps = NULL;
    cli_list list = {0};
    const cli_flag flags[] = {{"--epochs", FLAG_INT, &n, "N", "an integer"},
                              {"--lr", FLAG_FLOAT, &x, "LR", "a number"},
                              {"--quiet", FLAG_BOOL, &b, NULL, "a switch"},
                              {"--data", FLAG_STRING, &str, "DIR", "a string"},
                              {"--output-mode", FLAG_STRING, &mode, "MODE[:N]", "a mode"},
                              {"--dump-limit", FLAG_STRING, &size_text, "SIZE", "a size"},
                              {"--trace-steps", FLAG_STRING, &steps, "A:B", "a step range"},
                              {"--anchor", FLAG_LIST, &list, "NAME[:MODE[:N]]", "a list"},
                              {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help = false;
    int rest = 0;
    int rc = cli_parse("train", "[flags]", flags, argc, argv, 2, &rest, &help);
    if (rc != CLI_OK && rc != CLI_USAGE) __builtin_trap();
    if (rest < 2 || rest > argc || list.n < 0 || list.n > 64) __builtin_trap();
    if (rc || help) return 0;
    if (str && !*str) __builtin_trap(); /* empty values are refused */
    for (int i = 0; i < list.n; i++) {
        char name[512];
        ts_output_mode m;
        int period;
        if (cli_parse_anchor("train", list.items[i], name, sizeof name, &m, &period) == CLI_OK) {
            if (!name[0] || strlen(name) >= sizeof name || period < 0 || (int)m < 0 || (int)m > TS_OUTPUT_SUM)
                __builtin_trap();
            if (!strstr(list.items[i], name)) __builtin_trap(); /* the name is part of the spec */
        }
    }
    if (mode) {
        ts_output_mode m;
        int period;
        if (cli_parse_output_mode("train", mode, &m, &period) == CLI_OK && period < 0) __builtin_trap();
    }
    long long bytes;
    if (size_text && cli_parse_size(size_text, &bytes) == 0 && bytes < 0) __builtin_trap();
    int64_t first = 0, last = -1;
    if (steps && cli_parse_step_range("train", "--trace-steps", steps, &first, &last) == CLI_OK && (first < 1 || (last != 0 && last < first)))
        __builtin_trap(); /* a range accepted is one ts_options_set_trace takes */
    return 0;
}
