/* test_tb_writer.c -- TensorBoard event files written by ts_tb_* and read
 * back record by record with protobuf-c; bad arguments and paths.
 *
 *     test_tb_writer              the checks below
 *     test_tb_writer --write DIR  only writes the known run into DIR and
 *                                 prints `EVENT_FILE <path>` (for
 *                                 test_tensorboard.sh, which reads it with
 *                                 TensorBoard's own EventAccumulator)
 *
 * The known run (test_tensorboard.sh computes the same formulas):
 *   scalars "loss", steps 0..24: 2 exp(-0.1 s) + 0.01 s
 *   histograms "weights", steps 0..2: the f32 values (s + 1) (i - 500) 0.01,
 *     i = 0..999, so each holds one exact zero
 *   text "notes", step 3: TB_TEXT */
/* needs: tensorboard */
#include "files.h"
#include "check.h"
#include "core/core.h"
#include "io/tfrecord.h"
#include "tensorboard.pb-c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TB_SCALARS 25
#define TB_HISTOS 3
#define TB_SAMPLE 1000
#define TB_TEXT "**tensorscope** run notes: \xc3\xbcnicode \xe2\x9c\x93\nsecond line"

static double loss_at(int s) { return 2.0 * exp(-0.1 * s) + 0.01 * s; }

static float sample(int s, int i) { return (float)((double)(s + 1) * (double)(i - 500) * 0.01); }

/* The summary TS_WATCH_STATS | TS_WATCH_HISTOGRAM would give, filled here by
 * hand: moments in double, counts by TensorFlow's rule (upper_bound: the
 * first limit > x). */
static void fill_summary(int s, ts_summary *out) {
    memset(out, 0, sizeof *out);
    out->what = TS_WATCH_STATS | TS_WATCH_HISTOGRAM;
    const double *lim = ts_tb_bucket_limits();
    double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < TB_SAMPLE; i++) {
        double x = sample(s, i);
        sum += x;
        sq += x * x;
        mn = x < mn ? x : mn;
        mx = x > mx ? x : mx;
        out->stats.zeros += x == 0;
        int lo = 0, hi = TS_TB_BINS; /* first index with lim > x */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (lim[mid] > x) hi = mid;
            else lo = mid + 1;
        }
        out->tb_counts[lo < TS_TB_BINS ? lo : TS_TB_BINS - 1]++;
    }
    out->stats.count = TB_SAMPLE;
    out->stats.mean = sum / TB_SAMPLE;
    out->stats.std = sqrt(sq / TB_SAMPLE - out->stats.mean * out->stats.mean);
    out->stats.min = mn;
    out->stats.max = mx;
    out->stats.l2 = sqrt(sq);
}

static ts_status write_run(const char *dir, char *path, size_t path_n, ts_summary *sums) {
    ts_tb_writer *w = NULL;
    ts_status st = ts_tb_open(&w, dir);
    if (st) return st;
    snprintf(path, path_n, "%s", ts_tb_path(w));
    for (int s = 0; s < TB_SCALARS && !st; s++) st = ts_tb_scalar(w, "loss", s, loss_at(s));
    for (int s = 0; s < TB_HISTOS && !st; s++) {
        fill_summary(s, &sums[s]);
        st = ts_tb_histogram(w, "weights", s, &sums[s]);
    }
    if (!st) st = ts_tb_text(w, "notes", 3, TB_TEXT);
    if (!st) st = ts_tb_flush(w);
    ts_status cst = ts_tb_close(w);
    return st ? st : cst;
}

/* Reads every Event of the file; returns how many (-1 on a framing error). */
static int read_events(const char *path, TensorscopeTb__Event **evs, int max) {
    size_t len = 0, pos = 0, n = 0;
    uint8_t *buf = (uint8_t *)test_read_file(path, &len);
    if (!buf) return -1;
    const uint8_t *d;
    int k = 0;
    while (ts_tfrecord_next(buf, len, &pos, &d, &n, path) == TS_OK && d && k < max)
        evs[k++] = tensorscope_tb__event__unpack(NULL, n, d);
    int ok = pos == len;
    free(buf);
    return ok ? k : -1;
}

static const TensorscopeTb__Summary__Value *value_of(const TensorscopeTb__Event *e) {
    if (!e || e->what_case != TENSORSCOPE_TB__EVENT__WHAT_SUMMARY || e->summary->n_value != 1)
        return NULL;
    return e->summary->value[0];
}

static void check_scalars(TensorscopeTb__Event **evs) {
    int bad = 0;
    for (int s = 0; s < TB_SCALARS; s++) {
        const TensorscopeTb__Summary__Value *v = value_of(evs[1 + s]);
        if (!v || strcmp(v->tag, "loss") != 0 || evs[1 + s]->step != s ||
            v->value_case != TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE ||
            v->simple_value != (float)loss_at(s))
            bad++;
    }
    CHECK(bad == 0, "%d scalars 'loss' with their steps and values (%d bad)", TB_SCALARS, bad);
}

static void check_histograms(TensorscopeTb__Event **evs, const ts_summary *sums) {
    const double *lim = ts_tb_bucket_limits();
    for (int s = 0; s < TB_HISTOS; s++) {
        const TensorscopeTb__Summary__Value *v = value_of(evs[1 + TB_SCALARS + s]);
        if (!v || v->value_case != TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_HISTO) {
            CHECK(0, "histogram %d is a HistogramProto", s);
            continue;
        }
        const TensorscopeTb__HistogramProto *h = v->histo;
        const ts_stats *t = &sums[s].stats;
        CHECK(strcmp(v->tag, "weights") == 0 && evs[1 + TB_SCALARS + s]->step == s,
              "histogram %d: tag and step", s);
        CHECK(h->min == t->min && h->max == t->max && h->num == TB_SAMPLE,
              "histogram %d: min %g max %g num %g", s, h->min, h->max, h->num);
        CHECK(fabs(h->sum - t->mean * TB_SAMPLE) <= 1e-9 * (1 + fabs(h->sum)) &&
                  fabs(h->sum_squares - t->l2 * t->l2) <= 1e-9 * h->sum_squares,
              "histogram %d: sum %g, sum_squares %g", s, h->sum, h->sum_squares);
        /* Undo the collapsing of empty runs: every emitted limit is a default
         * limit, and the counts land back where they were. */
        int64_t back[TS_TB_BINS] = {0};
        size_t j = 0, nonempty = 0;
        double total = 0;
        bool ok = h->n_bucket == h->n_bucket_limit && h->n_bucket > 0;
        for (int i = 0; i < TS_TB_BINS && ok && j < h->n_bucket; i++) {
            if (lim[i] != h->bucket_limit[j]) continue;
            back[i] = (int64_t)h->bucket[j];
            total += h->bucket[j];
            nonempty += h->bucket[j] > 0;
            j++;
        }
        ok = ok && j == h->n_bucket && h->bucket_limit[j - 1] == lim[TS_TB_BINS - 1] &&
             memcmp(back, sums[s].tb_counts, sizeof back) == 0;
        CHECK(ok && total == TB_SAMPLE,
              "histogram %d: %zu buckets (%zu non-empty) expand back to the %d default "
              "buckets, total %g",
              s, h->n_bucket, nonempty, TS_TB_BINS, total);
        CHECK(h->n_bucket <= 2 * nonempty + 1, "histogram %d: empty runs are collapsed", s);
    }
}

static void check_text(TensorscopeTb__Event **evs) {
    const TensorscopeTb__Summary__Value *v = value_of(evs[1 + TB_SCALARS + TB_HISTOS]);
    bool ok = v && strcmp(v->tag, "notes") == 0 &&
              v->value_case == TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_TENSOR && v->metadata &&
              v->metadata->plugin_data &&
              strcmp(v->metadata->plugin_data->plugin_name, "text") == 0;
    CHECK(ok, "text 'notes' is a tensor for the text plugin");
    if (!ok) return;
    const TensorscopeTb__TensorProto *t = v->tensor;
    CHECK(t->dtype == TENSORSCOPE_TB__DATA_TYPE__DT_STRING && t->n_string_val == 1 &&
              t->string_val[0].len == strlen(TB_TEXT) &&
              memcmp(t->string_val[0].data, TB_TEXT, strlen(TB_TEXT)) == 0 &&
              t->tensor_shape && t->tensor_shape->n_dim == 0,
          "text: a scalar DT_STRING holding the UTF-8 text");
}

static void check_run(const char *dir) {
    static ts_summary sums[TB_HISTOS];
    char path[1024];
    CHECK_OK(write_run(dir, path, sizeof path, sums), "write the known run to %s", dir);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char host[256] = "";
    gethostname(host, sizeof host);
    long long secs = 0;
    char rest[300] = "";
    CHECK(sscanf(base, "events.out.tfevents.%lld.%299s", &secs, rest) == 2 && secs > 1600000000 &&
              strcmp(rest, host) == 0,
          "file name %s is events.out.tfevents.<secs>.<host>", base);

    enum { N = 1 + TB_SCALARS + TB_HISTOS + 1 };
    TensorscopeTb__Event *evs[N + 1] = {0};
    int n = read_events(path, evs, N + 1);
    CHECK(n == N, "%d records, every CRC right (read %d)", N, n);
    bool all = n == N;
    for (int i = 0; i < n; i++) all = all && evs[i];
    CHECK(all, "every record decodes as an Event");
    if (all) {
        CHECK(evs[0]->what_case == TENSORSCOPE_TB__EVENT__WHAT_FILE_VERSION &&
                  strcmp(evs[0]->file_version, "brain.Event:2") == 0,
              "first event: file_version brain.Event:2");
        bool mono = true;
        for (int i = 1; i < n; i++) mono = mono && evs[i]->wall_time >= evs[i - 1]->wall_time;
        CHECK(mono && evs[0]->wall_time >= (double)secs && evs[0]->wall_time < (double)secs + 2,
              "wall times start at the file's second and never go back");
        check_scalars(evs);
        check_histograms(evs, sums);
        check_text(evs);
    }
    for (int i = 0; i < n; i++) tensorscope_tb__event__free_unpacked(evs[i], NULL);
    unlink(path);
}

static void check_errors(const char *dir) {
    ts_tb_writer *w = (ts_tb_writer *)&w; /* must be reset to NULL on failure */
    char file[512], sub[600];
    snprintf(file, sizeof file, "%s/plain_file", dir);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    snprintf(sub, sizeof sub, "%s/logs", file);
    ts_status st = ts_tb_open(&w, sub);
    CHECK(st == TS_ERR_IO && w == NULL && strstr(ts_last_error(), file),
          "a log directory below a regular file: TS_ERR_IO naming it: %s", ts_last_error());
    st = ts_tb_open(&w, file);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "not a directory"),
          "a regular file as the log directory: %s", ts_last_error());
    CHECK(ts_tb_open(&w, NULL) == TS_ERR_INVALID_ARGUMENT, "NULL log directory: %s",
          ts_last_error());
    CHECK(ts_tb_open(&w, "") == TS_ERR_INVALID_ARGUMENT, "empty log directory: %s",
          ts_last_error());
    CHECK(ts_tb_open(NULL, dir) == TS_ERR_INVALID_ARGUMENT, "NULL out: %s", ts_last_error());
    unlink(file);

    ts_tb_writer *a = NULL, *b = NULL;
    CHECK_OK(ts_tb_open(&a, dir), "first writer in %s", dir);
    CHECK_OK(ts_tb_open(&b, dir), "second writer in the same directory");
    CHECK(a && b && strcmp(ts_tb_path(a), ts_tb_path(b)) != 0,
          "two writers opened together get two files: %s, %s", a ? ts_tb_path(a) : "-",
          b ? ts_tb_path(b) : "-");
    static ts_summary empty;
    empty.what = TS_WATCH_HISTOGRAM; /* no stats */
    CHECK(ts_tb_histogram(a, "h", 0, &empty) == TS_ERR_INVALID_ARGUMENT,
          "histogram of a summary without stats: %s", ts_last_error());
    CHECK(ts_tb_histogram(a, "h", 0, NULL) == TS_ERR_INVALID_ARGUMENT, "NULL summary: %s",
          ts_last_error());
    empty.what = TS_WATCH_HISTOGRAM | TS_WATCH_STATS;
    CHECK_OK(ts_tb_histogram(a, "h", 0, &empty), "histogram of an empty summary");
    CHECK(ts_tb_scalar(a, "", 0, 1.0) == TS_ERR_INVALID_ARGUMENT, "empty tag: %s",
          ts_last_error());
    CHECK(ts_tb_scalar(NULL, "x", 0, 1.0) == TS_ERR_INVALID_ARGUMENT, "NULL writer: %s",
          ts_last_error());
    CHECK(ts_tb_text(a, "t", 0, NULL) == TS_ERR_INVALID_ARGUMENT, "NULL text: %s",
          ts_last_error());
    CHECK_OK(ts_tb_scalar(a, "x", -5, NAN), "a NaN scalar at a negative step is written");
    char pa[1024];
    snprintf(pa, sizeof pa, "%s", a ? ts_tb_path(a) : "");
    CHECK_OK(ts_tb_close(a), "close the first writer");
    CHECK_OK(ts_tb_close(b), "close the second writer");
    CHECK_OK(ts_tb_close(NULL), "ts_tb_close(NULL) is fine");
    CHECK(ts_tb_path(NULL) == NULL, "ts_tb_path(NULL) is NULL");

    TensorscopeTb__Event *evs[4] = {0};
    int n = read_events(pa, evs, 4);
    const TensorscopeTb__Summary__Value *h = n == 3 ? value_of(evs[1]) : NULL;
    CHECK(h && h->value_case == TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_HISTO &&
              h->histo->num == 0 && h->histo->n_bucket == 1 && h->histo->bucket[0] == 0,
          "the empty histogram is one empty bucket");
    const TensorscopeTb__Summary__Value *x = n == 3 ? value_of(evs[2]) : NULL;
    CHECK(x && isnan(x->simple_value) && evs[2]->step == -5, "the NaN scalar reads back");
    for (int i = 0; i < n; i++) tensorscope_tb__event__free_unpacked(evs[i], NULL);
}

/* The Custom Scalars layout: charts grouped by category in the order the
 * categories first appear, each chart's regular expressions kept; bad
 * charts refused. */
static void check_layout(const char *dir) {
    ts_tb_writer *w = NULL;
    CHECK_OK(ts_tb_open(&w, dir), "writer for the layout");
    const char *const loss[] = {"^loss/"}, *const fp[] = {"^range/a/", "^range/b/"}, *const lr[] = {"^lr$"};
    const ts_tb_chart charts[] = {{"loss", "losses", loss, 1}, {"range", "a and b", fp, 2}, {"loss", "learning rate", lr, 1}};
    CHECK(ts_tb_layout(w, charts, 0) == TS_ERR_INVALID_ARGUMENT, "no chart: %s", ts_last_error());
    const ts_tb_chart untagged = {"loss", "losses", loss, 0};
    CHECK(ts_tb_layout(w, &untagged, 1) == TS_ERR_INVALID_ARGUMENT, "a chart without tags: %s", ts_last_error());
    CHECK_OK(ts_tb_layout(w, charts, 3), "a layout of 3 charts in 2 categories");
    char path[1024];
    snprintf(path, sizeof path, "%s", ts_tb_path(w));
    ts_tb_close(w);
    TensorscopeTb__Event *evs[3] = {0};
    int n = read_events(path, evs, 3);
    const TensorscopeTb__Summary__Value *v = n == 2 ? value_of(evs[1]) : NULL;
    TensorscopeTb__Layout *l = NULL;
    if (v && v->value_case == TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_TENSOR && v->tensor->n_string_val == 1)
        l = tensorscope_tb__layout__unpack(NULL, v->tensor->string_val[0].len, v->tensor->string_val[0].data);
    CHECK(v && strcmp(v->tag, "custom_scalars__config__") == 0 && v->metadata && v->metadata->plugin_data &&
              strcmp(v->metadata->plugin_data->plugin_name, "custom_scalars") == 0 && l,
          "one custom_scalars__config__ tensor for the custom_scalars plugin, holding a Layout");
    CHECK(l && l->n_category == 2 && strcmp(l->category[0]->title, "loss") == 0 && l->category[0]->n_chart == 2 &&
              strcmp(l->category[0]->chart[1]->title, "learning rate") == 0 && strcmp(l->category[1]->title, "range") == 0 &&
              l->category[1]->n_chart == 1 && l->category[1]->chart[0]->multiline->n_tag == 2 &&
              strcmp(l->category[1]->chart[0]->multiline->tag[1], "^range/b/") == 0,
          "categories in first-appearance order (loss: 2 charts, range: 1 chart of 2 regular expressions)");
    if (l) tensorscope_tb__layout__free_unpacked(l, NULL);
    for (int i = 0; i < n; i++) tensorscope_tb__event__free_unpacked(evs[i], NULL);
    unlink(path);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write") == 0) {
        static ts_summary sums[TB_HISTOS];
        char path[1024];
        if (write_run(argv[2], path, sizeof path, sums)) {
            fprintf(stderr, "test_tb_writer: %s\n", ts_last_error());
            return 1;
        }
        printf("EVENT_FILE %s\n", path);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
        return 2;
    }
    char dir[] = "/tmp/ts_tb_writer_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    check_run(dir);
    check_errors(dir);
    check_layout(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test_tb_writer");
}
