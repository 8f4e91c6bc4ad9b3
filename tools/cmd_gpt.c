/* cmd_gpt.c -- what a language model trained on a text corpus has beyond
 * the one training path (cmd_train.c): `tensorscope generate`, which
 * rebuilds the model from what `train --save-weights DIR` kept
 * (DIR/lm.txt: the model and its flags; DIR/vocab.txt: the characters),
 * and the attention maps of `--attention-map`. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A file of dir not written: the CLI's error. */
static int write_error(const char *dir, const char *file) {
    fprintf(stderr, "tensorscope: --save-weights: cannot write %s/%s: %s\n", dir, file, strerror(errno));
    return CLI_RUNTIME;
}

int cli_lm_save(const char *dir, const char *model, const cli_import *imp, const cli_model *cm, const ts_corpus *corpus) {
    char *path = cli_path(dir, "lm", ".txt");
    FILE *f = path ? fopen(path, "w") : NULL;
    free(path);
    if (!f) return write_error(dir, "lm.txt");
    ts_array x;
    ts_tensor_info(cm->x, &x);
    /* the batch: an exported file may have it folded into its reshapes */
    fprintf(f, "model %s\nblock_size %lld\nvocab %lld\nbatch_size %lld\n", model, (long long)cm->block, (long long)cm->vocab,
            (long long)x.shape[0]);
    const struct {
        const char *key;
        long v;
    } sizes[] = {{"layers", imp->layers}, {"heads", imp->heads}, {"embd", imp->embd}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].v) fprintf(f, "%s %ld\n", sizes[i].key, sizes[i].v);
    for (int i = 0; imp->inputs && i < imp->inputs->n; i++) fprintf(f, "input %s\n", imp->inputs->items[i]);
    if (imp->loss) fprintf(f, "loss %s\n", imp->loss);
    if (imp->output) fprintf(f, "output %s\n", imp->output);
    bool bad = ferror(f) != 0;
    if (fclose(f) || bad) return write_error(dir, "lm.txt");
    path = cli_path(dir, "vocab", ".txt");
    f = path ? fopen(path, "wb") : NULL;
    free(path);
    if (!f) return write_error(dir, "vocab.txt");
    fwrite(ts_corpus_vocab(corpus), 1, (size_t)ts_corpus_vocab_size(corpus), f);
    bad = ferror(f) != 0;
    if (fclose(f) || bad) return write_error(dir, "vocab.txt");
    return CLI_OK;
}

int cli_attention_maps(ts_model *inf, const cli_model *em, const cli_list *specs, const int32_t *x, const ts_corpus *corpus,
                       const char *dir, ts_tb_writer *tb, int64_t step) {
    const char *vocab = ts_corpus_vocab(corpus);
    int64_t T = em->block;
    for (int i = 0; i < specs->n; i++) {
        char name[512], labels[4097], title[700], file[512];
        long s;
        cli_parse_picture_spec(em->g, specs->items[i], name, sizeof name, &s); /* checked before training */
        ts_array v;
        if (ts_model_anchored(inf, name, &v)) return cli_runtime_error("--attention-map");
        int64_t H = v.shape[1], TT = v.shape[2];
        for (int64_t t = 0; t < TT && t < T && t < 4096; t++) labels[t] = vocab[x[s * T + t]];
        labels[TT < T ? TT : T] = '\0';
        const float *probs = (const float *)v.data + s * H * TT * TT;
        snprintf(title, sizeof title, "%s  sample %ld  step %lld", name, s, (long long)step);
        cli_file_safe(name, file, sizeof file);
        char stem[600];
        snprintf(stem, sizeof stem, "attention_%s_s%ld", file, s);
        char *path = cli_path(dir, stem, ".png");
        ts_status st = path ? ts_plot_attention(path, title, probs, (int)H, (int)TT, TT <= T ? labels : NULL) : TS_ERR_OUT_OF_MEMORY;
        if (!st) printf("attention map: %s\n", path);
        free(path);
        if (st) return cli_runtime_error("writing an attention map");
        if (tb) {
            unsigned char *png;
            size_t n;
            int w, h;
            char tag[600];
            snprintf(tag, sizeof tag, "attention/%s/sample_%ld", name, s);
            st = ts_plot_attention_png(&png, &n, &w, &h, title, probs, (int)H, (int)TT, TT <= T ? labels : NULL);
            if (!st) {
                st = ts_tb_image(tb, tag, step, png, n, w, h);
                ts_buffer_free(png);
            }
            if (st) return cli_runtime_error("writing an attention map to TensorBoard");
        }
    }
    return CLI_OK;
}

/* ------------------------------------------------------------ generate */

/* What DIR/lm.txt says (an older DIR/gpt.txt has the same keys, for a gpt):
 * the model into model (n bytes), its flags into imp, the inputs' specs
 * into inputs (their strings in spec_buf). */
typedef struct lm_file {
    char model[1024], specs[16][256], loss[64], output[256];
    long batch; /* the batch the model was saved with: generation fills its first row */
    cli_list inputs;
} lm_file;

static int read_lm(const char *cmd, const char *dir, lm_file *lf, cli_import *imp) {
    char *path = cli_path(dir, "lm", ".txt");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) {
        free(path);
        path = cli_path(dir, "gpt", ".txt");
        f = path ? fopen(path, "r") : NULL;
    }
    free(path);
    if (!f) {
        fprintf(stderr, "tensorscope %s: %s/lm.txt is missing (train a language model on a text corpus with --save-weights %s first)\n", cmd,
                dir, dir);
        return CLI_RUNTIME;
    }
    snprintf(lf->model, sizeof lf->model, "gpt");
    lf->batch = 1;
    char line[1400];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *v = strchr(line, ' ');
        if (!v) continue;
        *v++ = '\0';
        long n = strtol(v, NULL, 10);
        if (strcmp(line, "model") == 0) snprintf(lf->model, sizeof lf->model, "%s", v);
        else if (strcmp(line, "layers") == 0) imp->layers = n;
        else if (strcmp(line, "heads") == 0) imp->heads = n;
        else if (strcmp(line, "embd") == 0) imp->embd = n;
        else if (strcmp(line, "block_size") == 0) imp->block_size = n;
        else if (strcmp(line, "vocab") == 0) imp->vocab = n;
        else if (strcmp(line, "batch_size") == 0) lf->batch = n;
        else if (strcmp(line, "loss") == 0) imp->loss = strncpy(lf->loss, v, sizeof lf->loss - 1);
        else if (strcmp(line, "output") == 0) imp->output = strncpy(lf->output, v, sizeof lf->output - 1);
        else if (strcmp(line, "input") == 0 && lf->inputs.n < 16) {
            snprintf(lf->specs[lf->inputs.n], sizeof lf->specs[0], "%s", v);
            lf->inputs.items[lf->inputs.n] = lf->specs[lf->inputs.n];
            lf->inputs.n++;
        }
    }
    fclose(f);
    imp->inputs = &lf->inputs;
    if (lf->inputs.n) imp->block_size = 0; /* the input's shape says it */
    if (lf->batch < 1 || lf->batch > 65536) lf->batch = 1;
    return CLI_OK;
}

/* One token drawn from softmax(row / temperature) with splitmix64 (p: V floats of scratch). */
static int64_t sample_token(const float *row, int64_t V, double temperature, uint64_t *rng, float *p) {
    float mx = -INFINITY;
    double sum = 0;
    for (int64_t v = 0; v < V; v++) mx = fmaxf(mx, row[v]);
    for (int64_t v = 0; v < V; v++) sum += (p[v] = expf((float)((row[v] - mx) / temperature)));
    uint64_t z = *rng += 0x9E3779B97F4A7C15ull; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    double u = (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53 * sum, acc = 0;
    for (int64_t v = 0; v < V; v++)
        if ((acc += p[v]) > u) return v;
    return V - 1;
}

int cmd_generate(int argc, char **argv) {
    const char *cmd = "generate";
    const char *model = NULL, *weights = NULL, *prompt = "\n";
    long tokens = 200, seed = 0, threads = 1;
    double temperature = 1.0;
    const cli_flag flags[] = {
        {"--weights", FLAG_STRING, &weights, "DIR", "what `train --save-weights DIR` wrote for a model trained on a text corpus (required)"},
        {"--model", FLAG_STRING, &model, "NAME|FILE.onnx", "the model trained (default: the one DIR/lm.txt names)"},
        {"--prompt", FLAG_STRING, &prompt, "TEXT", "the text to continue (default a line break)"},
        {"--tokens", FLAG_INT, &tokens, "N", "characters to sample (default 200)"},
        {"--temperature", FLAG_FLOAT, &temperature, "T", "softmax temperature, > 0 (default 1)"},
        {"--seed", FLAG_INT64, &seed, "N", "sampling seed (default 0)"},
        {"--threads", FLAG_INT, &threads, "N", "worker threads (default 1)"},
        {NULL, 0, NULL, NULL, NULL},
    };
    bool help;
    int rc = cli_parse(cmd, "--weights DIR [--prompt TEXT] [--tokens N] [--temperature T] [--seed S]", flags, argc, argv, 2, NULL, &help);
    if (rc || help) return rc;
    if (!weights) return cli_usage_error(cmd, "--weights DIR is required (train with --save-weights DIR first)");
    if (tokens < 0 || tokens > 1000000) return cli_usage_error(cmd, "--tokens must be 0..1000000, got %ld", tokens);
    if (!(temperature > 0)) return cli_usage_error(cmd, "--temperature must be > 0, got %g", temperature);
    if (threads < 0 || threads > 256) return cli_usage_error(cmd, "--threads must be 0..256");
    lm_file *lf = calloc(1, sizeof *lf);
    cli_import imp = {0};
    if (!lf) return cli_usage_error(cmd, "out of memory");
    if ((rc = read_lm(cmd, weights, lf, &imp))) {
        free(lf);
        return rc;
    }
    if (model && strcmp(model, lf->model) != 0) {
        rc = cli_usage_error(cmd, "--model %s: %s/lm.txt says the weights are of '%s'", model, weights, lf->model);
        free(lf);
        return rc;
    }
    ts_corpus *corpus = NULL;
    cli_model cm = {0};
    ts_options *o = ts_options_new();
    ts_model *inf = NULL;
    int32_t *ctx = NULL, *win = NULL, *tgt = NULL;
    float *p = NULL;
    int64_t n = 0, plen = (int64_t)strlen(prompt);
    rc = CLI_RUNTIME;
    char *vpath = cli_path(weights, "vocab", ".txt");
    if (!vpath || !o) {
        fprintf(stderr, "tensorscope generate: out of memory\n");
        goto done;
    }
    if (ts_corpus_load(&corpus, vpath)) {
        fprintf(stderr, "tensorscope generate: %s\n", ts_last_error());
        goto done;
    }
    ts_status st = cli_model_open(lf->model, lf->batch, 0, NULL, &imp, &cm);
    if (st || !cm.lm) {
        if (cm.error[0]) fprintf(stderr, "tensorscope generate: %s\n", cm.error);
        else if (!st) fprintf(stderr, "tensorscope generate: '%s' is not a language model (tokens [B,T] in, scores [B,T,V] out)\n", lf->model);
        else cli_runtime_error("building the model");
        goto done;
    }
    if (ts_corpus_vocab_size(corpus) > cm.vocab) {
        fprintf(stderr, "tensorscope generate: %s holds %d characters, more than the model's vocabulary of %lld\n", vpath,
                ts_corpus_vocab_size(corpus), (long long)cm.vocab);
        goto done;
    }
    if (ts_graph_load_weights(cm.g, weights)) {
        cli_runtime_error("loading the weights");
        goto done;
    }
    int64_t T = cm.block, V = cm.vocab, Vs = ts_corpus_vocab_size(corpus); /* sampled among the corpus's characters */
    ctx = malloc((size_t)(plen + tokens + 1) * sizeof *ctx);
    int64_t B = lf->batch;
    win = calloc((size_t)(B * T), sizeof *win);
    tgt = calloc((size_t)(B * T), sizeof *tgt);
    p = malloc((size_t)V * sizeof *p);
    if (!ctx || !win || !tgt || !p) {
        fprintf(stderr, "tensorscope generate: out of memory\n");
        goto done;
    }
    if (ts_corpus_encode(corpus, prompt, ctx, &n)) {
        rc = cli_usage_error(cmd, "--prompt: %s", ts_last_error());
        goto done;
    }
    ts_options_set_threads(o, (int)threads);
    ts_tensor *outs[1] = {cm.logp};
    if (ts_model_inference(&inf, cm.g, outs, 1, o) || ts_model_compile(inf)) {
        cli_runtime_error("compiling the model");
        goto done;
    }
    const char *vocab = ts_corpus_vocab(corpus);
    fwrite(prompt, 1, (size_t)plen, stdout);
    uint64_t rng = (uint64_t)seed;
    const char *names[2] = {ts_tensor_name(cm.x), ts_tensor_name(cm.labels)};
    const char *scores = ts_tensor_name(cm.logp);
    for (long k = 0; k < tokens; k++) {
        /* the last T characters, left-aligned: causal attention makes the
         * padding after them irrelevant to the position read */
        int64_t start = n > T ? n - T : 0, len = n - start;
        memset(win, 0, (size_t)T * sizeof *win);
        if (len) memcpy(win, ctx + start, (size_t)len * sizeof *win);
        ts_array in[2] = {ts_array_i32(win, 2, (int64_t[]){B, T}), ts_array_i32(tgt, 2, (int64_t[]){B, T})}, lg;
        if (ts_model_run(inf, names, in, 2) || ts_model_anchored(inf, scores, &lg)) {
            cli_runtime_error("generating");
            goto done;
        }
        int64_t pick = sample_token((const float *)lg.data + (len ? len - 1 : 0) * V, Vs, temperature, &rng, p);
        ctx[n++] = (int32_t)pick;
        fputc(vocab[pick], stdout);
    }
    fputc('\n', stdout);
    rc = fflush(stdout) ? CLI_RUNTIME : CLI_OK;
done:
    free(ctx), free(win), free(tgt), free(p), free(vpath), free(lf);
    ts_model_free(inf);
    ts_options_free(o);
    ts_graph_free(cm.g);
    ts_corpus_free(corpus);
    return rc;
}
