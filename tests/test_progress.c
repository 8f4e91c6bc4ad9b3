/* test_progress.c -- the CLI's progress bar (tools/progress.c) on a fake
 * clock: however fast updates come, redraws are at least 1/CLI_PROGRESS_HZ
 * s apart (at most 10 a second), the first update and the last item are
 * always drawn, slow updates are each drawn, and a bar that is off writes
 * nothing. (test_cli_ux.sh counts the redraws of real runs on a terminal,
 * training and evaluation.) */
#include "check.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

static double fake_t;
static double fake_clock(void) { return fake_t; }

typedef struct draws {
    double at[4096];
    int n;
    char last[256];
} draws;

/* Runs `total` updates `dt` apart on a bar writing to a temporary file and
 * records when a redraw happened (the file grew). */
static void run_bar(bool on, long total, double dt, draws *d) {
    FILE *f = tmpfile();
    CHECK(f != NULL, "a temporary file for the bar");
    if (!f) return;
    cli_progress p;
    cli_progress_start(&p, true, "epoch 1/1", total);
    p.on = on; /* start turns it off when stderr is not a terminal, as under ctest */
    p.out = f;
    p.clock = fake_clock;
    fake_t = 1000.0;
    p.t0 = fake_t;
    d->n = 0;
    long size = 0;
    for (long i = 1; i <= total; i++) {
        fake_t = 1000.0 + (double)i * dt;
        cli_progress_update(&p, i, 0.5);
        long now = ftell(f);
        if (now != size && d->n < 4096) d->at[d->n++] = fake_t;
        size = now;
    }
    /* the last redraw's text */
    d->last[0] = '\0';
    if (size > 0) {
        rewind(f);
        char buf[1 << 16];
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = '\0';
        const char *cr = strrchr(buf, '\r');
        snprintf(d->last, sizeof d->last, "%.255s", cr ? cr + 1 : buf);
    }
    fclose(f);
}

int main(void) {
    static draws d;
    const double min_gap = 1.0 / CLI_PROGRESS_HZ;

    /* 1000 updates a second for 2 s: ~20 redraws, never two within 0.1 s
     * (but the last item's) */
    run_bar(true, 2000, 0.001, &d);
    int close = 0;
    for (int i = 1; i + 1 < d.n; i++)
        if (d.at[i] - d.at[i - 1] < min_gap - 1e-9) close++;
    CHECK(d.n >= 19 && d.n <= 21 && close == 0, "2000 updates in 2 s: %d redraws (want 19..21), %d closer than %.2f s", d.n, close,
          min_gap);
    CHECK(d.n > 0 && d.at[0] == 1000.0 + 0.001, "the first update is drawn at once");
    CHECK(d.n > 0 && d.at[d.n - 1] == 1000.0 + 2000.0 * 0.001, "the last item is drawn even within 0.1 s of the previous redraw");
    CHECK(strstr(d.last, "epoch 1/1 [") == d.last && strstr(d.last, "2000/2000") != NULL, "the last redraw: '%.60s'", d.last);

    /* one update every 0.5 s: each drawn */
    run_bar(true, 8, 0.5, &d);
    CHECK(d.n == 8, "8 updates 0.5 s apart: %d redraws (want 8)", d.n);

    /* off (not a terminal, or --quiet): nothing written */
    run_bar(false, 100, 0.2, &d);
    CHECK(d.n == 0 && d.last[0] == '\0', "a bar that is off writes nothing (%d redraws)", d.n);
    return check_summary("test_progress");
}
