/* test_weights.c -- ts_graph_save_weights / ts_graph_load_weights: a
 * directory of .npy files and one .npz round-trip every parameter; loading
 * is strict (a missing parameter, an extra array or another shape is an
 * error naming it) and a failed load changes nothing.
 * ts_graph_load_weights_matching (PyTorch's strict=False) sets what pairs
 * by name, names the rest to its callback, keeps the shape and NaN checks,
 * and refuses a file that holds none of the parameters. Symbolic links
 * (an .npy in the folder, an .npz) are refused, not followed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static ts_graph *model(uint64_t seed) {
    ts_graph *g = ts_graph_new(seed);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){4, 6});
    ts_linear(g, ts_relu(g, ts_linear(g, x, 5, "fc1")), 3, "fc2");
    return g;
}

static float value0(ts_graph *g, const char *name) {
    ts_array a;
    ts_tensor_info(ts_graph_find(g, name), &a);
    return ((float *)a.data)[0];
}

typedef struct skips {
    int missing, unexpected;
    char last[2][64];
} skips;

static void note(void *ctx, const char *name, ts_weight_skip why) {
    skips *s = ctx;
    int k = why == TS_WEIGHT_MISSING ? 0 : 1;
    if (k) s->unexpected++;
    else s->missing++;
    snprintf(s->last[k], sizeof s->last[k], "%s", name);
}

static int same_weights(ts_graph *a, ts_graph *b) {
    const char *names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    for (int i = 0; i < 4; i++) {
        ts_array x, y;
        ts_tensor_info(ts_graph_find(a, names[i]), &x);
        ts_tensor_info(ts_graph_find(b, names[i]), &y);
        if (memcmp(x.data, y.data, (size_t)ts_array_numel(&x) * 4) != 0) return 0;
    }
    return 1;
}

int main(void) {
    char dir[256], path[512], cmd[700];
    snprintf(dir, sizeof dir, "%s/ts_weights.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    ts_graph *a = model(1), *b = model(2);
    CHECK(!same_weights(a, b), "two seeds give different weights");

    snprintf(path, sizeof path, "%s/w", dir);
    CHECK_OK(ts_graph_save_weights(a, path), "save to a directory of .npy");
    CHECK_OK(ts_graph_load_weights(b, path), "load it into another graph");
    CHECK(same_weights(a, b), "the weights are equal after the round trip");

    ts_graph *c = model(3);
    snprintf(path, sizeof path, "%s/w.npz", dir);
    const int npz = ts_has_feature("npz");
    if (npz) {
        CHECK_OK(ts_graph_save_weights(a, path), "save to an .npz");
        CHECK_OK(ts_graph_load_weights(c, path), "load the .npz");
        CHECK(same_weights(a, c), "equal after the .npz round trip");
    } else { /* built without libarchive: the strict checks below use the directory */
        CHECK(ts_graph_save_weights(a, path) == TS_ERR_UNSUPPORTED && strstr(ts_last_error(), "apt-get install libarchive-dev"),
              "built without libarchive, saving an .npz says what to install: %s", ts_last_error());
        CHECK(access(path, F_OK) != 0, "... and writes nothing");
        snprintf(path, sizeof path, "%s/w", dir);
    }

    /* strict: a graph with another layer size, an extra parameter, a missing one */
    ts_graph *wide = ts_graph_new(4);
    ts_tensor *x = ts_input(wide, "x", TS_F32, 2, (int64_t[]){4, 6});
    ts_linear(wide, ts_relu(wide, ts_linear(wide, x, 7, "fc1")), 3, "fc2");
    float before = value0(wide, "fc2.bias");
    ts_status st = ts_graph_load_weights(wide, path);
    CHECK(st == TS_ERR_SHAPE && strstr(ts_last_error(), "fc1.weight") && strstr(ts_last_error(), "[7,6]"),
          "another shape is an error naming the parameter: %s", ts_last_error());
    CHECK(value0(wide, "fc2.bias") == before, "... and a failed load changes nothing (fc2.bias, which fits, is untouched)");

    ts_graph *more = model(5);
    ts_param(more, "extra.weight", 1, (int64_t[]){2});
    if (npz) {
        st = ts_graph_load_weights(more, path);
        CHECK(st == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "extra.weight"), "a parameter the file lacks: %s", ts_last_error());
    }
    snprintf(path, sizeof path, "%s/w", dir);
    st = ts_graph_load_weights(more, path);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "extra.weight.npy"), "... also from a directory: %s", ts_last_error());

    ts_graph *fewer = ts_graph_new(6);
    x = ts_input(fewer, "x", TS_F32, 2, (int64_t[]){4, 6});
    ts_linear(fewer, x, 5, "fc1");
    st = ts_graph_load_weights(fewer, path);
    CHECK(st == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "fc2."), "an array the model lacks: %s", ts_last_error());

    /* not strict: what pairs by name is set, the rest named and left */
    snprintf(path, sizeof path, "%s/w", dir);
    skips sk = {0};
    size_t loaded = 0;
    ts_array ev;
    ts_tensor_info(ts_graph_find(more, "extra.weight"), &ev);
    float extra0 = ((float *)ev.data)[0];
    CHECK_OK(ts_graph_load_weights_matching(more, path, note, &sk, &loaded), "matching: a parameter the file lacks is no error");
    CHECK(loaded == 4 && same_weights(a, more) && ((float *)ev.data)[0] == extra0,
          "... the 4 the file has are set (%zu), extra.weight keeps its value", loaded);
    CHECK(sk.missing == 1 && strcmp(sk.last[0], "extra.weight") == 0 && sk.unexpected == 0,
          "... and the callback is told of extra.weight, missing (%d missing, last '%s'; %d unexpected)", sk.missing, sk.last[0],
          sk.unexpected);
    memset(&sk, 0, sizeof sk);
    CHECK_OK(ts_graph_load_weights_matching(fewer, path, note, &sk, &loaded), "matching: arrays the model lacks are no error");
    CHECK(loaded == 2 && sk.unexpected == 2 && strncmp(sk.last[1], "fc2.", 4) == 0 && sk.missing == 0,
          "... fc1's 2 are set (%zu), fc2's 2 skipped and named (%d, last '%s')", loaded, sk.unexpected, sk.last[1]);
    CHECK_OK(ts_graph_load_weights_matching(fewer, path, NULL, NULL, NULL), "... the callback and the count may be NULL");
    before = value0(wide, "fc2.bias");
    st = ts_graph_load_weights_matching(wide, path, NULL, NULL, &loaded);
    CHECK(st == TS_ERR_SHAPE && strstr(ts_last_error(), "fc1.weight") && value0(wide, "fc2.bias") == before && loaded == 0,
          "matching: another shape is still an error, and nothing is set: %s", ts_last_error());
    ts_graph *other = ts_graph_new(7);
    ts_linear(other, ts_input(other, "x", TS_F32, 2, (int64_t[]){4, 6}), 5, "proj");
    before = value0(other, "proj.bias");
    st = ts_graph_load_weights_matching(other, path, NULL, NULL, NULL);
    CHECK(st == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "none of the model's parameters") && value0(other, "proj.bias") == before,
          "matching: a file that holds none of the parameters is refused: %s", ts_last_error());
    ts_graph_free(other);

    CHECK(ts_graph_save_weights(a, "") == TS_ERR_INVALID_ARGUMENT, "an empty path is refused");
    CHECK(ts_graph_load_weights(a, "") == TS_ERR_INVALID_ARGUMENT, "... for loading too");
    snprintf(path, sizeof path, "%s/none", dir);
    CHECK(ts_graph_load_weights(a, path) == TS_ERR_IO, "a missing path: %s", ts_last_error());
    CHECK(ts_graph_load_weights(a, "/dev/null") == TS_ERR_IO, "a device file is refused: %s", ts_last_error());

    /* symbolic links are not followed (docs/reliability.md, rule 1): a
     * weights folder whose fc1.weight.npy links to a file elsewhere, and a
     * linked .npz, are refused naming the link; nothing is set */
    char wl[300], target[300], link[330], sh[1400];
    snprintf(wl, sizeof wl, "%s/wl", dir);
    snprintf(sh, sizeof sh, "cp -r '%s/w' '%s' && mv '%s/fc1.weight.npy' '%s/outside.npy'", dir, wl, wl, dir);
    CHECK(system(sh) == 0, "a copy of the weights folder, its fc1.weight.npy moved out");
    snprintf(target, sizeof target, "%s/outside.npy", dir);
    snprintf(link, sizeof link, "%s/fc1.weight.npy", wl);
    CHECK(symlink(target, link) == 0, "fc1.weight.npy -> a file outside the folder");
    ts_graph *d = model(8);
    before = value0(d, "fc2.bias");
    st = ts_graph_load_weights(d, wl);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "fc1.weight.npy") && strstr(ts_last_error(), "symbolic link") &&
              value0(d, "fc2.bias") == before,
          "a linked .npy is refused, nothing set: %s", ts_last_error());
    CHECK(ts_npy_load(link, &ev) == TS_ERR_IO && strstr(ts_last_error(), "symbolic link"), "ts_npy_load too: %s", ts_last_error());
    if (npz) {
        snprintf(target, sizeof target, "%s/w.npz", dir);
        snprintf(link, sizeof link, "%s/linked.npz", dir);
        CHECK(symlink(target, link) == 0, "linked.npz -> w.npz");
        st = ts_graph_load_weights(d, link);
        CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "linked.npz") && strstr(ts_last_error(), "symbolic link") &&
                  value0(d, "fc2.bias") == before,
              "a linked .npz is refused, nothing set: %s", ts_last_error());
        unlink(link);
    }
    ts_graph_free(d);
    snprintf(sh, sizeof sh, "rm -rf '%s' '%s/outside.npy'", wl, dir);
    CHECK(system(sh) == 0, "cleaned up");

    /* a NaN in a weight file is refused, and nothing is set */
    snprintf(path, sizeof path, "%s/w", dir);
    ts_tensor *b2 = ts_graph_find(a, "fc2.bias");
    ts_array v;
    CHECK(b2 && ts_tensor_info(b2, &v) == TS_OK, "fc2.bias");
    float saved = ((float *)v.data)[1];
    ((float *)v.data)[1] = NAN;
    snprintf(path, sizeof path, "%s/nan", dir);
    CHECK_OK(ts_graph_save_weights(a, path), "save weights holding a NaN");
    ((float *)v.data)[1] = saved;
    float before_nan = value0(b, "fc1.bias");
    st = ts_graph_load_weights(b, path);
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "fc2.bias") && strstr(ts_last_error(), "NaN"),
          "a weight file with a NaN is refused: %s", ts_last_error());
    CHECK(value0(b, "fc1.bias") == before_nan, "... and nothing is set");

    ts_graph_free(a), ts_graph_free(b), ts_graph_free(c), ts_graph_free(wide), ts_graph_free(more), ts_graph_free(fewer);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
    return check_summary("test_weights");
}
