/* tb_writer.c -- TensorBoard event files: protobuf-c Events, one per
 * TFRecord. A writer is used by one thread at a time. */
#include "core/core.h"
#include "io/tfrecord.h"
#include "tensorboard.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TS_TB_FILE_VERSION "brain.Event:2"
#define TS_TB_RECORD_OVERHEAD (TS_TFRECORD_HEADER + TS_TFRECORD_FOOTER)

struct ts_tb_writer {
    FILE *f;
    char *path;
    uint8_t *buf; /* one framed record, grown as needed */
    size_t cap;
    bool broken;  /* a write failed: the file may end in a partial record */
    double limits[TS_TB_BINS], counts[TS_TB_BINS]; /* histogram scratch */
};

static double tb_wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Creates `dir` and its missing parents (mkdir -p). */
static ts_status tb_mkdirs(const char *dir) {
    char *p = ts_strdup(dir);
    if (!p) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = TS_OK;
    size_t n = strlen(p);
    for (size_t i = 1; i <= n && st == TS_OK; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char saved = p[i];
        p[i] = '\0';
        struct stat sb;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            st = ts_error(TS_ERR_IO, "cannot create TensorBoard log directory '%s': %s", p,
                          strerror(errno));
        else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            st = ts_error(TS_ERR_IO,
                          "cannot use '%s' as a TensorBoard log directory: '%s' is not a "
                          "directory (choose another log directory)",
                          dir, p);
        p[i] = saved;
    }
    ts_free(p);
    return st;
}

/* Opens a new file `logdir/events.out.tfevents.<secs>.<host>` exclusively;
 * a second writer opened in the same second gets a `.1`, `.2`... suffix
 * instead of truncating the first one's file. */
static ts_status tb_create_file(ts_tb_writer *w, const char *logdir) {
    char host[256];
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0') strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    long long secs = (long long)time(NULL);
    size_t len = strlen(logdir) + strlen(host) + 64;
    w->path = ts_malloc(len);
    if (!w->path) return TS_ERR_OUT_OF_MEMORY;
    const char *sep = logdir[strlen(logdir) - 1] == '/' ? "" : "/";
    for (int attempt = 0; attempt < 1000; attempt++) {
        int k = snprintf(w->path, len, "%s%sevents.out.tfevents.%lld.%s", logdir, sep, secs, host);
        if (attempt > 0) snprintf(w->path + k, len - (size_t)k, ".%d", attempt);
        int fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0)
            return ts_error(TS_ERR_IO, "cannot create TensorBoard event file '%s': %s", w->path,
                            strerror(errno));
        w->f = fdopen(fd, "wb");
        if (!w->f) {
            int e = errno;
            close(fd);
            unlink(w->path);
            return ts_error(TS_ERR_IO, "cannot open TensorBoard event file '%s': %s", w->path,
                            strerror(e));
        }
        return TS_OK;
    }
    return ts_error(TS_ERR_IO, "too many TensorBoard event files named '%s.*' already exist",
                    w->path);
}

/* Frames and writes one Event as a whole record. After a failed write the
 * writer refuses further records rather than append to a torn one. */
static ts_status tb_write_event(ts_tb_writer *w, TensorscopeTb__Event *ev) {
    if (w->broken)
        return ts_error(TS_ERR_IO,
                        "TensorBoard event file '%s' failed earlier; open a new writer", w->path);
    size_t n = protobuf_c_message_get_packed_size(&ev->base);
    if (n > SIZE_MAX - TS_TB_RECORD_OVERHEAD)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "TensorBoard event of %zu bytes is too big", n);
    ts_status st = ts_grow((void **)&w->buf, &w->cap, n + TS_TB_RECORD_OVERHEAD, 1);
    if (st) return st;
    uint8_t *b = w->buf;
    ts_tfrecord_header(b, (uint64_t)n);
    size_t packed = protobuf_c_message_pack(&ev->base, b + TS_TFRECORD_HEADER);
    if (packed != n)
        return ts_error(TS_ERR_INTERNAL, "protobuf-c packed %zu bytes, expected %zu", packed, n);
    ts_tfrecord_footer(b + TS_TFRECORD_HEADER + n, b + TS_TFRECORD_HEADER, n);
    if (fwrite(b, 1, n + TS_TB_RECORD_OVERHEAD, w->f) != n + TS_TB_RECORD_OVERHEAD) {
        w->broken = true;
        return ts_error(TS_ERR_IO, "cannot write TensorBoard event file '%s': %s", w->path,
                        strerror(errno));
    }
    return TS_OK;
}

/* Writes an Event holding a Summary with the single value `v`. */
static ts_status tb_write_value(ts_tb_writer *w, int64_t step, TensorscopeTb__Summary__Value *v) {
    TensorscopeTb__Summary summary = TENSORSCOPE_TB__SUMMARY__INIT;
    summary.n_value = 1;
    summary.value = &v;
    TensorscopeTb__Event ev = TENSORSCOPE_TB__EVENT__INIT;
    ev.wall_time = tb_wall_time();
    ev.step = step;
    ev.what_case = TENSORSCOPE_TB__EVENT__WHAT_SUMMARY;
    ev.summary = &summary;
    return tb_write_event(w, &ev);
}

static ts_status tb_check(const ts_tb_writer *w, const char *tag, const char *what) {
    if (!w) return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: the TensorBoard writer is NULL", what);
    if (!tag || !tag[0])
        return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: the tag is NULL or empty; give it a name",
                        what);
    return TS_OK;
}

ts_status ts_tb_open(ts_tb_writer **out, const char *logdir) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_open: out is NULL");
    *out = NULL;
    if (!logdir || !logdir[0])
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_tb_open: the log directory is NULL or empty; give a path");
    ts_tb_writer *w = ts_calloc(1, sizeof *w);
    if (!w) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = tb_mkdirs(logdir);
    if (!st) st = tb_create_file(w, logdir);
    if (!st) {
        TensorscopeTb__Event ev = TENSORSCOPE_TB__EVENT__INIT;
        ev.wall_time = tb_wall_time();
        ev.what_case = TENSORSCOPE_TB__EVENT__WHAT_FILE_VERSION;
        ev.file_version = (char *)TS_TB_FILE_VERSION;
        st = tb_write_event(w, &ev);
        /* TensorBoard notices a run by its file: make the header visible now */
        if (!st) st = ts_tb_flush(w);
    }
    if (st) {
        if (w->f) {
            fclose(w->f);
            unlink(w->path);
        }
        ts_free(w->path);
        ts_free(w->buf);
        ts_free(w);
        return st;
    }
    ts_logf(TS_LOG_DEBUG, "TensorBoard events go to %s", w->path);
    *out = w;
    return TS_OK;
}

ts_status ts_tb_scalar(ts_tb_writer *w, const char *tag, int64_t step, double value) {
    ts_status st = tb_check(w, tag, "ts_tb_scalar");
    if (st) return st;
    TensorscopeTb__Summary__Value v = TENSORSCOPE_TB__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value; /* the scalar plugin reads simple_value, a float */
    return tb_write_value(w, step, &v);
}

ts_status ts_tb_histogram(ts_tb_writer *w, const char *tag, int64_t step, const ts_summary *s) {
    ts_status st = tb_check(w, tag, "ts_tb_histogram");
    if (st) return st;
    const int need = TS_WATCH_HISTOGRAM | TS_WATCH_STATS;
    if (!s || (s->what & need) != need)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_tb_histogram('%s'): the summary %s; compute it with "
                        "TS_WATCH_HISTOGRAM | TS_WATCH_STATS",
                        tag, s ? "lacks the histogram or the stats" : "is NULL");
    const double *limits = ts_tb_bucket_limits();
    if (!limits) return ts_error(TS_ERR_INTERNAL, "ts_tb_bucket_limits returned NULL");

    /* As TensorFlow's Histogram::EncodeToProto: each run of empty buckets
     * collapses into one empty bucket ending at the run's last limit, so the
     * parallel arrays keep their meaning with far fewer entries. */
    size_t nb = 0;
    double num = 0;
    for (size_t i = 0; i < TS_TB_BINS;) {
        double end = limits[i], count = (double)s->tb_counts[i];
        i++;
        if (count <= 0) {
            while (i < TS_TB_BINS && s->tb_counts[i] <= 0) end = limits[i++];
            count = 0;
        }
        w->limits[nb] = end;
        w->counts[nb++] = count;
        num += count;
    }

    const ts_stats *t = &s->stats;
    int64_t finite = t->count - t->nans - t->pos_infs - t->neg_infs;
    TensorscopeTb__HistogramProto h = TENSORSCOPE_TB__HISTOGRAM_PROTO__INIT;
    if (finite > 0) { /* min, max and the moments cover the finite values */
        h.min = t->min;
        h.max = t->max;
        h.sum = t->mean * (double)finite;
        h.sum_squares = t->l2 * t->l2;
    }
    h.num = num; /* the values the buckets hold, so num == sum(bucket) */
    h.n_bucket_limit = nb;
    h.bucket_limit = w->limits;
    h.n_bucket = nb;
    h.bucket = w->counts;
    TensorscopeTb__Summary__Value v = TENSORSCOPE_TB__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_HISTO;
    v.histo = &h;
    return tb_write_value(w, step, &v);
}

ts_status ts_tb_image(ts_tb_writer *w, const char *tag, int64_t step, const void *png, size_t n, int width, int height) {
    ts_status st = tb_check(w, tag, "ts_tb_image");
    if (st) return st;
    if (!png || n < 8 || memcmp(png, "\x89PNG", 4) != 0 || width < 1 || height < 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_image('%s'): give PNG bytes and the image's width and height", tag);
    TensorscopeTb__Summary__Image im = TENSORSCOPE_TB__SUMMARY__IMAGE__INIT;
    im.height = height;
    im.width = width;
    im.colorspace = 4;
    im.encoded_image_string.data = (uint8_t *)png;
    im.encoded_image_string.len = n;
    TensorscopeTb__Summary__Value v = TENSORSCOPE_TB__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_IMAGE;
    v.image = &im;
    return tb_write_value(w, step, &v);
}

/* A scalar DT_STRING tensor tagged for a plugin, with the plugin's data:
 * what tf.summary.text and the hparams summaries write. */
static ts_status tb_write_plugin_string(ts_tb_writer *w, const char *tag, int64_t step, const char *plugin_name,
                                       ProtobufCBinaryData content, ProtobufCBinaryData str) {
    TensorscopeTb__SummaryMetadata__PluginData plugin = TENSORSCOPE_TB__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    plugin.plugin_name = (char *)plugin_name;
    plugin.content = content;
    TensorscopeTb__SummaryMetadata meta = TENSORSCOPE_TB__SUMMARY_METADATA__INIT;
    meta.plugin_data = &plugin;
    TensorscopeTb__TensorShapeProto shape = TENSORSCOPE_TB__TENSOR_SHAPE_PROTO__INIT;
    TensorscopeTb__TensorProto tensor = TENSORSCOPE_TB__TENSOR_PROTO__INIT;
    tensor.dtype = TENSORSCOPE_TB__DATA_TYPE__DT_STRING;
    tensor.tensor_shape = &shape;
    tensor.n_string_val = 1;
    tensor.string_val = &str;
    TensorscopeTb__Summary__Value v = TENSORSCOPE_TB__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.metadata = &meta;
    v.value_case = TENSORSCOPE_TB__SUMMARY__VALUE__VALUE_TENSOR;
    v.tensor = &tensor;
    return tb_write_value(w, step, &v);
}

ts_status ts_tb_text(ts_tb_writer *w, const char *tag, int64_t step, const char *text) {
    ts_status st = tb_check(w, tag, "ts_tb_text");
    if (st) return st;
    if (!text) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_text('%s'): text is NULL", tag);
    /* the text plugin's TextPluginData at version 0 serializes to nothing */
    return tb_write_plugin_string(w, tag, step, "text", (ProtobufCBinaryData){0, NULL},
                                  (ProtobufCBinaryData){strlen(text), (uint8_t *)text});
}

ts_status ts_tb_layout(ts_tb_writer *w, const ts_tb_chart *charts, int n) {
    ts_status st = tb_check(w, "custom_scalars__config__", "ts_tb_layout");
    if (st) return st;
    if (n < 1 || n > 4096 || !charts) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_layout: give 1 to 4096 charts");
    for (int i = 0; i < n; i++)
        if (!charts[i].category || !charts[i].title || charts[i].n_tags < 1 || !charts[i].tags)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_layout: chart %d needs a category, a title and at least one tag", i);
    /* categories in order of first appearance, each with its charts */
    TensorscopeTb__Category *cats = ts_calloc((size_t)n, sizeof *cats), **cat_ptrs = ts_calloc((size_t)n, sizeof *cat_ptrs);
    TensorscopeTb__Chart *ch = ts_calloc((size_t)n, sizeof *ch), **ch_ptrs = ts_calloc((size_t)n, sizeof *ch_ptrs);
    TensorscopeTb__MultilineChartContent *lines = ts_calloc((size_t)n, sizeof *lines);
    uint8_t *packed = NULL;
    st = cats && cat_ptrs && ch && ch_ptrs && lines ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    size_t n_cats = 0, used = 0;
    for (size_t c = 0; !st && c < (size_t)n; c++) {
        size_t k = 0;
        while (k < n_cats && strcmp(cats[k].title, charts[c].category) != 0) k++;
        if (k < n_cats) continue;
        tensorscope_tb__category__init(&cats[k]);
        cats[k].title = (char *)charts[c].category;
        cats[k].chart = ch_ptrs + used;
        for (size_t i = c; i < (size_t)n; i++) {
            if (strcmp(charts[i].category, charts[c].category) != 0) continue;
            tensorscope_tb__multiline_chart_content__init(&lines[used]);
            lines[used].n_tag = (size_t)charts[i].n_tags;
            lines[used].tag = (char **)charts[i].tags;
            tensorscope_tb__chart__init(&ch[used]);
            ch[used].title = (char *)charts[i].title;
            ch[used].content_case = TENSORSCOPE_TB__CHART__CONTENT_MULTILINE;
            ch[used].multiline = &lines[used];
            ch_ptrs[used] = &ch[used];
            used++;
            cats[k].n_chart++;
        }
        cat_ptrs[n_cats++] = &cats[k];
    }
    TensorscopeTb__Layout layout = TENSORSCOPE_TB__LAYOUT__INIT;
    layout.n_category = n_cats;
    layout.category = cat_ptrs;
    size_t len = st ? 0 : protobuf_c_message_get_packed_size(&layout.base);
    if (!st && !(packed = ts_malloc(len ? len : 1))) st = TS_ERR_OUT_OF_MEMORY;
    if (!st) {
        protobuf_c_message_pack(&layout.base, packed);
        st = tb_write_plugin_string(w, "custom_scalars__config__", 0, "custom_scalars", (ProtobufCBinaryData){0, NULL},
                                    (ProtobufCBinaryData){len, packed});
    }
    ts_free(packed);
    ts_free(lines);
    ts_free(ch_ptrs);
    ts_free(ch);
    ts_free(cat_ptrs);
    ts_free(cats);
    return st;
}

/* One hparams-plugin summary (`_hparams_/session_start_info` or
 * `_hparams_/session_end_info`), as TensorBoard's hparams summary_v2 writes
 * it: the plugin data in the metadata, an empty string tensor as the value. */
static ts_status tb_write_hparams(ts_tb_writer *w, const char *tag, TensorscopeTb__HParamsPluginData *pd) {
    size_t n = protobuf_c_message_get_packed_size(&pd->base);
    uint8_t *content = ts_malloc(n ? n : 1);
    if (!content) return TS_ERR_OUT_OF_MEMORY;
    protobuf_c_message_pack(&pd->base, content);
    ts_status st = tb_write_plugin_string(w, tag, 0, "hparams", (ProtobufCBinaryData){n, content}, (ProtobufCBinaryData){0, (uint8_t *)""});
    ts_free(content);
    return st;
}

ts_status ts_tb_hparams(ts_tb_writer *w, const ts_tb_hparam *hp, int n) {
    ts_status st = tb_check(w, "hparams", "ts_tb_hparams");
    if (st) return st;
    if (n < 0 || n > 256 || (n && !hp)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_hparams: give 0 to 256 hyperparameters");
    TensorscopeTb__HParamsEntry entries[256], *ptrs[256];
    TensorscopeTb__PbValue values[256];
    for (int i = 0; i < n; i++) {
        if (!hp[i].name || !hp[i].name[0]) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_hparams: hyperparameter %d has no name", i);
        tensorscope_tb__pb_value__init(&values[i]);
        if (hp[i].text) {
            values[i].kind_case = TENSORSCOPE_TB__PB_VALUE__KIND_STRING_VALUE;
            values[i].string_value = (char *)hp[i].text;
        } else {
            values[i].kind_case = TENSORSCOPE_TB__PB_VALUE__KIND_NUMBER_VALUE;
            values[i].number_value = hp[i].number;
        }
        tensorscope_tb__hparams_entry__init(&entries[i]);
        entries[i].key = (char *)hp[i].name;
        entries[i].value = &values[i];
        ptrs[i] = &entries[i];
    }
    TensorscopeTb__HParamsSessionStartInfo info = TENSORSCOPE_TB__HPARAMS_SESSION_START_INFO__INIT;
    info.n_hparams = (size_t)n;
    info.hparams = ptrs;
    info.start_time_secs = tb_wall_time();
    TensorscopeTb__HParamsPluginData pd = TENSORSCOPE_TB__HPARAMS_PLUGIN_DATA__INIT;
    pd.data_case = TENSORSCOPE_TB__HPARAMS_PLUGIN_DATA__DATA_SESSION_START_INFO;
    pd.session_start_info = &info;
    return tb_write_hparams(w, "_hparams_/session_start_info", &pd);
}

ts_status ts_tb_hparams_end(ts_tb_writer *w, int success) {
    ts_status st = tb_check(w, "hparams", "ts_tb_hparams_end");
    if (st) return st;
    TensorscopeTb__HParamsSessionEndInfo info = TENSORSCOPE_TB__HPARAMS_SESSION_END_INFO__INIT;
    info.status = success ? 1 : 2;
    info.end_time_secs = tb_wall_time();
    TensorscopeTb__HParamsPluginData pd = TENSORSCOPE_TB__HPARAMS_PLUGIN_DATA__INIT;
    pd.data_case = TENSORSCOPE_TB__HPARAMS_PLUGIN_DATA__DATA_SESSION_END_INFO;
    pd.session_end_info = &info;
    return tb_write_hparams(w, "_hparams_/session_end_info", &pd);
}

ts_status ts_tb_flush(ts_tb_writer *w) {
    if (!w) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tb_flush: the TensorBoard writer is NULL");
    if (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0) {
        w->broken = true;
        return ts_error(TS_ERR_IO, "cannot write TensorBoard event file '%s': %s", w->path,
                        strerror(errno));
    }
    return TS_OK;
}

ts_status ts_tb_close(ts_tb_writer *w) {
    if (!w) return TS_OK;
    ts_status st = w->broken ? TS_OK : ts_tb_flush(w);
    if (fclose(w->f) != 0 && !st)
        st = ts_error(TS_ERR_IO, "cannot close TensorBoard event file '%s': %s", w->path,
                      strerror(errno));
    if (!st && w->broken)
        st = ts_error(TS_ERR_IO, "TensorBoard event file '%s' is incomplete: a write failed",
                      w->path);
    ts_free(w->path);
    ts_free(w->buf);
    ts_free(w);
    return st;
}

const char *ts_tb_path(const ts_tb_writer *w) { return w ? w->path : NULL; }
