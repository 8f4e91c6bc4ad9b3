/* cmd_train_dump.c -- `train --dump-debug DIR [--dump-steps A:B]
 * [--dump-ops GLOB] [--grads] [--dump-limit SIZE]`: the offline debugger
 * dump (ts_options_set_dump_debug, docs/cli.md#debugger-dump), its plan
 * stated before training and refused over the limit. */
#include "cli.h"

#include <stdio.h>

int cli_dump_debug_options(const char *cmd, const cli_dump_debug *d, ts_options *o) {
    bool given = d->steps || d->ops || d->grads;
    if (!d->dir) {
        if (given)
            return cli_usage_error(cmd, "%s says what --dump-debug DIR writes: give the directory too",
                                   d->steps ? "--dump-steps" : d->ops ? "--dump-ops" : "--grads");
        return CLI_OK;
    }
    int64_t first = 1, last = 0;
    int rc = d->steps ? cli_parse_step_range(cmd, "--dump-steps", d->steps, &first, &last) : CLI_OK;
    if (rc) return rc;
    if (ts_dist_rank() != 0) return CLI_OK; /* rank 0 dumps: one directory, one writer */
    if (ts_options_set_dump_debug(o, d->dir, first, last, d->ops, d->grads, d->limit))
        return cli_usage_error(cmd, "--dump-debug %s: %s", d->dir, ts_last_error());
    return CLI_OK;
}

int cli_dump_debug_plan(const char *cmd, ts_model *m, const cli_dump_debug *d, long last_run, bool quiet) {
    if (!d->dir || ts_dist_rank() != 0) return CLI_OK;
    int64_t tensors = 0, steps = 0, bytes = 0;
    if (ts_model_dump_debug_plan(m, last_run, &tensors, &steps, &bytes)) return cli_usage_error(cmd, "%s", ts_last_error());
    if (!tensors) return cli_usage_error(cmd, "--dump-ops %s matches no tensor of the model ('tensorscope names' lists them)", d->ops ? d->ops : "");
    if (!steps)
        return cli_usage_error(cmd, "--dump-steps %s: training makes %ld runs, none of them in the range", d->steps ? d->steps : "", last_run);
    if (!quiet)
        fprintf(stderr, "--dump-debug: %lld tensors x %lld steps = %.1f MiB planned into %s (limit %s)\n", (long long)tensors, (long long)steps,
                (double)bytes / 1048576.0, d->dir, d->limit ? d->limit_text : "none");
    return CLI_OK;
}
