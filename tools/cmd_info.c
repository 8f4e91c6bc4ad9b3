/* cmd_info.c -- `--version` and `info [--device DEVICE]`: the build, and
 * the devices this machine offers it, for users and bug reports. */
#include "cli.h"

int cmd_version(void) {
    printf("tensorscope %s\nfeatures: %s\ninspector line editing: %s\ncpu instructions: %s\n", ts_version(), ts_features(),
           cli_line_editing(), ts_cpu_features());
    return CLI_OK;
}

int cmd_info(int argc, char **argv) {
    const char *device = NULL;
    const cli_flag flags[] = {{"--device", FLAG_STRING, &device, "DEVICE", "describe only this device (cpu, cuda, cuda:N): exit 1 when it is not here"},
                              {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help;
    int rest;
    int rc = cli_parse("info", "[--device DEVICE]", flags, argc, argv, 2, &rest, &help);
    if (rc || help) return rc;
    if (rest < argc) return cli_usage_error("info", "takes no arguments after '--'");
    char line[1024];
    if (device) {
        ts_status st = ts_device_describe(device, line, sizeof line);
        if (st) return st == TS_ERR_INVALID_ARGUMENT ? cli_usage_error("info", "--device: %s", ts_last_error()) : cli_runtime_error("--device");
        printf("%s\n", line);
        return CLI_OK;
    }
    cmd_version();
    if (ts_device_describe("cpu", line, sizeof line)) return cli_runtime_error("cpu");
    char gpus[8192];
    if (ts_gpus_describe(gpus, sizeof gpus, NULL)) return cli_runtime_error("cuda");
    printf("%s\n%s", line, gpus);
    return CLI_OK;
}
