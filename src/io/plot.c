/* plot.c -- PNG/SVG plots with cairo: the tutorial's gradient histogram and
 * line plots of training curves. Every file goes to a temp name next to the
 * target and is renamed once complete, so a reader never sees half a plot. */
#include "core/atomic_file.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PLOT_W 800
#define PLOT_H 600
#define HIST_BINS 50
#define MAX_SERIES 8

/* Plot area inside the 800x600 canvas. */
typedef struct frame {
    double left, top, width, height;
    double x0, x1, y0, y1; /* data range shown */
} frame;

/* matplotlib's tab10: distinct and familiar. */
static const double series_rgb[MAX_SERIES][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
};

static void draw_axes(cairo_t *cr, const frame *f, const char *title, const char *x_label, const char *y_label);

static double px(const frame *f, double x) {
    return f->left + (x - f->x0) / (f->x1 - f->x0) * f->width;
}
static double py(const frame *f, double y) {
    return f->top + f->height - (y - f->y0) / (f->y1 - f->y0) * f->height;
}

/* 1, 2 or 5 times a power of ten, giving about `target` steps over span. */
static double nice_step(double span, int target) {
    double raw = span / target, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * mag;
}

/* A range that is never empty (a constant series still gets an axis). */
static void widen(double *lo, double *hi) {
    if (*hi > *lo) return;
    double pad = *lo != 0 ? fabs(*lo) * 0.05 : 0.5;
    *lo -= pad;
    *hi += pad;
}

static void text_at(cairo_t *cr, const char *s, double x, double y, double ax, double ay) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
    cairo_show_text(cr, s);
}

/* Text on a white box, readable over bars and lines. */
static void text_boxed(cairo_t *cr, const char *s, double x, double y, double ax, double ay) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    double r, g, b, a;
    cairo_pattern_get_rgba(cairo_get_source(cr), &r, &g, &b, &a);
    cairo_save(cr);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, x - ax * e.width - 3, y - ay * e.height - 2, e.width + 6, e.height + 4);
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_set_source_rgba(cr, r, g, b, a);
    text_at(cr, s, x, y, ax, ay);
}

static void tick_label(char *buf, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-9) v = 0; /* no "-1.2e-17" at the origin */
    snprintf(buf, n, "%g", v);
}

/* Background, title, axis labels, box, ticks with labels and a light grid. */
static void draw_frame(cairo_t *cr, const frame *f, const char *title, const char *x_label,
                       const char *y_label) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    draw_axes(cr, f, title, x_label, y_label);
}

/* What draw_frame draws, without painting the background (panels). The
 * title goes above the frame, the x label below it. */
static void draw_axes(cairo_t *cr, const frame *f, const char *title, const char *x_label, const char *y_label) {
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0, 0, 0);
    if (title && *title) {
        cairo_set_font_size(cr, 18);
        text_at(cr, title, f->left + f->width / 2, f->top - 25, 0.5, 0.5);
    }
    cairo_set_font_size(cr, 14);
    if (x_label && *x_label)
        text_at(cr, x_label, f->left + f->width / 2, f->top + f->height + 57, 0.5, 1.0);
    if (y_label && *y_label) {
        cairo_save(cr);
        cairo_translate(cr, 20, f->top + f->height / 2);
        cairo_rotate(cr, -M_PI / 2);
        text_at(cr, y_label, 0, 0, 0.5, 0.5);
        cairo_restore(cr);
    }
    cairo_set_font_size(cr, 12);
    cairo_set_line_width(cr, 1.0);
    char lab[64];
    double sx = nice_step(f->x1 - f->x0, 8), sy = nice_step(f->y1 - f->y0, 6);
    for (double v = ceil(f->x0 / sx) * sx; v <= f->x1 + sx * 1e-9; v += sx) {
        double x = px(f, v);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, x, f->top);
        cairo_line_to(cr, x, f->top + f->height);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, x, f->top + f->height);
        cairo_line_to(cr, x, f->top + f->height + 5);
        cairo_stroke(cr);
        tick_label(lab, sizeof lab, v, sx);
        text_at(cr, lab, x, f->top + f->height + 9, 0.5, 0.0);
    }
    for (double v = ceil(f->y0 / sy) * sy; v <= f->y1 + sy * 1e-9; v += sy) {
        double y = py(f, v);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, f->left, y);
        cairo_line_to(cr, f->left + f->width, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, f->left - 5, y);
        cairo_line_to(cr, f->left, y);
        cairo_stroke(cr);
        tick_label(lab, sizeof lab, v, sy);
        text_at(cr, lab, f->left - 8, y, 1.0, 0.5);
    }
}

/* A rectangle's outline, black, 1 px. */
static void outline(cairo_t *cr, double x, double y, double w, double h) {
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, x, y, w, h);
    cairo_stroke(cr);
}

static void draw_box(cairo_t *cr, const frame *f) { outline(cr, f->left, f->top, f->width, f->height); }

/* A rectangle filled in rgb. */
static void fill_rect(cairo_t *cr, const double rgb[3], double x, double y, double w, double h) {
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill(cr);
}

/* A legend's box: white, a little see-through, a grey edge. */
static void legend_box(cairo_t *cr, double x, double y, double w, double h) {
    cairo_rectangle(cr, x, y, w, h);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.7, 0.7, 0.7);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
}

/* A white canvas, the font set, the title (none: NULL) in 16 px centred
 * at (x, y), the pen black: how the image plots (tiles, attention maps,
 * heat maps) begin. */
static void canvas_titled(cairo_t *cr, const char *font, const char *title, double x, double y) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, font, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 16);
    if (title) text_at(cr, title, x, y, 0.5, 0.5);
}

/* viridis at t in [0, 1] (clamped), by its anchor colours every quarter */
static void viridis(double t, double rgb[3]) {
    static const double c[5][3] = {{0.267, 0.005, 0.329}, {0.229, 0.322, 0.546}, {0.128, 0.567, 0.551},
                                   {0.369, 0.789, 0.383}, {0.993, 0.906, 0.144}};
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    int i = t >= 1 ? 3 : (int)(t * 4);
    double f = t * 4 - i;
    for (int k = 0; k < 3; k++) rgb[k] = c[i][k] + f * (c[i + 1][k] - c[i][k]);
}

/* A colour map: the colour at t in [0, 1] of its scale. */
typedef void (*colour_map)(const void *ctx, double t, double rgb[3]);

static void viridis_map(const void *ctx, double t, double rgb[3]) {
    (void)ctx;
    viridis(t, rgb);
}

/* A colour bar w x h at (x, y): the map's top (t = 1) at the top, in 256
 * bands, outlined. Its labels are the plot's. */
static void colour_bar(cairo_t *cr, colour_map map, const void *ctx, double x, double y, double w, double h) {
    enum { BANDS = 256 };
    for (int k = 0; k < BANDS; k++) {
        double rgb[3];
        map(ctx, 1.0 - (k + 0.5) / BANDS, rgb);
        fill_rect(cr, rgb, x, y + k * h / BANDS, w, h / BANDS + 0.5);
    }
    outline(cr, x, y, w, h);
}

/* ------------------------------------------------------------ writing */

static cairo_status_t write_file(void *closure, const unsigned char *data, unsigned int len) {
    return fwrite(data, 1, len, (FILE *)closure) == len ? CAIRO_STATUS_SUCCESS
                                                        : CAIRO_STATUS_WRITE_ERROR;
}

static bool ends_with_svg(const char *path) {
    size_t n = strlen(path);
    return n >= 4 && strcasecmp(path + n - 4, ".svg") == 0;
}

typedef void (*draw_fn)(cairo_t *cr, const void *ctx);

/* Draws a W x H canvas into a PNG or SVG written through a temp file
 * (core/atomic_file.h). */
static ts_status render_size(const char *path, int W, int H, draw_fn draw, const void *ctx) {
    ts_atomic_file af;
    ts_status st = ts_atomic_open(&af, path);
    if (st != TS_OK) return ts_error_wrap(st, "plot");
    bool svg = ends_with_svg(path);
    cairo_surface_t *sf = svg ? cairo_svg_surface_create_for_stream(write_file, af.f, W, H)
                              : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, H);
    cairo_t *cr = cairo_create(sf);
    draw(cr, ctx);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS && !svg)
        cs = cairo_surface_write_to_png_stream(sf, write_file, af.f);
    cairo_surface_finish(sf); /* SVG output is flushed here */
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(sf);
    cairo_surface_destroy(sf);
    if (cs != CAIRO_STATUS_SUCCESS) {
        ts_atomic_abort(&af);
        return ts_error(TS_ERR_IO, "plot %s: cairo: %s", path, cairo_status_to_string(cs));
    }
    st = ts_atomic_commit(&af);
    return st == TS_OK ? TS_OK : ts_error_wrap(st, "plot");
}

static ts_status render(const char *path, draw_fn draw, const void *ctx) { return render_size(path, PLOT_W, PLOT_H, draw, ctx); }

typedef struct mem_png {
    unsigned char *data;
    size_t n, cap;
    bool failed;
} mem_png;

static cairo_status_t write_mem(void *closure, const unsigned char *data, unsigned int len) {
    mem_png *m = closure;
    if (ts_grow((void **)&m->data, &m->cap, m->n + len, 1)) {
        m->failed = true;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    memcpy(m->data + m->n, data, len);
    m->n += len;
    return CAIRO_STATUS_SUCCESS;
}

/* Draws a W x H canvas into PNG bytes in memory (for TensorBoard images). */
static ts_status render_png_memory(int W, int H, draw_fn draw, const void *ctx, unsigned char **png, size_t *n) {
    mem_png m = {0};
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, H);
    cairo_t *cr = cairo_create(sf);
    draw(cr, ctx);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_write_to_png_stream(sf, write_mem, &m);
    cairo_surface_destroy(sf);
    if (cs != CAIRO_STATUS_SUCCESS) {
        ts_free(m.data);
        return m.failed ? TS_ERR_OUT_OF_MEMORY : ts_error(TS_ERR_INTERNAL, "plot: cairo: %s", cairo_status_to_string(cs));
    }
    *png = m.data;
    *n = m.n;
    return TS_OK;
}

/* ------------------------------------------------- gradient histogram */

typedef struct hist_ctx {
    int64_t counts[HIST_BINS];
    double lo, hi;
    int64_t zeros, nans, pos_infs, neg_infs, total;
    int zero_bin;        /* -1 without zeros */
    const char *caption; /* which tensors, which step */
} hist_ctx;

static void draw_hist(cairo_t *cr, const void *ctx) {
    const hist_ctx *h = ctx;
    int64_t top = 1;
    for (int i = 0; i < HIST_BINS; i++)
        if (h->counts[i] > top) top = h->counts[i];
    frame f = {90, 50, PLOT_W - 90 - 30, PLOT_H - 50 - 75, h->lo, h->hi, 0, (double)top * 1.2}; /* room for the notes */
    draw_frame(cr, &f, "Gradient Histogram", "log2(|gradient|)", "Frequency");
    double w = (h->hi - h->lo) / HIST_BINS;
    for (int i = 0; i < HIST_BINS; i++) {
        if (!h->counts[i]) continue;
        double x0 = px(&f, h->lo + i * w), x1 = px(&f, h->lo + (i + 1) * w);
        double y0 = py(&f, 0), y1 = py(&f, (double)h->counts[i]);
        cairo_rectangle(cr, x0, y1, x1 - x0, y0 - y1);
        cairo_set_source_rgb(cr, series_rgb[0][0], series_rgb[0][1], series_rgb[0][2]);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, 0.05, 0.2, 0.35);
        cairo_set_line_width(cr, 0.6);
        cairo_stroke(cr);
    }
    draw_box(cr, &f);
    char note[512];
    cairo_set_font_size(cr, 12);
    cairo_set_source_rgb(cr, 0, 0, 0);
    if (h->zero_bin >= 0) { /* the exact zeros sit in their own bar, 2 left of the smallest magnitude */
        snprintf(note, sizeof note, "zeros: %lld", (long long)h->zeros);
        double x = px(&f, h->lo + (h->zero_bin + 0.5) * w), y = py(&f, (double)h->counts[h->zero_bin]);
        text_boxed(cr, note, fmax(x, f.left + 4), fmax(y - 6, f.top + 4), x < f.left + 40 ? 0.0 : 0.5, 1.0);
    }
    snprintf(note, sizeof note, "%lld values; NaN: %lld, +Inf: %lld, -Inf: %lld%s", (long long)h->total, (long long)h->nans,
             (long long)h->pos_infs, (long long)h->neg_infs, h->nans + h->pos_infs + h->neg_infs ? " (not plotted)" : "");
    text_boxed(cr, note, f.left + f.width - 8, f.top + 8, 1.0, 0.0);
    if (h->caption && *h->caption) {
        cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
        text_boxed(cr, h->caption, f.left + f.width - 8, f.top + 26, 1.0, 0.0);
    }
}

ts_status ts_plot_gradient_histogram(const char *png_path, const ts_array *arrays, int n) {
    return ts_plot_gradient_histogram_captioned(png_path, arrays, n, NULL);
}

ts_status ts_plot_gradient_histogram_captioned(const char *png_path, const ts_array *arrays, int n, const char *caption) {
    if (!png_path || !*png_path)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_gradient_histogram: no path given");
    if (n <= 0 || !arrays)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_plot_gradient_histogram: need at least one array (n = %d)", n);
    /* Pass 1: the range of log2|g| over finite non-zero values. */
    double lmin = INFINITY, lmax = -INFINITY;
    int64_t zeros = 0, nans = 0, pinf = 0, ninf = 0, total = 0;
    for (int a = 0; a < n; a++) {
        int64_t m = ts_array_numel(&arrays[a]);
        if (arrays[a].dtype != TS_F32 || m < 0 || (m > 0 && !arrays[a].data))
            return ts_error(TS_ERR_INVALID_ARGUMENT,
                            "ts_plot_gradient_histogram: array %d is not a valid f32 array", a);
        const float *x = arrays[a].data;
        total += m;
        for (int64_t i = 0; i < m; i++) {
            if (x[i] == 0.0f) zeros++;
            else if (isnan(x[i])) nans++;
            else if (isinf(x[i])) x[i] > 0 ? pinf++ : ninf++;
            else {
                double l = log2(fabs((double)x[i]));
                if (l < lmin) lmin = l;
                if (l > lmax) lmax = l;
            }
        }
    }
    if (!(lmin <= lmax) && zeros == 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_plot_gradient_histogram: no finite values to plot");
    if (!(lmin <= lmax)) lmin = lmax = 0; /* only zeros: they sit at -2 */
    double zero_at = lmin - 2;
    hist_ctx h;
    memset(&h, 0, sizeof h);
    h.lo = zeros ? zero_at : lmin;
    h.hi = lmax;
    widen(&h.lo, &h.hi);
    h.zeros = zeros, h.nans = nans, h.pos_infs = pinf, h.neg_infs = ninf, h.total = total, h.caption = caption;
    h.zero_bin = -1;
    /* Pass 2: 50 equal bins over [lo, hi]; hi falls in the last bin. */
    double scale = HIST_BINS / (h.hi - h.lo);
    for (int a = 0; a < n; a++) {
        const float *x = arrays[a].data;
        int64_t m = ts_array_numel(&arrays[a]);
        for (int64_t i = 0; i < m; i++) {
            double l;
            if (x[i] == 0.0f) l = zero_at;
            else if (isfinite(x[i])) l = log2(fabs((double)x[i]));
            else continue;
            int b = (int)((l - h.lo) * scale);
            b = b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b;
            h.counts[b]++;
            if (x[i] == 0.0f) h.zero_bin = b;
        }
    }
    return render(png_path, draw_hist, &h);
}

/* ------------------------------------------------------------ line plots */

/* Series drawn in a frame: lines with gaps at non-finite values, and a dot
 * on every point of a short series (an epoch-level curve of a few points,
 * or one, stays visible). The legend sits top right inside the frame. */
static void draw_series(cairo_t *cr, const frame *f, const ts_series *series, int n, int color0) {
    cairo_save(cr);
    cairo_rectangle(cr, f->left, f->top, f->width, f->height);
    cairo_clip(cr);
    cairo_set_line_width(cr, 2.0);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int s = 0; s < n; s++) {
        const ts_series *se = &series[s];
        const double *rgb = series_rgb[(color0 + s) % MAX_SERIES];
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        bool pen_down = false;
        for (int64_t i = 0; i < se->n; i++) {
            if (!isfinite(se->x[i]) || !isfinite(se->y[i])) { /* a gap, not a spike */
                pen_down = false;
                continue;
            }
            double x = px(f, se->x[i]), y = py(f, se->y[i]);
            if (pen_down) cairo_line_to(cr, x, y);
            else cairo_move_to(cr, x, y);
            pen_down = true;
        }
        cairo_stroke(cr);
        for (int64_t i = 0; se->n <= 50 && i < se->n; i++) {
            if (!isfinite(se->x[i]) || !isfinite(se->y[i])) continue;
            cairo_arc(cr, px(f, se->x[i]), py(f, se->y[i]), 3.5, 0, 2 * M_PI);
            cairo_fill(cr);
        }
    }
    cairo_restore(cr);
    draw_box(cr, f);
    cairo_set_font_size(cr, 12);
    double wmax = 0;
    char label[MAX_SERIES][64];
    for (int s = 0; s < n; s++) {
        cairo_text_extents_t e;
        if (series[s].label) snprintf(label[s], sizeof label[s], "%s", series[s].label);
        else snprintf(label[s], sizeof label[s], "series %d", s);
        cairo_text_extents(cr, label[s], &e);
        if (e.x_advance > wmax) wmax = e.x_advance;
    }
    double lw = wmax + 44, lh = 20.0 * n + 10, lx = f->left + f->width - lw - 10, ly = f->top + 10;
    legend_box(cr, lx, ly, lw, lh);
    for (int s = 0; s < n; s++) {
        double y = ly + 15 + 20.0 * s;
        const double *rgb = series_rgb[(color0 + s) % MAX_SERIES];
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_set_line_width(cr, 2.0);
        cairo_move_to(cr, lx + 8, y);
        cairo_line_to(cr, lx + 32, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, label[s], lx + 38, y, 0.0, 0.5);
    }
}

/* Panels stacked top to bottom over one x range; each its own y range. */
#define MAX_PANELS 4
typedef struct panels_ctx {
    const char *title, *x_label;
    const ts_plot_panel *panels;
    int n;
    double x0, x1, y0[MAX_PANELS], y1[MAX_PANELS];
} panels_ctx;

static void draw_panels(cairo_t *cr, const void *ctx) {
    const panels_ctx *c = ctx;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    const double top = 50, bottom = 75, gap = 30, total = PLOT_H - top - bottom;
    double h = (total - gap * (c->n - 1)) / c->n;
    int color = 0;
    for (int k = 0; k < c->n; k++) {
        frame f = {90, top + k * (h + gap), PLOT_W - 90 - 30, h, c->x0, c->x1, c->y0[k], c->y1[k]};
        draw_axes(cr, &f, k == 0 ? c->title : NULL, k == c->n - 1 ? c->x_label : NULL, c->panels[k].y_label);
        draw_series(cr, &f, c->panels[k].series, c->panels[k].n_series, color);
        color += c->panels[k].n_series;
    }
}

ts_status ts_plot_panels(const char *path, const char *title, const char *x_label, const ts_plot_panel *panels, int n_panels) {
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_panels: no path given");
    if (n_panels < 1 || n_panels > MAX_PANELS || !panels)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_panels: %d panels; give 1 to %d", n_panels, MAX_PANELS);
    panels_ctx c = {title, x_label, panels, n_panels, INFINITY, -INFINITY, {0}, {0}};
    for (int k = 0; k < n_panels; k++) {
        const ts_plot_panel *pn = &panels[k];
        if (pn->n_series < 1 || pn->n_series > MAX_SERIES || !pn->series)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_panels: panel %d has %d series; give 1 to %d", k, pn->n_series, MAX_SERIES);
        c.y0[k] = INFINITY, c.y1[k] = -INFINITY;
        for (int s = 0; s < pn->n_series; s++) {
            const ts_series *se = &pn->series[s];
            if (se->n < 0 || (se->n > 0 && (!se->x || !se->y)))
                return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_panels: series %d of panel %d has n = %lld but no x or y data", s, k,
                                (long long)se->n);
            for (int64_t i = 0; i < se->n; i++) {
                if (!isfinite(se->x[i]) || !isfinite(se->y[i])) continue;
                c.x0 = fmin(c.x0, se->x[i]);
                c.x1 = fmax(c.x1, se->x[i]);
                c.y0[k] = fmin(c.y0[k], se->y[i]);
                c.y1[k] = fmax(c.y1[k], se->y[i]);
            }
        }
        if (!(c.y0[k] <= c.y1[k])) c.y0[k] = c.y1[k] = 0; /* nothing finite: an empty, labelled frame */
        double pad = (c.y1[k] - c.y0[k]) * 0.05;
        c.y0[k] -= pad;
        c.y1[k] += pad;
        widen(&c.y0[k], &c.y1[k]);
    }
    if (!(c.x0 <= c.x1)) c.x0 = c.x1 = 0;
    widen(&c.x0, &c.x1);
    double xpad = (c.x1 - c.x0) * 0.02; /* points at the ends stay whole */
    c.x0 -= xpad;
    c.x1 += xpad;
    return render(path, draw_panels, &c);
}

ts_status ts_plot_lines(const char *path, const char *title, const char *x_label,
                        const ts_series *series, int n_series) {
    if (n_series < 1 || n_series > MAX_SERIES || !series)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_plot_lines: %d series; give 1 to %d", n_series, MAX_SERIES);
    ts_plot_panel one = {NULL, series, n_series};
    return ts_plot_panels(path, title, x_label, &one, 1);
}

/* ------------------------------------------------------------ image tiles */

typedef struct tiles_ctx {
    const char *title;
    const float *x;
    int64_t n, rows, cols, h, w; /* n tiles in a grid of rows x cols, each h x w */
    bool grid_given;          /* 4-D input: label tiles "o,i" */
    double lo, hi;            /* the shared colour scale */
    bool diverging;
} tiles_ctx;

/* The tiles' map at t of their scale: viridis; blue-white-red for values
 * of both signs */
static void tiles_map(const void *ctx, double t, double rgb[3]) {
    static const double div[3][3] = {{0.020, 0.188, 0.380}, {0.969, 0.969, 0.969}, {0.404, 0.000, 0.122}};
    const tiles_ctx *c = ctx;
    if (!c->diverging) {
        viridis(t, rgb);
        return;
    }
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double s = t * 2;
    int i = s >= 1 ? 1 : 0;
    double f = s - i;
    for (int k = 0; k < 3; k++) rgb[k] = div[i][k] + f * (div[i + 1][k] - div[i][k]);
}

/* v's colour: NaN/Inf magenta, impossible to miss */
static void colour(const tiles_ctx *c, double v, double rgb[3]) {
    if (!isfinite(v)) {
        rgb[0] = 1, rgb[1] = 0, rgb[2] = 1;
        return;
    }
    tiles_map(c, (v - c->lo) / (c->hi - c->lo), rgb);
}

static void draw_tiles(cairo_t *cr, const void *ctx) {
    const tiles_ctx *c = ctx;
    canvas_titled(cr, "sans-serif", c->title, (PLOT_W - 110) / 2.0, 20);
    /* grid area: x in [20, PLOT_W-130], y in [45, PLOT_H-15]; square pixels */
    double gw = PLOT_W - 150, gh = PLOT_H - 60, gap = 14;
    double cell = fmin((gw - gap * (double)(c->cols - 1)) / (double)(c->cols * c->w), (gh - gap * (double)c->rows) / (double)(c->rows * c->h));
    double tw = cell * (double)c->w, th = cell * (double)c->h;
    double x0 = 20 + (gw - (tw + gap) * (double)c->cols + gap) / 2, y0 = 45;
    cairo_set_font_size(cr, 10);
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t q = 0; q < c->cols; q++) {
            int64_t t = r * c->cols + q;
            if (t >= c->n) break;
            double tx = x0 + (double)q * (tw + gap), ty = y0 + (double)r * (th + gap) + 12;
            const float *img = c->x + t * c->h * c->w;
            cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE); /* crisp pixels, no seams */
            for (int64_t i = 0; i < c->h; i++)
                for (int64_t j = 0; j < c->w; j++) {
                    double rgb[3];
                    colour(c, img[i * c->w + j], rgb);
                    fill_rect(cr, rgb, tx + (double)j * cell, ty + (double)i * cell, cell, cell);
                }
            cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);
            cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
            cairo_set_line_width(cr, 0.5);
            cairo_rectangle(cr, tx, ty, tw, th);
            cairo_stroke(cr);
            char lab[48];
            if (c->grid_given) snprintf(lab, sizeof lab, "%lld,%lld", (long long)r, (long long)q);
            else snprintf(lab, sizeof lab, "%lld", (long long)t);
            cairo_set_source_rgb(cr, 0, 0, 0);
            text_at(cr, lab, tx + tw / 2, ty - 2, 0.5, 1.0);
        }
    /* colour bar with ticks */
    double bx = PLOT_W - 100, by = 60, bw = 22, bh = PLOT_H - 120;
    colour_bar(cr, tiles_map, c, bx, by, bw, bh);
    cairo_set_font_size(cr, 11);
    double step = nice_step(c->hi - c->lo, 6);
    char lab[48];
    for (double v = ceil(c->lo / step) * step; v <= c->hi + step * 1e-9; v += step) {
        double y = by + bh - (v - c->lo) / (c->hi - c->lo) * bh;
        cairo_move_to(cr, bx + bw, y);
        cairo_line_to(cr, bx + bw + 4, y);
        cairo_stroke(cr);
        tick_label(lab, sizeof lab, v, step);
        text_at(cr, lab, bx + bw + 7, y, 0.0, 0.5);
    }
}

/* The tiles of a (checked) and their shared colour scale. */
static ts_status tiles_setup(tiles_ctx *c, const char *what, const char *title, const ts_array *a) {
    if (!a || !a->data) return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: an array with data is required", what);
    if (a->dtype != TS_F32 || (a->ndim != 3 && a->ndim != 4)) {
        char s[128];
        return ts_error(TS_ERR_SHAPE, "%s: takes f32 [T,H,W] or [R,C,H,W], got %s", what, ts_array_shape_str(a, s, sizeof s));
    }
    *c = (tiles_ctx){.title = title, .x = a->data, .grid_given = a->ndim == 4, .lo = INFINITY, .hi = -INFINITY};
    int64_t T = a->ndim == 4 ? a->shape[0] * a->shape[1] : a->shape[0];
    c->h = a->shape[a->ndim - 2], c->w = a->shape[a->ndim - 1];
    if (T < 1 || T > 4096 || c->h < 1 || c->w < 1 || c->h * c->w > 1 << 20)
        return ts_error(TS_ERR_SHAPE, "%s: %lld tiles of %lldx%lld; give 1 to 4096 tiles of at most 2^20 pixels", what, (long long)T,
                        (long long)c->h, (long long)c->w);
    if (a->ndim == 4) c->rows = a->shape[0], c->cols = a->shape[1];
    else {
        c->cols = (int64_t)ceil(sqrt((double)T * 1.3));
        c->rows = (T + c->cols - 1) / c->cols;
    }
    for (int64_t i = 0; i < T * c->h * c->w; i++) {
        float v = c->x[i];
        if (!isfinite(v)) continue;
        c->lo = fmin(c->lo, v), c->hi = fmax(c->hi, v);
    }
    if (!(c->lo <= c->hi)) c->lo = 0, c->hi = 1; /* nothing finite */
    c->diverging = c->lo < 0 && c->hi > 0;
    if (c->diverging) c->hi = fmax(-c->lo, c->hi), c->lo = -c->hi;
    widen(&c->lo, &c->hi);
    c->n = T;
    return TS_OK;
}

ts_status ts_plot_tiles(const char *path, const char *title, const ts_array *a) {
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_tiles: a path and an array with data are required");
    tiles_ctx c;
    ts_status st = tiles_setup(&c, "ts_plot_tiles", title, a);
    return st ? st : render(path, draw_tiles, &c);
}

ts_status ts_plot_tiles_png(unsigned char **png, size_t *n, int *width, int *height, const char *title, const ts_array *a) {
    if (!png || !n || !width || !height) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_tiles_png: NULL argument");
    tiles_ctx c;
    ts_status st = tiles_setup(&c, "ts_plot_tiles_png", title, a);
    if (st) return st;
    *width = PLOT_W, *height = PLOT_H;
    return render_png_memory(PLOT_W, PLOT_H, draw_tiles, &c, png, n);
}

/* ------------------------------------------------- compare: error plot */

/* The words of one error plot: compare's tolerance check or its precision
 * ranking (--rank). */
typedef struct errors_words {
    const char *title, *xlabel, *ylabel, *marked, *none, *legend;
    double lowest; /* log10 of the smallest error drawn apart from the bottom */
} errors_words;

static const errors_words TOLERANCE_WORDS = {"Max relative error per tensor", "tensor, in topological order",
                                             "max relative error (log10: -6 is 1e-6)", "first divergence", "every tensor within tolerance",
                                             "dashed: tolerance at the largest |ref| (rtol + atol/max|ref|)   green: pass   red: fail",
                                             -INFINITY};
static const errors_words PRECISION_WORDS = {"Relative error per tensor: ||a - b|| / ||b||",
                                             "tensor: values in graph order, then gradients in backward order, then optimizer state",
                                             "relative error (log10: -3 is 1e-3)", "precision first lost at", "no jump in the error",
                                             "dashed: the jump bar (factor x the median before, at least the floor)   red: above it",
                                             -9}; /* below f32's noise: at the bottom */

typedef struct errors_ctx {
    const char *const *names;
    const double *rel, *tol;
    const int *pass;
    int n, mark;
    double y0, y1; /* log10 range shown */
    const errors_words *words;
} errors_ctx;

/* log10 of an error, kept inside the frame (0 at the floor, inf at the top). */
static double log_clip(const errors_ctx *c, double v) {
    if (!(v > 0)) return c->y0;
    if (isinf(v)) return c->y1;
    return fmin(fmax(log10(v), c->y0), c->y1);
}

static void draw_errors(cairo_t *cr, const void *ctx) {
    const errors_ctx *c = ctx;
    frame f = {90, 50, PLOT_W - 90 - 30, PLOT_H - 50 - 75, -0.5, c->n > 1 ? c->n - 0.5 : 0.5, c->y0, c->y1};
    draw_frame(cr, &f, c->words->title, c->words->xlabel, c->words->ylabel);
    cairo_save(cr);
    cairo_rectangle(cr, f.left, f.top, f.width, f.height);
    cairo_clip(cr);
    /* the tolerance, as a relative error: a dashed step line */
    const double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
    cairo_set_line_width(cr, 1.5);
    for (int i = 0; i < c->n; i++) {
        double y = py(&f, log_clip(c, c->tol[i]));
        if (i == 0) cairo_move_to(cr, px(&f, i - 0.5), y);
        else cairo_line_to(cr, px(&f, i - 0.5), y);
        cairo_line_to(cr, px(&f, i + 0.5), y);
    }
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    if (c->mark >= 0) { /* the first divergence */
        cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
        cairo_move_to(cr, px(&f, c->mark), f.top);
        cairo_line_to(cr, px(&f, c->mark), f.top + f.height);
        cairo_stroke(cr);
    }
    cairo_set_line_width(cr, 1.0);
    for (int i = 0; i < c->n; i++) {
        bool bad = c->pass ? !c->pass[i] : !(c->rel[i] <= c->tol[i]);
        if (bad) cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
        else cairo_set_source_rgb(cr, 0.17, 0.63, 0.17);
        cairo_arc(cr, px(&f, i), py(&f, log_clip(c, c->rel[i])), 4, 0, 2 * M_PI);
        cairo_fill(cr);
    }
    cairo_restore(cr);
    draw_box(cr, &f);
    cairo_set_font_size(cr, 12);
    cairo_set_source_rgb(cr, 0, 0, 0);
    char note[600];
    if (c->mark >= 0) {
        snprintf(note, sizeof note, "%s: %s", c->words->marked, c->names[c->mark]);
        cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
    } else snprintf(note, sizeof note, "%s", c->words->none);
    text_at(cr, note, f.left + 8, f.top + 8, 0.0, 0.0);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    text_at(cr, c->words->legend, f.left + 8, f.top + 26, 0.0, 0.0);
}

static ts_status plot_errors(const char *fn, const errors_words *words, const char *path, const char *const *names, const double *rel,
                             const double *tol, const int *pass, int n, int mark) {
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: no path given", fn);
    if (n < 0 || (n > 0 && (!names || !rel || !tol)) || mark >= n)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: %d tensors with missing data or a bad marked index %d", fn, n, mark);
    errors_ctx c = {names, rel, tol, pass, n, mark, INFINITY, -INFINITY, words};
    for (int i = 0; i < n; i++) {
        double v[2] = {rel[i], tol[i]};
        for (int k = 0; k < 2; k++)
            if (v[k] > 0 && isfinite(v[k])) c.y0 = fmin(c.y0, floor(log10(v[k]))), c.y1 = fmax(c.y1, ceil(log10(v[k])));
    }
    c.y0 = fmax(c.y0, words->lowest);
    if (!(c.y0 <= c.y1)) c.y0 = -8, c.y1 = 0;
    c.y0 -= 1; /* room for exact matches at the floor */
    c.y1 += 1; /* and for infinite errors at the top */
    return render(path, draw_errors, &c);
}

ts_status ts_plot_errors(const char *path, const char *const *names, const double *max_rel, const double *tol, const int *pass,
                         int n, int first_failure) {
    return plot_errors("ts_plot_errors", &TOLERANCE_WORDS, path, names, max_rel, tol, pass, n, first_failure);
}

ts_status ts_plot_precision(const char *path, const char *const *names, const double *rel_error, const double *threshold, int n,
                            int jump) {
    return plot_errors("ts_plot_precision", &PRECISION_WORDS, path, names, rel_error, threshold, NULL, n, jump);
}

/* ------------------------------------------------------- attention maps */

#define ATT_PANEL 260 /* pixels per head panel, at least */
#define ATT_LABEL_CELL 12 /* pixels per position when the axes are labelled: characters of 10 px */
#define ATT_COLS 4

typedef struct att_ctx {
    const char *title;
    const float *probs; /* [heads, T, T] */
    int heads, T;
    const char *labels;
    double vmax;
    int W, H;
    int panel; /* pixels per head panel */
} att_ctx;

/* a printable form of one label character */
static const char *label_text(char ch, char *buf) {
    if (ch == '\n') return "\xe2\x86\xb5"; /* U+21B5 */
    if (ch == ' ') return "\xe2\x90\xa3";  /* U+2423 */
    if ((unsigned char)ch < 0x20 || (unsigned char)ch >= 0x7f) return "?";
    buf[0] = ch, buf[1] = '\0';
    return buf;
}

static void draw_attention(cairo_t *cr, const void *vctx) {
    const att_ctx *c = vctx;
    int T = c->T, cols = c->heads < ATT_COLS ? c->heads : ATT_COLS;
    bool labelled = c->labels && T <= 64;
    double margin = labelled ? 28 : 14, top = 50;
    canvas_titled(cr, "monospace", c->title, c->W / 2.0, 22);
    double cell = (c->panel - margin - 10) / (double)T;
    for (int h = 0; h < c->heads; h++) {
        double x0 = (h % cols) * c->panel + margin, y0 = top + (h / cols) * (c->panel + 20) + margin;
        const float *p = c->probs + (int64_t)h * T * T;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                float v = p[(int64_t)i * T + j];
                double rgb[3] = {1, 1, 1}; /* exactly 0 (masked): left white */
                if (v != 0.0f) viridis(v / c->vmax, rgb);
                fill_rect(cr, rgb, x0 + j * cell, y0 + i * cell, cell + 0.3, cell + 0.3);
            }
        outline(cr, x0, y0, cell * T, cell * T);
        char head[32];
        snprintf(head, sizeof head, "head %d", h);
        cairo_set_font_size(cr, 12);
        text_at(cr, head, x0 + cell * T / 2, y0 - (labelled ? 18 : 4), 0.5, 1.0);
        if (labelled) { /* keys along the top, queries down the left */
            cairo_set_font_size(cr, cell - 2 < 12 ? cell - 2 : 12);
            char b[2];
            for (int i = 0; i < T; i++) {
                const char *s = label_text(c->labels[i], b);
                text_at(cr, s, x0 + (i + 0.5) * cell, y0 - 2, 0.5, 1.0);
                text_at(cr, s, x0 - 3, y0 + (i + 0.5) * cell, 1.0, 0.5);
            }
        }
    }
    /* colour bar */
    double bx = cols * c->panel + 20, by = top + 30, bh = c->panel - 60;
    colour_bar(cr, viridis_map, NULL, bx, by, 18, bh);
    cairo_set_font_size(cr, 11);
    char lab[32];
    snprintf(lab, sizeof lab, "%.3g", c->vmax);
    text_at(cr, lab, bx + 22, by, 0.0, 0.5);
    text_at(cr, "0+", bx + 22, by + bh, 0.0, 0.5);
    text_at(cr, "masked: white", bx - 10, by + bh + 22, 0.0, 0.5);
}

static ts_status attention_ctx(att_ctx *c, const char *title, const float *probs, int heads, int T, const char *labels) {
    if (!probs || heads < 1 || heads > 64 || T < 1 || T > 1024)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_attention: probabilities [heads, T, T] with 1..64 heads and T 1..1024 are required");
    int cols = heads < ATT_COLS ? heads : ATT_COLS, rows = (heads + ATT_COLS - 1) / ATT_COLS;
    bool labelled = labels && T <= 64; /* as draw_attention: margin 28 and 10 px beside the cells */
    int panel = labelled && 38 + T * ATT_LABEL_CELL > ATT_PANEL ? 38 + T * ATT_LABEL_CELL : ATT_PANEL;
    *c = (att_ctx){title, probs, heads, T, labels, 0, cols * panel + 110, 50 + rows * (panel + 20) + 20, panel};
    for (int64_t i = 0; i < (int64_t)heads * T * T; i++)
        if (probs[i] > c->vmax) c->vmax = probs[i];
    if (!(c->vmax > 0)) c->vmax = 1;
    return TS_OK;
}

ts_status ts_plot_attention(const char *png_path, const char *title, const float *probs, int heads, int T, const char *labels) {
    if (!png_path || !*png_path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_attention: no path given");
    att_ctx c = {0};
    ts_status st = attention_ctx(&c, title, probs, heads, T, labels);
    return st ? st : render_size(png_path, c.W, c.H, draw_attention, &c);
}

ts_status ts_plot_attention_png(unsigned char **png, size_t *n, int *width, int *height, const char *title, const float *probs, int heads,
                                int T, const char *labels) {
    if (!png || !n || !width || !height) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_attention_png: NULL argument");
    att_ctx c = {0};
    ts_status st = attention_ctx(&c, title, probs, heads, T, labels);
    if (st) return st;
    *width = c.W, *height = c.H;
    return render_png_memory(c.W, c.H, draw_attention, &c, png, n);
}

/* ------------------------------------------------ memory over the step */

#define MEM_MAX_CLASSES 8

typedef struct mem_ctx {
    const char *title;
    const double *bytes; /* [n_classes][n_points], stacked in class order */
    const char *const *names;
    int n_classes, n_points, backward_at, peak;
    double scale; /* bytes per unit shown */
    const char *unit;
    frame f;
} mem_ctx;

static void draw_memory(cairo_t *cr, const void *vctx) {
    const mem_ctx *c = vctx;
    const frame *f = &c->f;
    char y_label[64];
    snprintf(y_label, sizeof y_label, "live bytes (%s), stacked", c->unit);
    draw_frame(cr, f, c->title, c->backward_at >= 0 ? "point of the step: forward ops | backward ops | update" : "point of the step: forward ops",
               y_label);
    cairo_save(cr);
    cairo_rectangle(cr, f->left, f->top, f->width, f->height);
    cairo_clip(cr);
    for (int k = c->n_classes - 1; k >= 0; k--) { /* top band first: each band is the fill down to the axis, then the next over it */
        const double *rgb = series_rgb[k % MAX_SERIES];
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_move_to(cr, px(f, -0.5), py(f, 0));
        for (int i = 0; i < c->n_points; i++) {
            double top = 0;
            for (int j = 0; j <= k; j++) top += c->bytes[(size_t)j * (size_t)c->n_points + (size_t)i];
            cairo_line_to(cr, px(f, i - 0.5), py(f, top / c->scale));
            cairo_line_to(cr, px(f, i + 0.5), py(f, top / c->scale));
        }
        cairo_line_to(cr, px(f, c->n_points - 0.5), py(f, 0));
        cairo_close_path(cr);
        cairo_fill(cr);
    }
    cairo_set_line_width(cr, 1.5);
    cairo_set_dash(cr, (const double[]){6, 4}, 2, 0);
    if (c->backward_at >= 0) {
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        cairo_move_to(cr, px(f, c->backward_at - 0.5), f->top);
        cairo_line_to(cr, px(f, c->backward_at - 0.5), f->top + f->height);
        cairo_stroke(cr);
    }
    cairo_restore(cr);
    draw_box(cr, f);
    if (c->peak >= 0) { /* the peak, named */
        double total = 0;
        for (int j = 0; j < c->n_classes; j++) total += c->bytes[(size_t)j * (size_t)c->n_points + (size_t)c->peak];
        cairo_set_source_rgb(cr, 0.8, 0, 0);
        cairo_set_line_width(cr, 1.5);
        cairo_move_to(cr, px(f, c->peak), f->top);
        cairo_line_to(cr, px(f, c->peak), f->top + f->height);
        cairo_stroke(cr);
        char lab[96];
        snprintf(lab, sizeof lab, "peak %.3g %s at point %d", total / c->scale, c->unit, c->peak);
        cairo_set_font_size(cr, 12);
        text_boxed(cr, lab, px(f, c->peak) + 4, f->top + 6, c->peak > c->n_points * 2 / 3 ? 1.0 : 0.0, 0.0);
    }
    /* legend: top right, the stack's order (first at the bottom) */
    cairo_set_font_size(cr, 12);
    double wmax = 0;
    for (int k = 0; k < c->n_classes; k++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, c->names[k], &e);
        wmax = fmax(wmax, e.x_advance);
    }
    double lw = wmax + 40, lh = 20.0 * c->n_classes + 10, lx = f->left + 10, ly = f->top + 8;
    legend_box(cr, lx, ly, lw, lh);
    for (int k = c->n_classes - 1, row = 0; k >= 0; k--, row++) {
        double y = ly + 15 + 20.0 * row;
        fill_rect(cr, series_rgb[k % MAX_SERIES], lx + 8, y - 6, 22, 12);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, c->names[k], lx + 36, y, 0.0, 0.5);
    }
}

ts_status ts_plot_memory(const char *path, const char *title, const double *bytes, const char *const *class_names, int n_classes,
                         int n_points, int backward_at, int peak) {
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_memory: no path given");
    if (n_classes < 1 || n_classes > MEM_MAX_CLASSES || n_points < 1 || !bytes || !class_names)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_memory: give 1 to %d classes of at least one point (%d, %d)", MEM_MAX_CLASSES,
                        n_classes, n_points);
    double top = 0;
    for (int i = 0; i < n_points; i++) {
        double t = 0;
        for (int k = 0; k < n_classes; k++) {
            double b = bytes[(size_t)k * (size_t)n_points + (size_t)i];
            if (!(b >= 0) || isinf(b)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_memory: class %d at point %d holds %g bytes", k, i, b);
            t += b;
        }
        top = fmax(top, t);
    }
    mem_ctx c = {title, bytes, class_names, n_classes, n_points, backward_at, peak < n_points ? peak : -1, 1, "B",
                 {90, 60, PLOT_W - 90 - 30, PLOT_H - 60 - 75, -0.5, n_points - 0.5, 0, 1}};
    if (top >= 1e9) c.scale = 1e9, c.unit = "GB";
    else if (top >= 1e6) c.scale = 1e6, c.unit = "MB";
    else if (top >= 1e3) c.scale = 1e3, c.unit = "kB";
    c.f.y1 = top > 0 ? top / c.scale * 1.45 : 1; /* room above the stack for the legend and the peak's label */
    return render(path, draw_memory, &c);
}

/* ------------------------------------------- heat map: layers by steps */

#define HEAT_MAX_ROWS 4096
#define HEAT_MAX_COLS (1 << 20)

typedef struct heat_ctx {
    const char *title;
    const char *const *rows;
    int n_rows, n_cols;
    const int64_t *steps;
    const double *v;
    bool log;
    double lo, hi;   /* the colour scale's ends, in log10 when log */
    double left, top, cell_h, width;
    int W, H;
} heat_ctx;

/* v's place on the colour scale, or -1 for NaN/Inf */
static double heat_t(const heat_ctx *c, double v) {
    if (!isfinite(v)) return -1;
    double x = c->log ? log10(v) : v;
    return c->hi > c->lo ? (x - c->lo) / (c->hi - c->lo) : 0.5;
}

static void draw_heatmap(cairo_t *cr, const void *vctx) {
    const heat_ctx *c = vctx;
    canvas_titled(cr, "sans-serif", c->title, c->W / 2.0, 20);
    double cw = c->width / c->n_cols;
    for (int r = 0; r < c->n_rows; r++)
        for (int k = 0; k < c->n_cols; k++) {
            double t = heat_t(c, c->v[(size_t)r * (size_t)c->n_cols + (size_t)k]), rgb[3] = {1, 0, 1}; /* NaN/Inf: magenta */
            if (t >= 0) viridis(t, rgb);
            fill_rect(cr, rgb, c->left + k * cw, c->top + r * c->cell_h, cw + 0.4, c->cell_h + 0.4);
        }
    outline(cr, c->left, c->top, c->width, c->n_rows * c->cell_h);
    cairo_set_font_size(cr, c->cell_h - 4 < 12 ? c->cell_h - 4 : 12);
    for (int r = 0; r < c->n_rows; r++) text_at(cr, c->rows[r], c->left - 6, c->top + (r + 0.5) * c->cell_h, 1.0, 0.5);
    /* steps along the bottom: about 8 labels */
    cairo_set_font_size(cr, 11);
    double bottom = c->top + c->n_rows * c->cell_h;
    int every = c->n_cols > 8 ? (c->n_cols + 7) / 8 : 1;
    char lab[64];
    for (int k = 0; k < c->n_cols; k += every) {
        snprintf(lab, sizeof lab, "%lld", (long long)c->steps[k]);
        double x = c->left + (k + 0.5) * cw;
        cairo_move_to(cr, x, bottom);
        cairo_line_to(cr, x, bottom + 4);
        cairo_stroke(cr);
        text_at(cr, lab, x, bottom + 6, 0.5, 0.0);
    }
    cairo_set_font_size(cr, 13);
    text_at(cr, "optimizer step (from 0)", c->left + c->width / 2, bottom + 26, 0.5, 0.0);
    /* the colour bar: its ends and middle labelled, its scale said */
    double bx = c->left + c->width + 24, by = c->top, bh = fmax(c->n_rows * c->cell_h, 120);
    colour_bar(cr, viridis_map, NULL, bx, by, 18, bh);
    cairo_set_font_size(cr, 11);
    for (int k = 0; k <= 2; k++) {
        double x = c->hi - k * (c->hi - c->lo) / 2;
        snprintf(lab, sizeof lab, "%.3g", c->log ? pow(10.0, x) : x);
        text_at(cr, lab, bx + 22, by + k * bh / 2, 0.0, 0.5);
    }
    text_at(cr, c->log ? "colour: log10 scale" : "colour: linear scale", bx - 4, by + bh + 14, 0.0, 0.5);
    text_at(cr, "magenta: NaN/Inf", bx - 4, by + bh + 30, 0.0, 0.5);
}

ts_status ts_plot_heatmap(const char *path, const char *title, const char *const *row_names, int n_rows, const int64_t *steps, int n_cols,
                          const double *values, int log_scale) {
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_heatmap: no path given");
    if (!row_names || !steps || !values || n_rows < 1 || n_rows > HEAT_MAX_ROWS || n_cols < 1 || n_cols > HEAT_MAX_COLS)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_plot_heatmap: give names, steps and values of 1 to %d rows and 1 to %d steps (%d, %d)",
                        HEAT_MAX_ROWS, HEAT_MAX_COLS, n_rows, n_cols);
    heat_ctx c = {title, row_names, n_rows, n_cols, steps, values, log_scale != 0, INFINITY, -INFINITY, 0, 50, 0, 0, 0, 0};
    for (size_t i = 0; i < (size_t)n_rows * (size_t)n_cols; i++) { /* the log scale only where every finite value is > 0 */
        if (!isfinite(values[i])) continue;
        if (values[i] <= 0) c.log = false;
        c.lo = fmin(c.lo, values[i]);
        c.hi = fmax(c.hi, values[i]);
    }
    if (!(c.lo <= c.hi)) c.lo = 0, c.hi = 1; /* none finite */
    if (c.log) c.lo = log10(c.lo), c.hi = log10(c.hi);
    size_t longest = 0;
    for (int r = 0; r < n_rows; r++) longest = strlen(row_names[r]) > longest ? strlen(row_names[r]) : longest;
    c.cell_h = n_rows <= 24 ? 24 : n_rows <= 60 ? 14 : 8;
    c.left = 20 + 7.0 * (double)(longest < 48 ? longest : 48);
    c.width = n_cols < 100 ? 700 : 900;
    c.W = (int)(c.left + c.width + 170);
    c.H = (int)(c.top + fmax(n_rows * c.cell_h, 120) + 60);
    return render_size(path, c.W, c.H, draw_heatmap, &c);
}
