/* progress.c -- a one-line progress bar on stderr: rate, ETA, current loss.
 * Off when stderr is not a terminal (logs and CI stay clean) or --quiet.
 * Redrawn at most CLI_PROGRESS_HZ times a second, and at the last item. */
#include "cli.h"

#include <time.h>
#include <unistd.h>

double cli_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void cli_progress_start(cli_progress *p, bool enabled, const char *label, long total) {
    p->on = enabled && isatty(STDERR_FILENO);
    p->label = label;
    p->total = total;
    p->done = 0;
    p->last_width = 0;
    p->written = 0;
    p->last_draw = -1.0; /* the first update draws */
    p->out = stderr;
    p->clock = cli_now; /* a test sets its own clock, and t0 from it */
    p->t0 = p->clock();
}

void cli_progress_update(cli_progress *p, long done, double loss) {
    if (!p->on) return;
    p->done = done;
    double now = p->clock();
    if (p->last_draw >= 0 && done < p->total && now - p->last_draw < 1.0 / CLI_PROGRESS_HZ) return; /* and the last one */
    p->last_draw = now;
    double el = now - p->t0, rate = el > 0 ? (double)done / el : 0;
    double eta = rate > 0 ? (double)(p->total - done) / rate : 0;
    int width = 30, fill = p->total ? (int)((long)width * done / p->total) : 0;
    char bar[32];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(p->out, "\r%s [%s] %ld/%ld %.1f it/s ETA %.0fs loss %.4f ", p->label, bar, done, p->total, rate, eta, loss);
    if (p->written > 0) fprintf(p->out, "dumps %.1f MB ", (double)p->written / 1e6);
    fflush(p->out);
}

void cli_progress_end(cli_progress *p) {
    if (!p->on) return;
    fprintf(p->out, "\r%*s\r", 100, "");
    fflush(p->out);
}

void cli_quiet_logs(void) {
    if (!getenv("TS_LOG_LEVEL") && ts_get_log_level() > TS_LOG_WARN) ts_set_log_level(TS_LOG_WARN);
}
