/* cli.h -- shared pieces of the tensorscope command-line tool. The CLI is
 * a pure client of the public API: nothing here reaches into src/. */
#ifndef TS_CLI_H
#define TS_CLI_H

#include "tensorscope.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Exit codes: what shells and CI expect. */
enum { CLI_OK = 0, CLI_RUNTIME = 1, CLI_USAGE = 2 };

/* ---- flags: a table per command; parse fills the destinations */
typedef enum { FLAG_BOOL, FLAG_INT, FLAG_FLOAT, FLAG_STRING, FLAG_LIST } flag_kind;
typedef struct cli_list {
    const char *items[64];
    int n;
} cli_list;
typedef struct cli_flag {
    const char *name; /* "--batch-size" */
    flag_kind kind;
    void *dest;       /* bool*, long*, double*, const char**, cli_list* */
    const char *metavar;
    const char *help;
} cli_flag;

/* Parses argv[first..argc); stops at "--" (its index goes to *rest, else
 * argc). Prints a usage error naming the flag and returns CLI_USAGE, or
 * CLI_OK; "--help" prints the help and sets *help_shown. */
int cli_parse(const char *cmd, const char *usage, const cli_flag *flags, int argc, char **argv, int first, int *rest,
              bool *help_shown);
void cli_print_help(FILE *f, const char *cmd, const char *usage, const cli_flag *flags);
/* --anchor NAME[:MODE[:N]] into name (n bytes), where NAME may itself hold
 * ':' (Relu:0); N is 1..INT_MAX. --output-mode MODE[:N]. Usage errors name
 * the spec. */
int cli_parse_anchor(const char *cmd, const char *spec, char *name, size_t n, ts_output_mode *mode, int *period);
int cli_parse_output_mode(const char *cmd, const char *spec, ts_output_mode *mode, int *period);
/* Before any work: an output file's directory exists and is writable (and
 * the file, if there, is not a directory); an output directory is created
 * (mkdir -p) and writable. A usage error otherwise. */
int cli_check_output(const char *cmd, const char *flag, const char *path, bool is_dir);
/* "dir/name<suffix>", malloc'd (no fixed-size path buffers); NULL when out of memory. */
char *cli_path(const char *dir, const char *name, const char *suffix);
/* A tensor name as a file name: '/', ':' and ' ' become '_' ("conv1/Conv2d:0" -> "conv1_Conv2d_0"). */
void cli_file_safe(const char *in, char *out, size_t n);
/* "500M", "2G", "1048576": bytes; -1 for anything else. */
int cli_parse_size(const char *text, long long *bytes);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Before any work: the optional features the flags given need (see
 * ts_has_feature). A flag whose feature this build lacks ends the command
 * (exit 1) with `tensorscope CMD: FLAG: <what to install>`; a NULL
 * feature is a flag not given or needing none. */
typedef struct cli_need {
    const char *flag, *feature;
} cli_need;
int cli_need_features(const char *cmd, const cli_need *needs, size_t n);
/* The feature a file needs by its name: "onnx" for FILE.onnx, "npz" for
 * FILE.npz; NULL for others and for NULL. */
const char *cli_file_feature(const char *path);
int cli_runtime_error(const char *what);
/* Tensor patterns, one rule for every flag (ts_name_matches): a glob if
 * the pattern has *, ? or [, else one exact name. */
bool cli_list_matches(const cli_list *l, const char *name);
bool cli_graph_has_match(const ts_graph *g, const char *pattern);
/* The usage error of a pattern that matches nothing, with the closest names. */
int cli_no_match_error(const char *cmd, const char *flag, const char *pattern, const ts_graph *g);

/* ---- built-in models */
typedef struct cli_model {
    ts_graph *g;
    ts_tensor *x, *labels, *logp, *loss;
    bool logits;     /* logp holds logits (cross_entropy): evaluation log-softmaxes them */
    int64_t onehot;  /* mse: labels are fed as one-hot f32 [B, onehot] */
    char error[512]; /* a usage problem found by cli_model_open (else see ts_last_error) */
} cli_model;
/* How an ONNX file becomes a trainable model (`--model FILE.onnx`). */
typedef struct cli_import {
    const cli_list *inputs;   /* NAME:D0xD1x... (dim 0 is set to the batch size) */
    const char *loss;         /* cross_entropy|nll|mse; NULL: nll after a LogSoftmax, else cross_entropy */
    const char *labels_input; /* the file's own labels input; its scalar output is the loss */
    const char *output;       /* the scores the loss is put on (a tensor or file value name); NULL: the first output */
} cli_import;
/* A built-in model by name, or an ONNX file (a name ending in .onnx). */
ts_status cli_model_open(const char *name, long batch, uint64_t seed, const cli_list *prints, const cli_import *imp,
                         cli_model *out);
/* Builds `name` for micro-batch size B; tensors whose names match a pattern
 * of `prints` are wrapped in a print op. */
ts_status cli_model_build(const char *name, long batch, uint64_t seed, const cli_list *prints, cli_model *out);
const char *cli_model_names(void);
/* Where MNIST is when --data is not given: ./data/mnist, else the installed
 * <bindir>/../share/tensorscope/mnist, else <bindir>/../data/mnist (a build
 * directory inside a checkout); buf holds the path when it is built. */
const char *cli_default_data_dir(char *buf, size_t n);
/* The model's default optimizer and learning rate, filled where asked
 * (mlp: sgd 0.01; cnn: adam 0.001, the settings its accuracy target is for). */
void cli_model_defaults(const char *name, const char **optimizer, double *lr);
/* sgd|adam|adamw (any case) with the given hyper-parameters. */
ts_status cli_optimizer(const char *name, double lr, double momentum, double weight_decay, ts_optimizer *out);

/* ---- pictures (pictures.c): PNGs written into dir; CLI exit codes */
/* The channels of activation spec = TENSOR[:SAMPLE] for one sample of the
 * batch x, computed by an inference model of em's graph. */
int cli_feature_maps(const cli_model *em, const ts_array *x, const char *spec, const char *dir);
/* A conv weight's kernels (one tile per output channel for one input channel). */
int cli_filters(const cli_model *cm, const char *param, const char *dir);

/* ---- commands */
int cmd_train(int argc, char **argv, bool eval_only);
int cmd_names(int argc, char **argv);
int cmd_graph(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_debug_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_lint(int argc, char **argv);
/* `train --model gpt` and `generate` (cmd_gpt.c) */
bool cli_wants_gpt(int argc, char **argv);
int cmd_train_gpt(int argc, char **argv);
int cmd_generate(int argc, char **argv);

/* ---- TensorBoard (tb_log.c) */
/* Opens root/name, or root/<date>_<host> when name is NULL (with _2, _3 ...
 * if that exists); the run's directory goes to dir. */
ts_status cli_tb_open(const char *root, const char *name, ts_tb_writer **out, char *dir, size_t n);
typedef struct cli_hparams {
    const char *model, *optimizer, *lr_schedule;
    double lr, momentum, weight_decay;
    long warmup_steps, batch_size, repeat_count, grad_accum, epochs, seed;
} cli_hparams;
void cli_tb_hparams(ts_tb_writer *tb, const cli_hparams *h);
/* train/loss, train/learning_rate, train/samples_per_second at the model's
 * step; grad_norm/<param> and grad_norm/global from the Accum___ watches;
 * histograms and range/<name>/<format>_<under|over>flow of the watches. */
/* replicas > 1: the watch results hold a row per replica and one over all */
ts_status cli_tb_step(ts_tb_writer *tb, const ts_model *m, double loss, double samples_per_s, int replicas);
/* eval/loss and eval/accuracy (percent) of the held-out images. Both
 * return the first write's failure (a full disk stops training). */
ts_status cli_tb_eval(ts_tb_writer *tb, int64_t step, double loss, double accuracy);

/* ---- progress bar on stderr (silent when not a terminal or quiet):
 * redrawn at most 10 times a second (CLI_PROGRESS_HZ), and once at the end */
#define CLI_PROGRESS_HZ 10
typedef struct cli_progress {
    bool on;
    const char *label;
    long total, done;
    double t0, last_draw;
    int last_width;
    long long written;     /* bytes of dumps written so far, shown when > 0 */
    FILE *out;             /* stderr (a test sets its own) */
    double (*clock)(void); /* cli_now (a test sets its own) */
} cli_progress;
void cli_progress_start(cli_progress *p, bool enabled, const char *label, long total);
void cli_progress_update(cli_progress *p, long done, double loss);
void cli_progress_end(cli_progress *p);
double cli_now(void);
/* --quiet: the library logs errors and warnings only, unless TS_LOG_LEVEL
 * (or the command's --log-verbosity, checked by the caller) asks for a level */
void cli_quiet_logs(void);

#endif
