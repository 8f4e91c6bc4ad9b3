/* test_plot.c -- the cairo plots: files appear complete (PNG signature,
 * cairo reads them back at 800x600; SVG has its root element), and a path
 * that cannot be written gives TS_ERR_IO and leaves nothing behind. */
/* needs: plots */
#include "check.h"
#include "core/core.h"

#include <cairo.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* fontconfig (under cairo's toy text API) keeps its configuration until
 * process exit; under the sanitizer build that is reported as a leak. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }


static uint64_t rng = 0x2545f4914f6cdd1dull;
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) { return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform()); }

static bool png_ok(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t got = fread(head, 1, 8, f);
    fclose(f);
    if (got != 8 || memcmp(head, sig, 8) != 0) return false;
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    bool ok = cairo_surface_status(s) == CAIRO_STATUS_SUCCESS &&
              cairo_image_surface_get_width(s) == 800 && cairo_image_surface_get_height(s) == 600;
    cairo_surface_destroy(s);
    return ok;
}

typedef struct png_reader {
    const unsigned char *p;
    size_t n, at;
} png_reader;
static cairo_status_t read_png(void *closure, unsigned char *data, unsigned int len) {
    png_reader *r = closure;
    if (r->n - r->at < len) return CAIRO_STATUS_READ_ERROR;
    memcpy(data, r->p + r->at, len);
    r->at += len;
    return CAIRO_STATUS_SUCCESS;
}
/* PNG bytes in memory decoded by cairo (NULL when they are not a PNG). */
static cairo_surface_t *decode_png(const unsigned char *png, size_t n) {
    png_reader r = {png, n, 0};
    cairo_surface_t *s = cairo_image_surface_create_from_png_stream(read_png, &r);
    if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) return s;
    cairo_surface_destroy(s);
    return NULL;
}

/* The tallest vertical run of dark pixels in columns [x0, x1), rows [y0, y1). */
static int tallest_dark_run(cairo_surface_t *img, int x0, int x1, int y0, int y1) {
    const unsigned char *d = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img), best = 0;
    for (int x = x0; x < x1; x++)
        for (int y = y0, run = 0; y < y1; y++) {
            const unsigned char *q = d + y * stride + x * 4; /* B G R A */
            run = q[0] + q[1] + q[2] < 3 * 200 ? run + 1 : 0; /* not white: glyphs are antialiased */
            best = run > best ? run : best;
        }
    return best;
}

static bool file_contains(const char *path, const char *needle) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* Names in dir containing ".tmp." (leftover temp files). */
static int leftovers(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

int main(void) {
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/ts_plot_XXXXXX", base);
    if (!mkdtemp(dir)) {
        printf("FAIL cannot make a temp dir under %s\n", base);
        return 1;
    }

    /* Three "gradients" at different scales, with zeros and a NaN. */
    enum { N1 = 20000, N2 = 5000, N3 = 300 };
    float *g1 = malloc(N1 * sizeof *g1), *g2 = malloc(N2 * sizeof *g2), g3[N3];
    for (int i = 0; i < N1; i++) g1[i] = (float)(1e-3 * normal());
    for (int i = 0; i < N2; i++) g2[i] = (float)(3e-6 * normal());
    for (int i = 0; i < N3; i++) g3[i] = i % 3 ? (float)(0.5 * normal()) : 0.0f;
    g1[7] = NAN;
    ts_array arrays[3] = {ts_array_f32(g1, 1, (int64_t[]){N1}),
                          ts_array_f32(g2, 2, (int64_t[]){50, 100}),
                          ts_array_f32(g3, 1, (int64_t[]){N3})};
    snprintf(path, sizeof path, "%s/hist.png", dir);
    ts_status st = ts_plot_gradient_histogram(path, arrays, 3);
    CHECK(st == TS_OK, "gradient histogram written: %s", st ? ts_last_error() : path);
    CHECK(png_ok(path), "histogram is a PNG cairo reads back at 800x600");

    /* Loss and accuracy curves: PNG and SVG. */
    double x[100], loss[100], acc[100], lr[100];
    for (int i = 0; i < 100; i++) {
        x[i] = i;
        loss[i] = 2.3 * exp(-i / 25.0) + 0.05 * uniform();
        acc[i] = 1 - exp(-i / 20.0) * 0.9;
        lr[i] = i < 50 ? 0.5 : 0.25;
    }
    loss[40] = NAN; /* a gap, not a failure */
    ts_series s[3] = {{"loss", x, loss, 100}, {"accuracy", x, acc, 100}, {NULL, x, lr, 100}};
    snprintf(path, sizeof path, "%s/curves.png", dir);
    st = ts_plot_lines(path, "Training", "step", s, 3);
    CHECK(st == TS_OK, "line plot PNG written: %s", st ? ts_last_error() : path);
    CHECK(png_ok(path), "line plot is a PNG cairo reads back at 800x600");
    snprintf(path, sizeof path, "%s/curves.svg", dir);
    st = ts_plot_lines(path, "Training", "step", s, 3);
    CHECK(st == TS_OK && file_contains(path, "<svg"), "line plot SVG written with an <svg> root");

    /* Panels: loss above, accuracy below, each on its own y axis; a lone
     * accuracy point (one epoch) is drawn, in the lower panel only. The
     * series colours are matplotlib's tab10: blue, orange, green. */
    double ax[1] = {99}, ay[1] = {42.5};
    ts_series ls[2] = {{"training loss", x, loss, 100}, {"held-out loss", ax, ay, 0}};
    ts_series as[1] = {{"held-out accuracy (%)", ax, ay, 1}};
    ts_plot_panel pn[2] = {{"loss", ls, 2}, {"accuracy (%)", as, 1}}; /* colours run on: blue, orange, green */
    snprintf(path, sizeof path, "%s/panels.png", dir);
    st = ts_plot_panels(path, "Training", "optimizer step", pn, 2);
    CHECK(st == TS_OK && png_ok(path), "two-panel plot written: %s", st ? ts_last_error() : path);
    cairo_surface_t *img = cairo_image_surface_create_from_png(path);
    int blue_top = 0, blue_bottom = 0, green_top = 0, green_bottom = 0, green_right = 0;
    if (cairo_surface_status(img) == CAIRO_STATUS_SUCCESS) {
        const unsigned char *d = cairo_image_surface_get_data(img);
        int stride = cairo_image_surface_get_stride(img);
        for (int yy = 0; yy < 600; yy++)
            for (int xx = 0; xx < 800; xx++) {
                const unsigned char *p = d + yy * stride + xx * 4; /* B G R A */
                bool blue = abs(p[2] - 31) < 30 && abs(p[1] - 119) < 30 && abs(p[0] - 180) < 30;
                bool green = abs(p[2] - 44) < 30 && abs(p[1] - 160) < 30 && abs(p[0] - 44) < 30;
                bool top = yy < 300;
                blue_top += blue && top, blue_bottom += blue && !top;
                green_top += green && top, green_bottom += green && !top;
                green_right += green && !top && xx > 700 && (yy < 320 || yy > 360); /* the dot, not the legend */
            }
    }
    cairo_surface_destroy(img);
    CHECK(blue_top > 500 && blue_bottom < 50, "the loss line is in the top panel only (%d blue pixels above, %d below)", blue_top, blue_bottom);
    CHECK(green_bottom > 20 && green_top == 0 && green_right > 10,
          "the lone accuracy point is a visible dot at the right of the lower panel (%d green pixels, %d at the point)", green_bottom,
          green_right);
    CHECK(ts_plot_panels(path, "t", "x", pn, 0) == TS_ERR_INVALID_ARGUMENT && ts_plot_panels(path, "t", "x", pn, 5) == TS_ERR_INVALID_ARGUMENT,
          "0 or 5 panels rejected");
    snprintf(path, sizeof path, "%s/hist_captioned.png", dir);
    st = ts_plot_gradient_histogram_captioned(path, arrays, 3, "g1, g2, g3 at step 7");
    CHECK(st == TS_OK && png_ok(path), "captioned histogram written");

    /* Tiles as PNG bytes for TensorBoard: what cairo decodes at the size given. */
    ts_array six = ts_array_f32(g1 + 8, 3, (int64_t[]){6, 5, 5});
    unsigned char *png = NULL;
    size_t png_n = 0;
    int pw = 0, ph = 0;
    st = ts_plot_tiles_png(&png, &png_n, &pw, &ph, "six tiles", &six);
    cairo_surface_t *tiles = st == TS_OK ? decode_png(png, png_n) : NULL;
    CHECK(tiles && cairo_image_surface_get_width(tiles) == pw && cairo_image_surface_get_height(tiles) == ph && pw == 800 && ph == 600,
          "ts_plot_tiles_png: PNG bytes cairo decodes at the %dx%d given", pw, ph);
    if (tiles) cairo_surface_destroy(tiles);
    ts_buffer_free(png);

    /* An attention map labelled with 64 characters: each label is a glyph a
     * reader can make out ('|' drawn at least 7 pixels tall), not a smudge. */
    enum { AH = 4, AT = 64 };
    static float probs[AH * AT * AT];
    for (int h = 0; h < AH; h++)
        for (int i = 0; i < AT; i++)
            for (int j = 0; j <= i; j++) probs[(h * AT + i) * AT + j] = 1.0f / (float)(i + 1);
    char bars[AT + 1];
    memset(bars, '|', AT);
    bars[AT] = '\0';
    png = NULL;
    st = ts_plot_attention_png(&png, &png_n, &pw, &ph, "bars", probs, AH, AT, bars);
    cairo_surface_t *att = st == TS_OK ? decode_png(png, png_n) : NULL;
    int bar = att ? tallest_dark_run(att, 2, 27, 120, ph - 40) : 0; /* the query labels left of the first panel */
    CHECK(att && bar >= 7, "attention map with 64 labels: the labels are legible ('|' %d pixels tall, want >= 7)", bar);
    if (att) cairo_surface_destroy(att);
    ts_buffer_free(png);

    /* Bad arguments. */
    CHECK(ts_plot_lines(path, "t", "x", s, 0) == TS_ERR_INVALID_ARGUMENT, "0 series rejected");
    CHECK(ts_plot_lines(path, "t", "x", s, 9) == TS_ERR_INVALID_ARGUMENT, "9 series rejected");
    ts_array wrong = ts_array_i32((int32_t *)g3, 1, (int64_t[]){N3});
    CHECK(ts_plot_gradient_histogram(path, &wrong, 1) == TS_ERR_INVALID_ARGUMENT,
          "non-f32 array rejected: %s", ts_last_error());
    float nans[4] = {NAN, NAN, INFINITY, NAN};
    ts_array bad = ts_array_f32(nans, 1, (int64_t[]){4});
    CHECK(ts_plot_gradient_histogram(path, &bad, 1) == TS_ERR_INVALID_ARGUMENT,
          "nothing finite to plot rejected: %s", ts_last_error());

    /* Unwritable targets: a missing directory, and a path that is a directory
     * (the temp file is written, the rename fails): TS_ERR_IO, no leftovers. */
    snprintf(path, sizeof path, "%s/no/such/dir/h.png", dir);
    CHECK(ts_plot_gradient_histogram(path, arrays, 3) == TS_ERR_IO && access(path, F_OK) != 0,
          "missing directory: TS_ERR_IO, no file (%s)", ts_last_error());
    snprintf(path, sizeof path, "%s/adir", dir);
    mkdir(path, 0700);
    CHECK(ts_plot_gradient_histogram(path, arrays, 3) == TS_ERR_IO, "target is a directory: %s",
          ts_last_error());
    CHECK(ts_plot_lines(path, "t", "x", s, 1) == TS_ERR_IO, "line plot onto a directory: TS_ERR_IO");
    CHECK(leftovers(dir) == 0, "no temp files left in %s", dir);

    /* Keep the images for a look when asked, else clean up. */
    if (!getenv("TS_KEEP_PLOTS")) {
        const char *names[] = {"hist.png", "curves.png", "curves.svg", "adir"};
        for (int i = 0; i < 4; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            remove(path);
        }
        rmdir(dir);
    } else {
        printf("     plots kept in %s\n", dir);
    }
    free(g1);
    free(g2);
    cairo_debug_reset_static_data(); /* cairo's font caches: keeps LeakSanitizer quiet */
    return check_summary("test_plot");
}
