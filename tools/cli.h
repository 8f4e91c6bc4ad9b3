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
/* FLAG_SECTION: no flag, a heading in --help (its help text) for the flags
 * after it, such as those of one model */
/* FLAG_INT: a long in int's range (INT_MIN..INT_MAX, what every count
 * flag is passed on as); FLAG_INT64: any long (a seed). A value out of
 * range is refused as the user typed it, never wrapped.
 * FLAG_OPT_INT: --flag alone stores 0, --flag=N stores N (1..INT_MAX), as
 * --watch-memory[=MS]; the destination keeps its value when not given;
 * FLAG_OPT_FLOAT the same for a double > 0 (--detect-spikes[=K]);
 * FLAG_OPT_STRING: --flag alone stores "", --flag=V or --flag V (V not
 * beginning with "--") stores V, as --watch-stability [GLOB] */
typedef enum { FLAG_BOOL, FLAG_INT, FLAG_FLOAT, FLAG_STRING, FLAG_LIST, FLAG_SECTION, FLAG_OPT_INT, FLAG_INT64, FLAG_OPT_STRING,
               FLAG_OPT_FLOAT } flag_kind;
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
 * argc). Prints a usage error naming the flag (an unknown one with the
 * closest flags of the table) and returns CLI_USAGE, or CLI_OK; "--help"
 * prints the help and sets *help_shown. */
int cli_parse(const char *cmd, const char *usage, const cli_flag *flags, int argc, char **argv, int first, int *rest,
              bool *help_shown);
void cli_print_help(FILE *f, const char *cmd, const char *usage, const cli_flag *flags);
/* --anchor NAME[:MODE[:N]] into name (n bytes), where NAME may itself hold
 * ':' (Relu:0); N is 1..INT_MAX. --output-mode MODE[:N]. Usage errors name
 * the spec. */
int cli_parse_anchor(const char *cmd, const char *spec, char *name, size_t n, ts_output_mode *mode, int *period);
int cli_parse_output_mode(const char *cmd, const char *spec, ts_output_mode *mode, int *period);
/* TENSOR[:SAMPLE] of --feature-maps and --attention-map: the whole spec is
 * tried as a name of g first (names hold ':' themselves, "Relu:0"); false
 * when neither it nor the part before its last ':' names a tensor, or the
 * sample is not a number >= 0. */
bool cli_parse_picture_spec(const ts_graph *g, const char *spec, char *name, size_t n, long *sample);

/* Before any work: an output file's directory exists and is writable (and
 * the file, if there, is not a directory); an output directory is created
 * (mkdir -p) and writable. A usage error otherwise. */
int cli_check_output(const char *cmd, const char *flag, const char *path, bool is_dir);
/* The same for a file whose directory is created first (mkdir -p), as
 * --picture-dir is: --plot out/curves.png. */
int cli_check_output_file_mkdir(const char *cmd, const char *flag, const char *path);
/* "dir/name<suffix>", malloc'd (no fixed-size path buffers); NULL when out of memory. */
char *cli_path(const char *dir, const char *name, const char *suffix);
/* A tensor name as a file name: '/', ':' and ' ' become '_' ("conv1/Conv2d:0" -> "conv1_Conv2d_0"). */
void cli_file_safe(const char *in, char *out, size_t n);
/* Beside arrays dumped as DIR/<cli_file_safe(name)>.npy: DIR/order.txt,
 * the names in the order given (graph order), which `compare` reads back
 * (tools/cmd_compare.c). */
int cli_dump_order_write(const char *dir, const char *const *names, size_t n);
/* Named arrays from an .npz or a directory of .npy files, in the order the
 * dump records: an .npz's member order; a directory's order.txt (`train
 * --dump-npy` writes it: graph order), else file names sorted (ordered
 * false). What `compare` and `diff` read (tools/cmd_compare.c). */
typedef struct cli_dump {
    ts_npz *z;             /* .npz: arrays live here */
    char **names;          /* directory: owned names and arrays */
    ts_array *arrays;
    size_t n;
    bool ordered;          /* the order is the dump's own, not the file names' */
} cli_dump;
ts_status cli_dump_load(const char *path, cli_dump *d);
void cli_dump_free(cli_dump *d);
size_t cli_dump_count(const cli_dump *d);
const char *cli_dump_name(const cli_dump *d, size_t i);
const ts_array *cli_dump_array(const cli_dump *d, size_t i);
const ts_array *cli_dump_find(const cli_dump *d, const char *name);
/* Why tensor `name` (a value or Gradient___ of one) of graph g differs, as
 * far as a dump holds its inputs: its op and source line, and each input's
 * state. state(ctx, name, &word): -1 when the dump does not hold `name`, 0
 * when it matches, 1 when it differs; word (may stay NULL) names the state. */
typedef int (*cli_held_fn)(void *ctx, const char *name, const char **word);
void cli_explain(ts_graph *g, const char *name, cli_held_fn state, void *ctx, char *detail, size_t dn);
/* "500M", "2G", "1048576": bytes; -1 for anything else. */
/* "A:B" (inclusive, 1-based), "A:" (last = 0: to the end) or "N"; a usage error otherwise. */
int cli_parse_step_range(const char *cmd, const char *flag, const char *text, int64_t *first, int64_t *last);
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
    /* a causal language model: x holds token ids [B, T], labels the next
     * tokens [B, T], logp the scores [B, T, vocab]; trained on a text corpus */
    bool lm;
    int64_t block, vocab; /* lm: T and the vocabulary size */
    char error[512]; /* a usage problem found by cli_model_open (else see ts_last_error) */
    bool unknown;    /* cli_model_open: the name is no built-in model and no .onnx file (cli_unknown_model) */
} cli_model;
/* What the model flags say beyond the model's name: how an ONNX file
 * becomes a trainable model (`--model FILE.onnx`), and the GPT's size. */
typedef struct cli_import {
    const cli_list *inputs;   /* NAME:D0xD1x... (dim 0 is set to the batch size); gpt: tokens:BxT sets T */
    const cli_list *values;   /* NAME=V0,V1,... or NAME=FILE.npy: an input's value bound at import (shape inputs) */
    const char *loss;         /* cross_entropy|nll|mse; NULL: nll after a LogSoftmax, else cross_entropy */
    const char *labels_input; /* the file's own labels input; its scalar output is the loss */
    const char *output;       /* the scores the loss is put on (a tensor or file value name); NULL: the first output */
    /* `compare`: the labels come as arrays (--inputs), not class ids: mse
     * takes an output of any rank against labels of its shape; and a file
     * whose outputs take no loss (1-D scores, a scalar) is opened as it
     * is, its outputs the model (a forward-only compare), a scalar output
     * the loss when the file has no other */
    bool arrays;
    long layers, heads, embd, block_size; /* gpt; 0: the defaults (2, 4, 64, 64) */
    long vocab;                           /* gpt: the corpus's vocabulary; 0: 65 (Tiny Shakespeare's) */
} cli_import;
/* The GPT's flags, for every command that builds a model (a section of
 * its --help); `imp` is a cli_import. */
#define CLI_GPT_FLAGS(imp)                                                                                          \
    {"", FLAG_SECTION, NULL, NULL, "--model gpt (a character GPT on a text corpus)"},                               \
    {"--layers", FLAG_INT, &(imp).layers, "N", "transformer blocks (default 2)"},                                  \
    {"--heads", FLAG_INT, &(imp).heads, "N", "attention heads (default 4)"},                                       \
    {"--embd", FLAG_INT, &(imp).embd, "C", "channels, a multiple of --heads (default 64)"},                        \
    {"--block-size", FLAG_INT, &(imp).block_size, "T", "context length in characters (default 64)"},               \
    {"--vocab", FLAG_INT, &(imp).vocab, "V", "vocabulary size (default: the corpus's; without one 65, Tiny Shakespeare's)"}
/* An ONNX file's model flags (a section of --help); `imp` is a cli_import. */
#define CLI_ONNX_FLAGS(imp)                                                                                                 \
    {"", FLAG_SECTION, NULL, NULL, "--model FILE.onnx"},                                                                    \
    {"--loss", FLAG_STRING, &(imp).loss, "cross_entropy|nll|mse", "loss on the output (default nll after LogSoftmax, else cross_entropy)"}, \
    {"--labels-input", FLAG_STRING, &(imp).labels_input, "NAME", "the file's labels input; its scalar output is the loss"}, \
    {"--output", FLAG_STRING, &(imp).output, "NAME", "the scores to put the loss on (default: the first output)"}
/* A built-in model by name, or an ONNX file (a name ending in .onnx), for
 * micro-batch size `batch`; tensors whose names match a pattern of
 * `prints` get a print op. TS_ERR_NOT_FOUND (error empty): no such model. */
ts_status cli_model_open(const char *name, long batch, uint64_t seed, const cli_list *prints, const cli_import *imp,
                         cli_model *out);
const char *cli_model_names(void);
/* Before any work: the model flags that need no data (the GPT's sizes; a
 * GPT flag given to another model). A usage error, else CLI_OK. */
int cli_model_check(const char *cmd, const char *name, const cli_import *imp);
/* The usage error of a model name that is none: the closest built-in names. */
int cli_unknown_model(const char *cmd, const char *name);
/* The built-in model names, NULL-terminated (for "did you mean"). */
extern const char *const cli_model_list[];
/* Where a data set (mnist, tinyshakespeare) is when --data is not given:
 * ./data/<set>, else the installed <bindir>/../share/tensorscope/<set>,
 * else <bindir>/../data/<set> (a build directory inside a checkout); the
 * path is built in buf. */
const char *cli_default_data_dir(const char *set, char *buf, size_t n);
/* A model's own defaults (mlp: sgd 0.01, batch 64, one epoch; cnn: adam
 * 0.001, the settings its accuracy target is for; gpt: adamw 0.002 with
 * weight decay 0.01, batch 32, 1000 steps, its recipe). */
typedef struct cli_defaults {
    const char *optimizer, *data; /* data: the data set it trains on by default (cli_default_data_dir) */
    bool text;                    /* the model trains on a text corpus */
    double lr, weight_decay;
    long batch_size, steps; /* steps 0: --epochs decides */
} cli_defaults;
cli_defaults cli_model_defaults(const char *name);
/* sgd|adam|adamw (any case) with the given hyper-parameters. */
ts_status cli_optimizer(const char *name, double lr, double momentum, double weight_decay, ts_optimizer *out);
/* --precision: f32|bf16|f16 (NULL: f32) into *out, else TS_ERR_NOT_FOUND. */
ts_status cli_precision(const char *name, ts_dtype *out);

/* ---- pictures (pictures.c): PNGs written into dir and, with a TensorBoard
 * writer, as images at `step` (act/<tensor>/sample_<s>, weight/<param>);
 * CLI exit codes */
/* The channels of activation spec = TENSOR[:SAMPLE] for one sample of the
 * batch x, computed by an inference model of em's graph. */
int cli_feature_maps(const cli_model *em, const ts_array *x, const char *spec, const char *dir, ts_tb_writer *tb, int64_t step);
/* A conv weight's kernels (one tile per output channel for one input channel). */
int cli_filters(const cli_model *cm, const char *param, const char *dir, ts_tb_writer *tb, int64_t step);

/* ---- stability signals (stability.c): --watch-stability's rows kept
 * each run, one heat map per signal at the end (--plot-stability DIR) */
typedef struct cli_stability cli_stability;
/* Whether a watch result row is a stability signal (`stability/...`). */
bool cli_stability_row(const char *name);
/* Its value: the row's mean, or NaN / +-Inf as flagged. */
double cli_stability_value(const ts_summary *s);
/* The last run's rows into *h (made at the first call). */
ts_status cli_stability_record(cli_stability **h, const ts_model *m);
/* DIR/stability_<signal>.png; CLI exit code. */
int cli_stability_plot(const cli_stability *h, const char *dir);
void cli_stability_free(cli_stability *h);

/* ---- commands */
int cmd_train(int argc, char **argv, bool eval_only);
int cmd_names(int argc, char **argv);
int cmd_graph(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_debug_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_memory(int argc, char **argv);
/* A command on a compiled model with `names`' model flags (tools/cmd_names.c):
 * parses `extra` (NULL-terminated, may be NULL) and the model flags, then
 * builds and compiles the training (or --inference) model they describe,
 * its buffers allocated (a command that only inspects compiles to plan only). */
int cli_model_command(const char *cmd, const char *usage, const cli_flag *extra, int argc, char **argv, cli_model *cm, ts_model **m,
                      bool *help);
int cmd_lint(int argc, char **argv);
int cmd_version(void);
int cmd_info(int argc, char **argv);
int cmd_stacks(int argc, char **argv);
/* ---- language models (cmd_gpt.c): `generate`, and what training keeps for it */
int cmd_generate(int argc, char **argv);
/* DIR/lm.txt (the model and its flags) and DIR/vocab.txt beside the saved
 * weights of a model trained on a corpus: what `generate --weights DIR`
 * rebuilds it from. A CLI exit code (the error printed). */
int cli_lm_save(const char *dir, const char *model, const cli_import *imp, const cli_model *cm, const ts_corpus *corpus);
/* Attention maps (--attention-map TENSOR[:SAMPLE]): the [B,H,T,T]
 * probabilities an inference model `inf` of em anchored in its last run on
 * the tokens x [B,T], as PNGs in dir (and TensorBoard images when tb). */
int cli_attention_maps(ts_model *inf, const cli_model *em, const cli_list *specs, const int32_t *x, const ts_corpus *corpus,
                       const char *dir, ts_tb_writer *tb, int64_t step);

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
/* loss/train, train/learning_rate, train/samples_per_second at the model's
 * step; grad/norm/<param> and grad/norm/global from the Accum___ watches;
 * memory/rss, memory/peak_rss, memory/pss, memory/uss (MiB) while the
 * memory watcher runs (--watch-memory);
 * histograms and range/<name>/<format>_<under|over>flow of the watches. */
/* replicas > 1: the watch results hold a row per replica and one over all */
ts_status cli_tb_step(ts_tb_writer *tb, const ts_model *m, double loss, double samples_per_s, int replicas);
/* loss/heldout and accuracy/heldout (percent) of the held-out images. Both
 * return the first write's failure (a full disk stops training). */
ts_status cli_tb_eval(ts_tb_writer *tb, int64_t step, double loss, double accuracy);

/* ---- the offline debugger dump (cmd_train_dump.c, cmd_inspect_dump.c) */
typedef struct cli_dump_debug {
    const char *dir, *steps, *ops; /* --dump-debug, --dump-steps, --dump-ops */
    bool grads;                    /* --grads */
    long long limit;               /* --dump-limit in bytes (0: none) */
    const char *limit_text;        /* as given, for the plan's line */
} cli_dump_debug;
/* Checks the flags and sets the options (rank 0 of a job dumps). */
int cli_dump_debug_options(const char *cmd, const cli_dump_debug *d, ts_options *o);
/* After compile, before training of last_run runs: the plan said (unless
 * quiet) and refused over the limit, or when it selects nothing. */
int cli_dump_debug_plan(const char *cmd, ts_model *m, const cli_dump_debug *d, long last_run, bool quiet);
/* `inspect DIR`: the inspector over a dump's tensors. */
int cli_inspect_dump(const char *dir);
/* The inspector's pieces (inspector.c) the offline one shares: a[spec]
 * (numpy's basic slicing; false and said on a bad spec) as a new array
 * (data malloc'd); values printed as numpy does under their summary line;
 * the change from was to now (a summary of now - was, how many changed);
 * a command line read at the prompt (malloc'd; NULL at the end of input). */
bool cli_slice_values(const char *name, const ts_array *a, const char *spec, ts_array *out);
void cli_print_values(const char *label, const ts_array *a);
/* eval's answer (ts_eval's status and result): printed as print prints a
 * tensor, then freed; or the error. */
void cli_print_eval(const char *expr, ts_status st, ts_array *a);
void cli_print_change(const char *label, const ts_array *was, const ts_array *now);
char *cli_read_command(void);

/* ---- summaries (cmd_inspect.c): what `inspect FILE.npy` and the
 * inspector's `stats` print, for any dtype (summarised as f32 values) */
double cli_array_value(const ts_array *a, int64_t i);
/* TS_ERR_OUT_OF_MEMORY without a message (the caller says so) */
ts_status cli_summarize(const ts_array *a, int what, ts_summary *out);
/* The summary line, the stats table row, the counts, the ranges and a text
 * histogram of log2|x|; a CLI exit code. */
int cli_print_summary(const char *name, const ts_array *a);

/* ---- the inspector (inspector.c, docs/inspector.md): a prompt on the
 * terminal with training paused after a run (--break-at-step N, SIGUSR2,
 * `step K`) or at the tensor a numeric check stopped at (--break-on-nan) */
typedef enum { CLI_INSPECT_CONTINUE, CLI_INSPECT_QUIT } cli_inspect_action;
typedef struct cli_inspector cli_inspector;
/* Before any work: a usage error (--break-at-step below 1, --break-on-nan
 * without --check-numerics) as a CLI exit code. */
int cli_inspector_check(const char *cmd, long break_at, bool break_on_nan, bool check_numerics);
/* Before training; from then on SIGUSR2 pauses at the next run boundary,
 * flags or not. When stdin is not a terminal, or in an MPI job,
 * nothing prompts: one line says a break flag (or SIGUSR2) is skipped and
 * training goes on. NULL only when out of memory (said). */
cli_inspector *cli_inspector_new(const char *cmd, long break_at, bool break_on_nan);
void cli_inspector_free(cli_inspector *in);
/* "libedit" or "none (apt-get install libedit-dev, then rebuild)" */
const char *cli_line_editing(void);
/* Before run `run` (1-based, counted over the whole training): arms the
 * model's hold when the inspector opens after it; true when it does. */
bool cli_inspector_arm(cli_inspector *in, ts_model *m, long run);
/* After run `run` armed by cli_inspector_arm: the prompt until
 * `continue`, `step K` or `quit`. */
cli_inspect_action cli_inspector_after_run(cli_inspector *in, ts_model *m, long run);
/* After a run the numeric check stopped (TS_ERR_NUMERICS), when the run completed no optimizer step (`steps_before` ==
 * ts_model_steps): runs the same inputs again with the hold armed and opens
 * the prompt at the tensor it stops at. Training cannot go on: `continue`
 * ends it as the check did, `quit` exits 130. CONTINUE when no inspector. */
cli_inspect_action cli_inspector_on_nan(cli_inspector *in, ts_model *m, const char *const *names, const ts_array *inputs, int n,
                                        int64_t steps_before);
/* After a run the spike detector stopped (--on-spike inspect: the run held,
 * its step's update not applied): the prompt over the step's tensors;
 * `continue` trains on from the next batch. Without a terminal, one line
 * says so and training goes on. CONTINUE when no inspector. */
cli_inspect_action cli_inspector_on_spike(cli_inspector *in, ts_model *m);

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
