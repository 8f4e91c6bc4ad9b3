/* cmd_gpt.c -- `tensorscope train --model gpt` on a text corpus and
 * `tensorscope generate` from the saved weights. The model is the
 * library's character GPT (ts_gpt_build); batches are windows of the corpus
 * drawn with a seeded generator, so a reference can replay them; the
 * held-out loss is the mean over fixed windows of the last tenth. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EVAL_SEED 0x5eedull /* the held-out windows: the same for every run */

bool cli_wants_gpt(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--model=gpt") == 0) return true;
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc && strcmp(argv[i + 1], "gpt") == 0) return true;
    }
    return false;
}

typedef struct gpt_run {
    ts_corpus *corpus;
    ts_graph *g;
    ts_gpt gpt;
    ts_gpt_config cfg;
} gpt_run;

static void gpt_run_free(gpt_run *r) {
    ts_graph_free(r->g);
    ts_corpus_free(r->corpus);
    memset(r, 0, sizeof *r);
}

static ts_status gpt_build(gpt_run *r, uint64_t seed) {
    if (!(r->g = ts_graph_new(seed))) return TS_ERR_OUT_OF_MEMORY;
    return ts_gpt_build(r->g, &r->cfg, &r->gpt);
}

/* config.txt: `layers heads embd block_size vocab`, vocab.txt: the vocabulary */
static ts_status save_config(const gpt_run *r, const char *dir) {
    char path[1024];
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/gpt.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return TS_ERR_IO;
    fprintf(f, "layers %lld\nheads %lld\nembd %lld\nblock_size %lld\nvocab %lld\n", (long long)r->cfg.layers, (long long)r->cfg.heads,
            (long long)r->cfg.embd, (long long)r->cfg.block_size, (long long)r->cfg.vocab);
    int bad = fclose(f);
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    if (bad || !(f = fopen(path, "wb"))) return TS_ERR_IO;
    fwrite(ts_corpus_vocab(r->corpus), 1, (size_t)ts_corpus_vocab_size(r->corpus), f);
    return fclose(f) ? TS_ERR_IO : TS_OK;
}

/* mean loss over `batches` held-out batches drawn from EVAL_SEED, with a
 * progress bar on a terminal unless quiet */
static ts_status heldout_loss(ts_model *inf, const gpt_run *r, int32_t *x, int32_t *y, long batches, bool quiet, double *out) {
    uint64_t rng = EVAL_SEED;
    double s = 0;
    cli_progress bar;
    cli_progress_start(&bar, !quiet, "evaluating", batches);
    int64_t B = r->cfg.batch, T = r->cfg.block_size;
    static const char *const names[2] = {"tokens", "targets"};
    for (long b = 0; b < batches; b++) {
        ts_status st = ts_corpus_sample(r->corpus, 1, B, T, &rng, x, y);
        ts_array in[2] = {ts_array_i32(x, 2, (int64_t[]){B, T}), ts_array_i32(y, 2, (int64_t[]){B, T})}, l;
        if (!st) st = ts_model_run(inf, names, in, 2);
        if (!st) st = ts_model_anchored(inf, "loss", &l);
        if (st) {
            cli_progress_end(&bar);
            return st;
        }
        s += ((const float *)l.data)[0];
        cli_progress_update(&bar, b + 1, s / (double)(b + 1));
    }
    cli_progress_end(&bar);
    *out = s / (double)batches;
    return TS_OK;
}

typedef struct gpt_args {
    const char *model, *data, *save_weights, *save_init, *weights, *tensorboard, *attn_dir;
    long layers, heads, embd, block, batch, steps, seed, threads, eval_interval, eval_batches;
    const char *device;
    double lr, weight_decay;
    bool quiet;
    cli_list anchors, watches, attention_maps;
} gpt_args;

/* TENSOR[:SAMPLE]: the tensor name has its own ':<k>', so a sample is the
 * last field only when what precedes it still has a ':' */
static bool parse_map(const char *spec, char *name, size_t n, long *sample) {
    const char *last = strrchr(spec, ':');
    *sample = 0;
    snprintf(name, n, "%s", spec);
    if (last && memchr(spec, ':', (size_t)(last - spec))) {
        char *end;
        errno = 0;
        *sample = strtol(last + 1, &end, 10);
        if (errno || end == last + 1 || *end || *sample < 0) return false;
        name[last - spec] = '\0';
    }
    return true;
}

/* Attention maps of a held-out batch: the anchored [B,H,T,T] tensors as
 * PNGs (and TensorBoard images) for the chosen samples. */
static ts_status attention_maps(ts_model *inf, const gpt_run *r, const gpt_args *a, int32_t *x, int32_t *y, ts_tb_writer *tb,
                                long step) {
    uint64_t rng = EVAL_SEED;
    int64_t B = r->cfg.batch, T = r->cfg.block_size;
    static const char *const names[2] = {"tokens", "targets"};
    ts_array in[2] = {ts_array_i32(x, 2, (int64_t[]){B, T}), ts_array_i32(y, 2, (int64_t[]){B, T})};
    ts_status st = ts_corpus_sample(r->corpus, 1, B, T, &rng, x, y);
    if (!st) st = ts_model_run(inf, names, in, 2);
    const char *vocab = ts_corpus_vocab(r->corpus);
    for (int i = 0; !st && i < a->attention_maps.n; i++) {
        char name[512], path[1200], labels[4097], title[700];
        long s;
        parse_map(a->attention_maps.items[i], name, sizeof name, &s);
        ts_array v;
        if ((st = ts_model_anchored(inf, name, &v))) break;
        if (v.ndim != 4 || v.shape[2] != v.shape[3] || s >= v.shape[0]) {
            fprintf(stderr, "tensorscope: --attention-map %s: the tensor is %s, not [B,H,T,T] with sample %ld < B\n", name,
                    ts_array_shape_str(&v, title, sizeof title), s);
            return TS_ERR_INVALID_ARGUMENT;
        }
        int64_t H = v.shape[1], TT = v.shape[2];
        for (int64_t t = 0; t < TT && t < T; t++) labels[t] = vocab[x[s * T + t]];
        labels[TT < T ? TT : T] = '\0';
        const float *probs = (const float *)v.data + s * H * TT * TT;
        snprintf(title, sizeof title, "%s  sample %ld  step %ld", name, s, step);
        char file[512];
        cli_file_safe(name, file, sizeof file);
        snprintf(path, sizeof path, "%s/attention_%s_s%ld.png", a->attn_dir, file, s);
        mkdir(a->attn_dir, 0777);
        if ((st = ts_plot_attention(path, title, probs, (int)H, (int)TT, TT <= T ? labels : NULL))) break;
        printf("attention map: %s\n", path);
        if (tb) {
            unsigned char *png;
            size_t n;
            int w, h;
            char tag[600];
            snprintf(tag, sizeof tag, "%s/sample_%ld", name, s);
            if ((st = ts_plot_attention_png(&png, &n, &w, &h, title, probs, (int)H, (int)TT, labels))) break;
            st = ts_tb_image(tb, tag, step, png, n, w, h);
            ts_buffer_free(png);
        }
    }
    return st;
}


int cmd_train_gpt(int argc, char **argv) {
    const char *cmd = "train --model gpt";
    gpt_args a = {.model = "gpt", .data = "data/tinyshakespeare", .attn_dir = ".", .layers = 2, .heads = 4, .embd = 64, .block = 64,
                  .batch = 32, .steps = 1000, .seed = 0, .eval_interval = 250, .eval_batches = 20, .lr = 2e-3, .weight_decay = 0.01};
    const cli_flag flags[] = {
        {"--model", FLAG_STRING, &a.model, "gpt", "the character GPT"},
        {"--data", FLAG_STRING, &a.data, "DIR|FILE", "text corpus: a file or a directory with input.txt (default data/tinyshakespeare)"},
        {"--layers", FLAG_INT, &a.layers, "N", "transformer blocks (default 2)"},
        {"--heads", FLAG_INT, &a.heads, "N", "attention heads (default 4)"},
        {"--embd", FLAG_INT, &a.embd, "C", "channels, a multiple of heads (default 64)"},
        {"--block-size", FLAG_INT, &a.block, "T", "context length in characters (default 64)"},
        {"--batch-size", FLAG_INT, &a.batch, "B", "windows per step (default 32)"},
        {"--steps", FLAG_INT, &a.steps, "N", "optimizer steps (default 1000)"},
        {"--lr", FLAG_FLOAT, &a.lr, "LR", "AdamW learning rate (default 0.002)"},
        {"--weight-decay", FLAG_FLOAT, &a.weight_decay, "WD", "AdamW decoupled weight decay (default 0.01)"},
        {"--seed", FLAG_INT, &a.seed, "N", "seed for initialisation and batches (default 0)"},
        {"--threads", FLAG_INT, &a.threads, "N", "worker threads (default: all cores)"},
        {"--device", FLAG_STRING, &a.device, "cpu|cuda|cuda:N", "where the model runs (default: $TS_DEVICE, else cpu)"},
        {"--eval-interval", FLAG_INT, &a.eval_interval, "N", "held-out loss every N steps (default 250)"},
        {"--eval-batches", FLAG_INT, &a.eval_batches, "N", "held-out batches per evaluation (default 20)"},
        {"--anchor", FLAG_LIST, &a.anchors, "NAME", "anchor a tensor (glob ok); its final value is printed as a summary"},
        {"--watch", FLAG_LIST, &a.watches, "PATTERN", "summarise matching tensors at each evaluation"},
        {"--attention-map", FLAG_LIST, &a.attention_maps, "TENSOR[:SAMPLE]", "PNG of attention probabilities [B,H,T,T] after training"},
        {"--attention-map-dir", FLAG_STRING, &a.attn_dir, "DIR", "where attention maps go (default .)"},
        {"--tensorboard", FLAG_STRING, &a.tensorboard, "DIR", "losses (and attention maps) to TensorBoard"},
        {"--save-init", FLAG_STRING, &a.save_init, "DIR", "save the initial parameters as .npy (for a reference run)"},
        {"--save-weights", FLAG_STRING, &a.save_weights, "DIR", "save parameters, gpt.txt and vocab.txt at the end"},
        {"--weights", FLAG_STRING, &a.weights, "DIR", "start from saved parameters"},
        {"--quiet", FLAG_BOOL, &a.quiet, NULL, "only errors, warnings and the final line"},
        {NULL, 0, NULL, NULL, NULL},
    };
    bool help;
    int rc = cli_parse("train", "--model gpt [flags]", flags, argc, argv, 2, NULL, &help);
    if (rc || help) return rc;
    if (a.layers < 1 || a.layers > 64) return cli_usage_error(cmd, "--layers must be 1..64, got %ld", a.layers);
    if (a.heads < 1 || a.embd < 1 || a.embd > 4096 || a.embd % a.heads)
        return cli_usage_error(cmd, "--embd (%ld) must be 1..4096 and a multiple of --heads (%ld)", a.embd, a.heads);
    if (a.block < 1 || a.block > 4096) return cli_usage_error(cmd, "--block-size must be 1..4096, got %ld", a.block);
    if (a.batch < 1 || a.batch > 65536) return cli_usage_error(cmd, "--batch-size must be 1..65536, got %ld", a.batch);
    if (a.steps < 0) return cli_usage_error(cmd, "--steps must be >= 0, got %ld", a.steps);
    if (!(a.lr >= 0) || !(a.weight_decay >= 0)) return cli_usage_error(cmd, "--lr and --weight-decay must be >= 0");
    if (a.eval_interval < 1 || a.eval_batches < 1) return cli_usage_error(cmd, "--eval-interval and --eval-batches must be >= 1");
    if (a.threads < 0 || a.threads > 256) return cli_usage_error(cmd, "--threads must be 0..256, got %ld", a.threads);
    const cli_need needs[] = {{"--attention-map", a.attention_maps.n ? "plots" : NULL},
                              {"--tensorboard", a.tensorboard ? "tensorboard" : NULL},
                              {"--weights", cli_file_feature(a.weights)},
                              {"--save-init", cli_file_feature(a.save_init)},
                              {"--save-weights", cli_file_feature(a.save_weights)}};
    if ((rc = cli_need_features(cmd, needs, sizeof needs / sizeof needs[0]))) return rc;
    if (a.quiet) cli_quiet_logs();

    gpt_run r = {0};
    ts_options *o = ts_options_new(), *io = ts_options_new();
    ts_model *tm = NULL, *inf = NULL;
    int32_t *x = NULL, *y = NULL;
    ts_tb_writer *tb = NULL;
    rc = CLI_RUNTIME;
    if (ts_corpus_load(&r.corpus, a.data)) {
        cli_runtime_error("loading the corpus");
        goto done;
    }
    r.cfg = (ts_gpt_config){ts_corpus_vocab_size(r.corpus), a.block, a.layers, a.heads, a.embd, a.batch};
    if (gpt_build(&r, (uint64_t)a.seed) || (a.weights && ts_graph_load_weights(r.g, a.weights))) {
        cli_runtime_error(a.weights ? "loading weights" : "building the model");
        goto done;
    }
    if (a.save_init && ts_graph_save_weights(r.g, a.save_init)) {
        cli_runtime_error("saving the initial weights");
        goto done;
    }
    ts_options_set_threads(o, (int)a.threads);
    ts_options_set_threads(io, (int)a.threads);
    if (a.device && (ts_options_set_device(o, a.device) || ts_options_set_device(io, a.device))) {
        rc = cli_usage_error(cmd, "--device: %s", ts_last_error());
        goto done;
    }
    const char *device = a.device ? a.device : getenv("TS_DEVICE");
    if (device && *device && ts_device_check(device)) { /* before any work */
        rc = cli_runtime_error(a.device ? "--device" : "TS_DEVICE");
        goto done;
    }
    for (int i = 0; i < a.anchors.n; i++)
        if (ts_options_anchor(o, a.anchors.items[i], a.anchors.items[i], TS_OUTPUT_FINAL, 0)) {
            rc = cli_usage_error(cmd, "--anchor %s: %s", a.anchors.items[i], ts_last_error());
            goto done;
        }
    for (int i = 0; i < a.attention_maps.n; i++) {
        char name[512];
        long s;
        if (!parse_map(a.attention_maps.items[i], name, sizeof name, &s) || s >= a.batch) {
            rc = cli_usage_error(cmd, "--attention-map %s: TENSOR[:SAMPLE] with a sample in 0..%ld", a.attention_maps.items[i], a.batch - 1);
            goto done;
        }
        ts_options_anchor(io, name, name, TS_OUTPUT_FINAL, 0); /* a repeat is refused at compile: fine */
    }
    for (int i = 0; i < a.watches.n; i++)
        if (ts_options_watch(o, a.watches.items[i], TS_WATCH_STATS, (int)a.eval_interval)) {
            rc = cli_usage_error(cmd, "--watch: %s", ts_last_error());
            goto done;
        }
    if (ts_model_training(&tm, r.g, r.gpt.loss, o, ts_adamw((float)a.lr, (float)a.weight_decay)) || ts_model_compile(tm)) {
        rc = ts_last_error()[0] && strstr(ts_last_error(), "no tensor named") ? cli_usage_error(cmd, "%s", ts_last_error())
                                                                               : cli_runtime_error("compiling the training model");
        goto done;
    }
    ts_tensor *outs[1] = {r.gpt.loss};
    if (ts_model_inference(&inf, r.g, outs, 1, io) || ts_model_compile(inf)) {
        rc = strstr(ts_last_error(), "no tensor named") ? cli_usage_error(cmd, "--attention-map: %s", ts_last_error())
                                                         : cli_runtime_error("compiling the evaluation model");
        goto done;
    }
    if (a.tensorboard && ts_tb_open(&tb, a.tensorboard)) {
        cli_runtime_error("opening the TensorBoard log");
        goto done;
    }
    size_t nb = (size_t)(a.batch * a.block);
    x = malloc(nb * sizeof *x);
    y = malloc(nb * sizeof *y);
    if (!x || !y) {
        fprintf(stderr, "tensorscope: out of memory\n");
        goto done;
    }
    if (!a.quiet)
        printf("gpt: %ld layers, %ld heads, %ld channels, block %ld, vocab %d; batch %ld, %ld steps, AdamW lr %g wd %g; corpus %s: %lld train / %lld held-out characters\n",
           a.layers, a.heads, a.embd, a.block, ts_corpus_vocab_size(r.corpus), a.batch, a.steps, a.lr, a.weight_decay, a.data,
           (long long)ts_corpus_length(r.corpus, 0), (long long)ts_corpus_length(r.corpus, 1));
    uint64_t rng = (uint64_t)a.seed;
    static const char *const names[2] = {"tokens", "targets"};
    cli_progress prog;
    cli_progress_start(&prog, !a.quiet, "train", a.steps);
    double t0 = cli_now(), train_loss = 0, held = NAN;
    for (long step = 1; step <= a.steps; step++) {
        ts_array in[2] = {ts_array_i32(x, 2, (int64_t[]){a.batch, a.block}), ts_array_i32(y, 2, (int64_t[]){a.batch, a.block})}, l;
        if (ts_corpus_sample(r.corpus, 0, a.batch, a.block, &rng, x, y) || ts_model_run(tm, names, in, 2) ||
            ts_model_anchored(tm, "loss", &l)) {
            cli_progress_end(&prog);
            cli_runtime_error("training");
            goto done;
        }
        train_loss = ((const float *)l.data)[0];
        cli_progress_update(&prog, step, train_loss);
        if (tb) ts_tb_scalar(tb, "train_loss", step, train_loss);
        if (step % a.eval_interval == 0 || step == a.steps) {
            cli_progress_end(&prog); /* the evaluation draws its own */
            if (heldout_loss(inf, &r, x, y, a.eval_batches, a.quiet, &held)) {
                cli_runtime_error("evaluating");
                goto done;
            }
            if (!a.quiet) /* --quiet: the final line, and the watches of the last evaluation */
                printf("step %ld: train loss %.4f, held-out loss %.4f (%.1f s)\n", step, train_loss, held, cli_now() - t0);
            fflush(stdout);
            if (tb) ts_tb_scalar(tb, "heldout_loss", step, held);
            const ts_watch_result *w;
            size_t nw = 0;
            if (a.watches.n && (!a.quiet || step == a.steps) && ts_model_watch_results(tm, &w, &nw) == TS_OK)
                for (size_t i = 0; i < nw; i++) {
                    char line[512];
                    ts_array sh;
                    ts_tensor_info(ts_graph_find(r.g, w[i].name), &sh);
                    printf("  %s\n", ts_summary_line(w[i].name, &sh, &w[i].summary->stats, line, sizeof line));
                }
        }
    }
    cli_progress_end(&prog);
    double secs = cli_now() - t0;
    if (a.steps == 0 && heldout_loss(inf, &r, x, y, a.eval_batches, a.quiet, &held)) {
        cli_runtime_error("evaluating");
        goto done;
    }
    printf("final held-out loss %.4f nats/char after %ld steps in %.1f s (%.1f ms/step)\n", held, a.steps, secs,
           a.steps ? secs * 1e3 / (double)a.steps : 0.0);
    for (int i = 0; i < a.anchors.n; i++) {
        ts_array v;
        char line[512];
        if (ts_model_anchored(tm, a.anchors.items[i], &v) == TS_OK && v.dtype == TS_F32) {
            ts_summary s;
            ts_summarize_f32(v.data, ts_array_numel(&v), TS_WATCH_STATS, &s);
            printf("  anchor %s\n", ts_summary_line(a.anchors.items[i], &v, &s.stats, line, sizeof line));
        }
    }
    if (a.attention_maps.n && attention_maps(inf, &r, &a, x, y, tb, a.steps)) {
        cli_runtime_error("writing attention maps");
        goto done;
    }
    if (a.save_weights && (ts_graph_save_weights(r.g, a.save_weights) || save_config(&r, a.save_weights))) {
        cli_runtime_error("saving the weights");
        goto done;
    }
    rc = CLI_OK;
done:
    if (tb) ts_tb_close(tb);
    free(x);
    free(y);
    ts_model_free(tm);
    ts_model_free(inf);
    ts_options_free(o);
    ts_options_free(io);
    gpt_run_free(&r);
    return rc;
}

/* ------------------------------------------------------------ generate */

static ts_status read_config(const char *dir, ts_gpt_config *c) {
    char path[1024], key[64];
    long long v;
    snprintf(path, sizeof path, "%s/gpt.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return TS_ERR_IO;
    int got = 0;
    while (fscanf(f, "%63s %lld", key, &v) == 2) {
        if (strcmp(key, "layers") == 0) c->layers = v, got |= 1;
        if (strcmp(key, "heads") == 0) c->heads = v, got |= 2;
        if (strcmp(key, "embd") == 0) c->embd = v, got |= 4;
        if (strcmp(key, "block_size") == 0) c->block_size = v, got |= 8;
        if (strcmp(key, "vocab") == 0) c->vocab = v, got |= 16;
    }
    fclose(f);
    return got == 31 ? TS_OK : TS_ERR_FORMAT;
}

int cmd_generate(int argc, char **argv) {
    const char *cmd = "generate";
    const char *model = "gpt", *weights = NULL, *prompt = "\n";
    long tokens = 200, seed = 0, threads = 1;
    double temperature = 1.0;
    const cli_flag flags[] = {
        {"--model", FLAG_STRING, &model, "gpt", "the character GPT (the only generator)"},
        {"--weights", FLAG_STRING, &weights, "DIR", "what `train --model gpt --save-weights DIR` wrote (required)"},
        {"--prompt", FLAG_STRING, &prompt, "TEXT", "the text to continue (default a line break)"},
        {"--tokens", FLAG_INT, &tokens, "N", "characters to sample (default 200)"},
        {"--temperature", FLAG_FLOAT, &temperature, "T", "softmax temperature, > 0 (default 1)"},
        {"--seed", FLAG_INT, &seed, "N", "sampling seed (default 0)"},
        {"--threads", FLAG_INT, &threads, "N", "worker threads (default 1)"},
        {NULL, 0, NULL, NULL, NULL},
    };
    bool help;
    int rc = cli_parse(cmd, "--model gpt --weights DIR --prompt TEXT --tokens N [--temperature T] [--seed S]", flags, argc, argv, 2, NULL, &help);
    if (rc || help) return rc;
    if (strcmp(model, "gpt") != 0) return cli_usage_error(cmd, "--model must be gpt, got '%s'", model);
    if (!weights) return cli_usage_error(cmd, "--weights DIR is required (train with --save-weights DIR first)");
    if (tokens < 0 || tokens > 1000000) return cli_usage_error(cmd, "--tokens must be 0..1000000, got %ld", tokens);
    if (!(temperature > 0)) return cli_usage_error(cmd, "--temperature must be > 0, got %g", temperature);
    if (threads < 0 || threads > 256) return cli_usage_error(cmd, "--threads must be 0..256");
    gpt_run r = {0};
    char path[1024];
    if (read_config(weights, &r.cfg)) {
        fprintf(stderr, "tensorscope generate: %s/gpt.txt is missing or incomplete (train with --save-weights %s first)\n", weights, weights);
        return CLI_RUNTIME;
    }
    snprintf(path, sizeof path, "%s/vocab.txt", weights);
    if (ts_corpus_load(&r.corpus, path) || ts_corpus_vocab_size(r.corpus) != r.cfg.vocab) {
        fprintf(stderr, "tensorscope generate: %s: %s\n", path, ts_last_error()[0] ? ts_last_error() : "vocabulary size differs from gpt.txt");
        gpt_run_free(&r);
        return CLI_RUNTIME;
    }
    int64_t T = r.cfg.block_size, plen = (int64_t)strlen(prompt);
    r.cfg.batch = 1;
    int32_t *ctx = malloc((size_t)(plen + tokens + 1) * sizeof *ctx), *win = calloc((size_t)T, sizeof *win),
            *tgt = calloc((size_t)T, sizeof *tgt);
    ts_options *o = ts_options_new();
    ts_model *inf = NULL;
    float *p = malloc((size_t)r.cfg.vocab * sizeof *p);
    int64_t n = 0;
    rc = CLI_RUNTIME;
    if (!ctx || !win || !tgt || !p || !o) {
        fprintf(stderr, "tensorscope generate: out of memory\n");
        goto done;
    }
    if (ts_corpus_encode(r.corpus, prompt, ctx, &n)) {
        rc = cli_usage_error(cmd, "--prompt: %s", ts_last_error());
        goto done;
    }
    ts_options_set_threads(o, (int)threads);
    if (gpt_build(&r, 0) || ts_graph_load_weights(r.g, weights)) {
        cli_runtime_error("loading the model");
        goto done;
    }
    ts_tensor *outs[1] = {r.gpt.logits};
    if (ts_model_inference(&inf, r.g, outs, 1, o) || ts_model_compile(inf)) {
        cli_runtime_error("compiling the model");
        goto done;
    }
    const char *vocab = ts_corpus_vocab(r.corpus);
    fwrite(prompt, 1, (size_t)plen, stdout);
    uint64_t rng = (uint64_t)seed;
    static const char *const names[2] = {"tokens", "targets"};
    for (long k = 0; k < tokens; k++) {
        /* the last T characters, left-aligned: causal attention makes the
         * padding after them irrelevant to the position read */
        int64_t start = n > T ? n - T : 0, len = n - start;
        memset(win, 0, (size_t)T * sizeof *win);
        if (len) memcpy(win, ctx + start, (size_t)len * sizeof *win);
        ts_array in[2] = {ts_array_i32(win, 2, (int64_t[]){1, T}), ts_array_i32(tgt, 2, (int64_t[]){1, T})}, lg;
        if (ts_model_run(inf, names, in, 2) || ts_model_anchored(inf, "logits", &lg)) {
            cli_runtime_error("generating");
            goto done;
        }
        const float *row = (const float *)lg.data + (len ? len - 1 : 0) * r.cfg.vocab;
        float mx = -INFINITY;
        double sum = 0;
        for (int64_t v = 0; v < r.cfg.vocab; v++) mx = fmaxf(mx, row[v]);
        for (int64_t v = 0; v < r.cfg.vocab; v++) sum += (p[v] = expf((float)((row[v] - mx) / temperature)));
        uint64_t z = rng += 0x9E3779B97F4A7C15ull; /* splitmix64 */
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        double u = (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53 * sum, acc = 0;
        int64_t pick = r.cfg.vocab - 1;
        for (int64_t v = 0; v < r.cfg.vocab; v++)
            if ((acc += p[v]) > u) {
                pick = v;
                break;
            }
        ctx[n++] = (int32_t)pick;
        fputc(vocab[pick], stdout);
    }
    fputc('\n', stdout);
    rc = fflush(stdout) ? CLI_RUNTIME : CLI_OK;
done:
    free(ctx), free(win), free(tgt), free(p);
    ts_model_free(inf);
    ts_options_free(o);
    gpt_run_free(&r);
    return rc;
}
