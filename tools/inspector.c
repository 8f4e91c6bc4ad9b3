/* inspector.c -- `train --break-at-step N`, `--break-on-nan` and SIGUSR2: a
 * prompt on the terminal with training paused, over the tensors the model
 * held for the run (ts_model_hold): list, stats, print with numpy slices,
 * diff against the previous stop, save as .npy, grad, where, step,
 * continue, quit (docs/inspector.md). Line editing and history through
 * libedit when the build has it, else plain lines. In an MPI job rank 0
 * prompts and its answers reach every rank (ts_dist_broadcast), which
 * wait at the same run boundary. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#ifdef TS_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

/* A tensor's value at the previous stop, for `diff`. */
typedef struct kept {
    char *name;
    ts_array a; /* data malloc'd */
} kept;

struct cli_inspector {
    const char *cmd;
    const char *cannot; /* why it cannot prompt (no terminal); NULL: it can */
    bool job;        /* an MPI job that pauses: rank 0 prompts, its answers reach every rank */
    bool lead;       /* this process prompts (rank 0) */
    long break_at;   /* --break-at-step: the run it opens after (0: none) */
    bool on_nan;     /* --break-on-nan */
    long next;       /* `step K`: the run it opens after next (0: none) */
    kept *kept;      /* every tensor looked at, as it was at the last stop */
    int n_kept, cap_kept;
    char **seen;     /* names looked at during this stop */
    int n_seen, cap_seen;
};

static volatile sig_atomic_t g_pause; /* SIGUSR2: pause at the next run boundary */
static void on_usr2(int sig) {
    (void)sig;
    g_pause = 1;
}

/* Whether a person can answer rank 0 of an MPI job: OpenMPI's mpirun
 * forwards its stdin to rank 0 through a pipe, so a terminal shows as the
 * controlling one (/dev/tty), inherited from mpirun when it was started
 * from a terminal. Rank 0 reads stdin still: its own process group may not
 * read the terminal, mpirun does and forwards the lines. */
static bool job_has_terminal(void) {
    if (isatty(STDIN_FILENO)) return true;
    int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return false;
    close(fd);
    return true;
}

/* In a pausing MPI job: rank 0's answer (continue, `step K`, quit) to every
 * rank, which wait for it however long the person takes (the job's
 * timeout is lifted meanwhile). Elsewhere: the answer as it is. */
static cli_inspect_action share_answer(cli_inspector *in, cli_inspect_action act) {
    if (!in->job) return act;
    long answer[2] = {(long)act, in->next};
    double limit = ts_dist_timeout();
    ts_dist_set_timeout(1e6);
    ts_status st = ts_dist_broadcast(answer, sizeof answer);
    ts_dist_set_timeout(limit);
    if (st) {
        fprintf(stderr, "tensorscope %s: the inspector's answer did not reach every rank: %s; stopping\n", in->cmd, ts_last_error());
        return CLI_INSPECT_QUIT;
    }
    in->next = answer[1];
    return answer[0] == CLI_INSPECT_QUIT ? CLI_INSPECT_QUIT : CLI_INSPECT_CONTINUE;
}

int cli_inspector_check(const char *cmd, long break_at, bool break_on_nan, bool check_numerics) {
    if (break_at < 0) return cli_usage_error(cmd, "--break-at-step must be a run number >= 1, got %ld", break_at);
    if (break_on_nan && !check_numerics)
        return cli_usage_error(cmd, "--break-on-nan opens the inspector where the numeric check stops training: add --check-numerics op "
                               "(stops at the op that made the NaN) or output");
    return CLI_OK;
}

cli_inspector *cli_inspector_new(const char *cmd, long break_at, bool break_on_nan) {
    cli_inspector *in = calloc(1, sizeof *in);
    const char *flag = break_at ? "--break-at-step" : break_on_nan ? "--break-on-nan" : NULL;
    if (!in) {
        fprintf(stderr, "tensorscope %s: %s: out of memory; going on without the inspector\n", cmd, flag ? flag : "SIGUSR2");
        return NULL;
    }
    in->cmd = cmd;
    in->lead = ts_dist_rank() == 0;
    if (ts_dist_size() > 1) { /* whether rank 0 can prompt: every rank must know, to wait at the same boundaries */
        int can = in->lead && job_has_terminal();
        if (ts_dist_broadcast(&can, sizeof can)) {
            fprintf(stderr, "tensorscope %s: the inspector: %s; going on without it\n", cmd, ts_last_error());
            can = 0;
        }
        in->job = can;
        if (!can) in->cannot = "no terminal (mpirun was not started from one)"; /* CI, nohup, setsid: never wait for a person */
    } else if (!isatty(STDIN_FILENO)) {
        in->cannot = "stdin is not a terminal"; /* CI, pipes: never wait for a person */
    }
    if (in->cannot && flag && in->lead) fprintf(stderr, "tensorscope %s: %s: %s; going on\n", cmd, flag, in->cannot);
    in->break_at = in->cannot ? 0 : break_at;
    in->on_nan = !in->cannot && break_on_nan;
    if (in->on_nan && in->job) { /* a numeric stop marks the job failed: no rank can run the batch again with the others */
        in->on_nan = false;
        if (in->lead)
            fprintf(stderr, "tensorscope %s: --break-on-nan: an MPI job ends at a numeric stop (its ranks cannot run the batch again together); "
                    "going on without it: reproduce it in one process (without mpirun) to inspect it\n", cmd);
    }
    struct sigaction sa; /* even without a terminal: SIGUSR2 is said to be ignored rather than end training */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    return in;
}

static void forget_seen(cli_inspector *in) {
    for (int i = 0; i < in->n_seen; i++) free(in->seen[i]);
    in->n_seen = 0;
}

void cli_inspector_free(cli_inspector *in) {
    if (!in) return;
    signal(SIGUSR2, SIG_DFL);
    for (int i = 0; i < in->n_kept; i++) free(in->kept[i].name), free(in->kept[i].a.data);
    free(in->kept);
    forget_seen(in);
    free(in->seen);
    free(in);
}

bool cli_inspector_arm(cli_inspector *in, ts_model *m, long run) {
    if (!in) return false;
    if (in->cannot && g_pause) {
        g_pause = 0;
        if (ts_dist_rank() == 0) fprintf(stderr, "tensorscope %s: SIGUSR2: %s; going on\n", in->cmd, in->cannot);
    }
    int due = in->lead && (run == in->break_at || run == in->next || g_pause);
    if (due && ts_model_hold(m, 1)) {
        fprintf(stderr, "tensorscope: the inspector cannot hold the run: %s; going on\n", ts_last_error());
        due = 0;
    }
    if (in->job) { /* rank 0's decision (its SIGUSR2 included) at the same boundary on every rank: one small collective a run */
        if (!in->lead) g_pause = 0;  /* a signal to another rank alone: rank 0 did not see it */
        if (ts_dist_broadcast(&due, sizeof due)) {
            fprintf(stderr, "tensorscope %s: the inspector: %s; going on without it\n", in->cmd, ts_last_error());
            in->job = false, in->cannot = "the ranks could not agree on pausing";
            if (due) ts_model_hold(m, 0);
            return false;
        }
    }
    return due;
}

/* ---- reading a line */

const char *cli_line_editing(void) {
#ifdef TS_HAVE_LIBEDIT
    return "libedit";
#else
    return "none (apt-get install libedit-dev, then rebuild)";
#endif
}

static char *read_command(void) {
#ifdef TS_HAVE_LIBEDIT
    if (isatty(STDIN_FILENO)) {
        char *l = readline("(tensorscope) ");
        if (l && *l) add_history(l);
        return l;
    }
#endif
    /* rank 0 under mpirun: the lines mpirun forwards, edited by the terminal; any length */
    fputs("(tensorscope) ", stdout);
    fflush(stdout);
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, stdin) < 0) {
        free(line);
        return NULL;
    }
    line[strcspn(line, "\r\n")] = 0;
    return line;
}

/* ---- the commands */

static const struct command {
    const char *name, *args, *help;
} commands[] = {
    {"help", "[COMMAND]", "the commands, or one command's help"},
    {"list", "[PATTERN]", "held tensors (a glob: 'list fc1*', 'list Gradient___*'), with dtype and shape"},
    {"stats", "NAME", "summary line, stats, counts of NaN/Inf, ranges and a histogram of log2|x|"},
    {"print", "NAME[SLICES]", "values, numpy slicing: print fc1/MatMul:0[0,:5], print x[-1,...,::2]"},
    {"diff", "NAME[SLICES]", "the change since the previous stop, for tensors looked at then"},
    {"save", "NAME[SLICES] FILE.npy", "write the values as a .npy file"},
    {"grad", "NAME[SLICES]", "print the gradient of NAME (Gradient___NAME)"},
    {"where", "NAME", "the op that made NAME and the source line that built it"},
    {"eval", "EXPR", "a numpy-style expression over held tensors: eval fc1.weight.T @ x[0], eval where(fc1.bias > 0)"},
    {"rerun", "NAME[IDX]=VALUE", "the held run again with one input or weight changed, on the side (NAME=F.npy: all of it): loss, what differs"},
    {"step", "[K]", "train K more runs (default 1) and stop again"},
    {"continue", "", "train on (to the next break)"},
    {"quit", "", "stop training: write what was asked (weights, checkpoint, logs), exit 130 as Ctrl-C"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void help(const char *what) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!what || !*what || strcmp(what, commands[i].name) == 0) {
            char left[64];
            snprintf(left, sizeof left, "%s %s", commands[i].name, commands[i].args);
            printf("  %-30s %s\n", left, commands[i].help);
            if (what && *what) return;
        }
    if (what && *what) {
        const char *names[N_COMMANDS];
        for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].name;
        char near[256];
        printf("error: no command '%s'; closest: %s\n", what, ts_closest_words(what, names, N_COMMANDS, near, sizeof near));
    }
}

/* A held tensor by name, or an error line naming the closest. */
static bool get(ts_model *m, const char *name, ts_array *a) {
    if (ts_model_held(m, name, a) == TS_OK) return true;
    const char *e = ts_last_error(), *call = "ts_model_held: ";
    printf("error: %s\n", strncmp(e, call, strlen(call)) == 0 ? e + strlen(call) : e);
    return false;
}

/* numpy's basic indexing: per dimension an index (the dimension goes), or
 * start:stop:step (any part left out), `:`, and one `...` for the
 * dimensions not named. Into out: a new array (data malloc'd). */
typedef struct range {
    int64_t start, step, count;
    bool index;
} range;

/* An integer of any length: NUM_OK, NUM_BAD (not one), or NUM_HUGE past
 * int64 (*v then the nearest int64, as Python clips a slice's bounds). */
enum { NUM_BAD, NUM_OK, NUM_HUGE };
static int parse_int(const char *s, const char *end, int64_t *v) {
    while (s < end && isspace((unsigned char)*s)) s++;
    while (end > s && isspace((unsigned char)end[-1])) end--;
    bool neg = s < end && *s == '-';
    if (s < end && (*s == '-' || *s == '+')) s++;
    if (s == end) return NUM_BAD;
    uint64_t x = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool huge = false;
    for (; s < end; s++) {
        if (!isdigit((unsigned char)*s)) return NUM_BAD;
        unsigned digit = (unsigned)(*s - '0');
        if (huge || x > (limit - digit) / 10) huge = true;
        else x = x * 10 + digit;
    }
    if (huge) x = limit;
    *v = neg ? (x == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)x) : (int64_t)x;
    return huge ? NUM_HUGE : NUM_OK;
}

static bool blank(const char *s, const char *end) {
    while (s < end && isspace((unsigned char)*s)) s++;
    return s == end;
}

static bool slice_error(const char *name, const char *fmt, const char *detail, int64_t a, int64_t b) {
    printf("error: %s[...]: ", name);
    printf(fmt, detail, (long long)a, (long long)b);
    printf("\n");
    return false;
}

static bool parse_slices(const char *name, const char *spec, const ts_array *a, range *r) {
    const char *items[TS_MAX_DIMS + 2], *ends[TS_MAX_DIMS + 2];
    int n = 0, ellipsis = -1;
    for (const char *p = spec;; n++) {
        const char *c = strchr(p, ',');
        if (n == TS_MAX_DIMS + 1)
            return slice_error(name, "%s%lld indices at most (the tensor has %lld dimensions)", "", TS_MAX_DIMS + 1, a->ndim);
        items[n] = p, ends[n] = c ? c : p + strlen(p);
        if (!c) {
            n++;
            break;
        }
        p = c + 1;
    }
    for (int k = 0; k < n; k++) {
        const char *s = items[k];
        while (s < ends[k] && isspace((unsigned char)*s)) s++;
        if (ends[k] - s >= 3 && strncmp(s, "...", 3) == 0 && blank(s + 3, ends[k])) {
            if (ellipsis >= 0) {
                printf("error: %s[%s]: only one '...' may appear\n", name, spec);
                return false;
            }
            ellipsis = k;
        }
    }
    int named = n - (ellipsis >= 0);
    if (n == 1 && blank(items[0], ends[0])) named = 0, n = 0; /* NAME[] */
    if (named > a->ndim) {
        char shape[96];
        printf("error: %s[%s]: %d ind%s for a tensor of %d dimensions (%s)\n", name, spec, named, named == 1 ? "ex" : "ices", a->ndim,
               ts_array_shape_str(a, shape, sizeof shape));
        return false;
    }
    int d = 0;
    for (int k = 0; k < n; k++) {
        if (k == ellipsis) {
            for (int q = 0; q < a->ndim - named; q++, d++) r[d] = (range){0, 1, a->shape[d], false};
            continue;
        }
        int64_t size = a->shape[d];
        const char *c1 = memchr(items[k], ':', (size_t)(ends[k] - items[k]));
        char text[64];
        snprintf(text, sizeof text, "%.*s", (int)(ends[k] - items[k]), items[k]);
        if (!c1) {
            int64_t i;
            int got = parse_int(items[k], ends[k], &i);
            if (got == NUM_BAD)
                return slice_error(name, "cannot read '%s' (dimension %lld, size %lld): give an index, start:stop[:step], ':' or '...'", text, d,
                                   size);
            if (got == NUM_HUGE || i < -size || i >= size) {
                printf("error: %s[...]: index %.*s is out of range for dimension %d of size %lld\n", name, (int)(ends[k] - items[k]), items[k], d,
                       (long long)size);
                return false;
            }
            r[d++] = (range){i < 0 ? i + size : i, 1, 1, true};
            continue;
        }
        const char *c2 = memchr(c1 + 1, ':', (size_t)(ends[k] - c1 - 1));
        int64_t start = 0, stop = size, step = 1;
        const char *e1 = c1, *s2 = c1 + 1, *e2 = c2 ? c2 : ends[k];
        /* bounds and step past int64 are clipped, as numpy (Python's slices) does */
        if ((!blank(items[k], e1) && !parse_int(items[k], e1, &start)) || (!blank(s2, e2) && !parse_int(s2, e2, &stop)) ||
            (c2 && !blank(c2 + 1, ends[k]) && !parse_int(c2 + 1, ends[k], &step)))
            return slice_error(name, "cannot read '%s' (dimension %lld, size %lld): give an index, start:stop[:step], ':' or '...'", text, d, size);
        if (step <= 0) return slice_error(name, "'%s': the step must be >= 1 (%lld given; dimension %lld)", text, step, d);
        if (start < 0) start += size; /* a negative plus a size: no overflow */
        if (stop < 0) stop += size;
        start = start < 0 ? 0 : start > size ? size : start;
        stop = stop < 0 ? 0 : stop > size ? size : stop;
        /* ceil((stop - start) / step) without overflow for any step; each
         * start + i * step (i < count) stays below stop */
        r[d++] = (range){start, step, stop > start ? 1 + (stop - start - 1) / step : 0, false};
    }
    for (; d < a->ndim; d++) r[d] = (range){0, 1, a->shape[d], false};
    return true;
}

/* NAME[SLICES] -> name and spec (empty: the whole tensor); a name that
 * itself ends in ']' is taken whole when held. False (said) when either
 * does not fit its buffer: nothing is cut. */
static bool cut_name(ts_model *m, const char *arg, char *name, size_t n, char *spec, size_t ns) {
    const char *br = strrchr(arg, '[');
    size_t len = strlen(arg);
    bool sliced = br && len && arg[len - 1] == ']' && !ts_model_is_held(m, arg);
    size_t name_len = sliced ? (size_t)(br - arg) : len, spec_len = sliced ? len - name_len - 2 : 0;
    if (name_len >= n || spec_len >= ns) {
        printf("error: %s is %zu characters long; a name may have %zu, slices %zu\n", name_len >= n ? "the name" : "the slice spec",
               name_len >= n ? name_len : spec_len, n - 1, ns - 1);
        return false;
    }
    snprintf(name, n, "%.*s", (int)name_len, arg);
    snprintf(spec, ns, "%.*s", (int)spec_len, sliced ? br + 1 : "");
    return true;
}

/* The offset in a of the k-th value of the slice r (row-major order). */
static int64_t slice_offset(const ts_array *a, const range *r, const int64_t *strides, int64_t k) {
    int64_t rest = k, off = 0;
    for (int d = a->ndim - 1; d >= 0; d--) {
        int64_t i = r[d].count ? rest % r[d].count : 0;
        rest = r[d].count ? rest / r[d].count : 0;
        off += (r[d].start + i * r[d].step) * strides[d];
    }
    return off;
}

/* The values of a[spec] as a new array (data malloc'd). */
static bool slice_array(const char *name, const ts_array *a, const char *spec, ts_array *out) {
    range r[TS_MAX_DIMS];
    if (!parse_slices(name, spec, a, r)) return false;
    memset(out, 0, sizeof *out);
    out->dtype = a->dtype;
    int64_t count = 1, strides[TS_MAX_DIMS], s = 1;
    for (int d = a->ndim - 1; d >= 0; d--) strides[d] = s, s *= a->shape[d];
    for (int d = 0; d < a->ndim; d++) {
        count *= r[d].count;
        if (!r[d].index) out->shape[out->ndim++] = r[d].count;
    }
    size_t es = ts_dtype_size(a->dtype);
    out->data = malloc((size_t)(count ? count : 1) * es);
    if (!out->data) {
        printf("error: out of memory\n");
        return false;
    }
    for (int64_t k = 0; k < count; k++) memcpy((char *)out->data + (size_t)k * es, (const char *)a->data + (size_t)slice_offset(a, r, strides, k) * es, es);
    return true;
}

/* a[spec] = v, in place (a's data is f32) */
static bool assign_slice(const char *name, ts_array *a, const char *spec, float v) {
    range r[TS_MAX_DIMS];
    if (!parse_slices(name, spec, a, r)) return false;
    int64_t count = 1, strides[TS_MAX_DIMS], s = 1;
    for (int d = a->ndim - 1; d >= 0; d--) strides[d] = s, s *= a->shape[d];
    for (int d = 0; d < a->ndim; d++) count *= r[d].count;
    for (int64_t k = 0; k < count; k++) ((float *)a->data)[slice_offset(a, r, strides, k)] = v;
    return true;
}

/* NAME or NAME[SLICES] of a held tensor into a new array. */
static bool select_values(ts_model *m, const char *arg, char *name, size_t n, ts_array *out) {
    char spec[256];
    ts_array a;
    return cut_name(m, arg, name, n, spec, sizeof spec) && get(m, name, &a) && slice_array(name, &a, spec, out);
}

static void note_seen(cli_inspector *in, const char *name) {
    for (int i = 0; i < in->n_seen; i++)
        if (strcmp(in->seen[i], name) == 0) return;
    if (in->n_seen == in->cap_seen) {
        int cap = in->cap_seen ? 2 * in->cap_seen : 8;
        char **s = realloc(in->seen, (size_t)cap * sizeof *s);
        if (!s) return;
        in->seen = s, in->cap_seen = cap;
    }
    if ((in->seen[in->n_seen] = strdup(name))) in->n_seen++;
}

/* numpy's print: nested brackets, past 1000 values the first and last 3
 * of each dimension; floats with 7 significant digits. */
#define EDGE 3
static void print_dim(const ts_array *a, int dim, int64_t off, bool summarise) {
    int64_t size = a->shape[dim], stride = 1;
    for (int i = dim + 1; i < a->ndim; i++) stride *= a->shape[i];
    putchar('[');
    for (int64_t i = 0; i < size; i++) {
        if (summarise && size > 2 * EDGE && i == EDGE) {
            printf("...");
            i = size - EDGE - 1;
            printf(dim == a->ndim - 1 ? ", " : ",\n%*s", dim == a->ndim - 1 ? 0 : dim + 1, "");
            continue;
        }
        if (dim == a->ndim - 1) {
            double v = cli_array_value(a, off + i);
            if (a->dtype == TS_F32 || a->dtype == TS_F64) printf("%.7g", v);
            else printf("%.0f", v);
        } else {
            print_dim(a, dim + 1, off + i * stride, summarise);
        }
        if (i + 1 < size) printf(dim == a->ndim - 1 ? ", " : ",\n%*s", dim == a->ndim - 1 ? 0 : dim + 1, "");
    }
    putchar(']');
}

static void print_values(const char *label, const ts_array *a) {
    ts_summary s;
    char line[512];
    int64_t n = ts_array_numel(a);
    if (cli_summarize(a, TS_WATCH_STATS, &s) == TS_OK) printf("%s\n", ts_summary_line(label, a, &s.stats, line, sizeof line));
    if (a->ndim == 0) printf("%.7g\n", cli_array_value(a, 0));
    else if (n == 0) printf("[]\n");
    else {
        print_dim(a, 0, 0, n > 1000);
        putchar('\n');
    }
}

static kept *find_kept(cli_inspector *in, const char *name) {
    for (int i = 0; i < in->n_kept; i++)
        if (strcmp(in->kept[i].name, name) == 0) return &in->kept[i];
    return NULL;
}

void cli_print_change(const char *label, const ts_array *was, const ts_array *now) {
    int64_t n = ts_array_numel(now), changed = 0;
    float *delta = malloc((size_t)(n ? n : 1) * sizeof *delta);
    double max_abs = 0;
    for (int64_t i = 0; delta && i < n; i++) {
        double b = cli_array_value(was, i), c = cli_array_value(now, i);
        delta[i] = (float)(c - b);
        if (c != b && !(isnan(c) && isnan(b))) changed++;
        if (fabs(c - b) > max_abs) max_abs = fabs(c - b);
    }
    if (delta) {
        ts_array d = *now;
        d.dtype = TS_F32;
        d.data = delta;
        char line[512];
        ts_summary s;
        if (ts_summarize_f32(delta, n, TS_WATCH_STATS, &s) == TS_OK) printf("%s\n", ts_summary_line(label, &d, &s.stats, line, sizeof line));
        printf("changed %lld of %lld values, max |change| %.7g\n", (long long)changed, (long long)n, max_abs);
    } else {
        printf("error: out of memory\n");
    }
    free(delta);
}

static void diff(cli_inspector *in, ts_model *m, const char *arg) {
    char name[512], spec[256];
    ts_array full, now, was;
    if (!cut_name(m, arg, name, sizeof name, spec, sizeof spec) || !get(m, name, &full)) return;
    note_seen(in, name);
    kept *k = find_kept(in, name);
    if (!k) {
        printf("'%s' has no value from the previous stop: diff compares with the value a tensor had when training last paused, for the "
               "tensors looked at then; it is kept from now on\n", name);
        return;
    }
    if (k->a.ndim != full.ndim || memcmp(k->a.shape, full.shape, sizeof full.shape) != 0) {
        printf("'%s' changed shape since the previous stop; nothing to compare\n", name);
        return;
    }
    if (!slice_array(name, &full, spec, &now)) return;
    if (!slice_array(name, &k->a, spec, &was)) {
        free(now.data);
        return;
    }
    char label[600];
    snprintf(label, sizeof label, "%s - previous", arg);
    cli_print_change(label, &was, &now);
    free(now.data);
    free(was.data);
}

/* At leaving a stop: the tensors looked at, kept as they are now. */
static void keep_seen(cli_inspector *in, ts_model *m) {
    for (int i = 0; i < in->n_seen; i++) {
        ts_array a;
        if (ts_model_held(m, in->seen[i], &a)) continue;
        size_t bytes = (size_t)ts_array_numel(&a) * ts_dtype_size(a.dtype);
        kept *k = find_kept(in, in->seen[i]);
        if (!k) {
            if (in->n_kept == in->cap_kept) {
                int cap = in->cap_kept ? 2 * in->cap_kept : 8;
                kept *p = realloc(in->kept, (size_t)cap * sizeof *p);
                if (!p) continue;
                in->kept = p, in->cap_kept = cap;
            }
            k = &in->kept[in->n_kept];
            memset(k, 0, sizeof *k);
            if (!(k->name = strdup(in->seen[i]))) continue;
            in->n_kept++;
        }
        void *data = realloc(k->a.data, bytes ? bytes : 1);
        if (!data) continue;
        memcpy(data, a.data, bytes);
        k->a = a;
        k->a.data = data;
    }
    forget_seen(in);
}

static void list(ts_model *m, const char *pattern) {
    const char *const *names;
    size_t n, shown = 0;
    if (ts_model_held_names(m, &names, &n)) {
        printf("error: %s\n", ts_last_error());
        return;
    }
    for (size_t i = 0; i < n; i++) {
        ts_array a;
        if (*pattern && !ts_name_matches(pattern, names[i])) continue;
        if (ts_model_held(m, names[i], &a)) continue;
        char shape[96];
        printf("  %-40s %s\n", names[i], ts_array_shape_str(&a, shape, sizeof shape));
        shown++;
    }
    if (!shown && *pattern) {
        char near[512];
        printf("error: no held tensor matches '%s'%s; closest: %s\n", pattern, strpbrk(pattern, "*?[") ? "" : " (a name, or a glob with * ? [)",
               ts_closest_words(pattern, names, n, near, sizeof near));
    }
}

/* The words of args as a shell splits them: '...' taken as it is, "..."
 * with \" and \\, a backslash outside quotes escaping the next character.
 * Into out (as long as args, the words NUL-separated), *n words. False
 * (said) on an unterminated quote. */
static bool split_words(const char *args, char *out, const char **words, int max_words, int *n) {
    *n = 0;
    for (const char *p = args; *p;) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        if (*n == max_words) {
            printf("error: more than %d words\n", max_words);
            return false;
        }
        words[(*n)++] = out;
        while (*p && !isspace((unsigned char)*p)) {
            char q = *p;
            if (q == '\'' || q == '"') {
                const char *open = p++;
                while (*p && *p != q) {
                    if (q == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\')) p++;
                    *out++ = *p++;
                }
                if (!*p) {
                    printf("error: the quote at '%.20s' is not closed\n", open);
                    return false;
                }
                p++;
            } else if (q == '\\' && p[1]) {
                *out++ = p[1];
                p += 2;
            } else {
                *out++ = *p++;
            }
        }
        *out++ = 0;
    }
    return true;
}

/* save NAME[SLICES] FILE: the last word is the file (quoted when it holds
 * spaces), the words before it the tensor and its slices. */
static void save(ts_model *m, cli_inspector *in, const char *args) {
    const char *words[64];
    int n = 0;
    char *buf = malloc(strlen(args) + 1), *what = malloc(strlen(args) + 1);
    if (!buf || !what) {
        printf("error: out of memory\n");
    } else if (split_words(args, buf, words, (int)(sizeof words / sizeof *words), &n)) {
        if (n < 2) {
            printf("error: save NAME[SLICES] FILE.npy: give a tensor and a file (quote a file name with spaces: 'my run.npy')\n");
        } else if (!*words[n - 1]) {
            printf("error: save: the file name is empty; give a file such as out.npy\n");
        } else {
            what[0] = 0; /* the tensor's words, one space between: fc1.weight[0, :3] */
            for (int i = 0; i < n - 1; i++) strcat(strcat(what, i ? " " : ""), words[i]);
            char name[512];
            ts_array a;
            if (select_values(m, what, name, sizeof name, &a)) {
                note_seen(in, name);
                if (ts_npy_save(words[n - 1], &a)) printf("error: %s\n", ts_last_error());
                else printf("saved %s to %s\n", what, words[n - 1]);
                free(a.data);
            }
        }
    }
    free(buf);
    free(what);
}

/* The words of a command line: the command, then its argument (the rest). */
static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

/* eval EXPR: the result printed as print prints a tensor. */
void cli_print_eval(const char *expr, ts_status st, ts_array *a) {
    if (st) {
        printf("error: %s\n", ts_last_error());
        return;
    }
    print_values(expr, a);
    ts_eval_free(a);
}

#define RERUN_SHOWN 10 /* tensors that differ, listed at most */

/* rerun NAME[IDX]=VALUE or NAME=FILE.npy: the held run again with the
 * change, its loss and the first tensors that differ from the held ones. */
static void rerun(ts_model *m, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) {
        printf("error: rerun NAME[IDX]=VALUE or NAME=FILE.npy: give an input or a weight, '=' and its new value (rerun fc1.weight[0,3]=0.5)\n");
        return;
    }
    char left[800], name[512], spec[256];
    snprintf(left, sizeof left, "%.*s", (int)(eq - arg < 799 ? eq - arg : 799), arg);
    const char *right = eq + 1;
    while (isspace((unsigned char)*right)) right++;
    char *l = trim(left), *end;
    ts_array held, value;
    if (!cut_name(m, l, name, sizeof name, spec, sizeof spec)) return;
    if (ts_model_held_before(m, name, &held)) { /* a parameter as the held run read it, before its update */
        const char *e = ts_last_error(), *call = "ts_model_held: ";
        printf("error: %s\n", strncmp(e, call, strlen(call)) == 0 ? e + strlen(call) : e);
        return;
    }
    double v = strtod(right, &end);
    bool number = end != right && blank(end, end + strlen(end));
    if (number) { /* the held values, the slice set to v */
        int64_t n = ts_array_numel(&held);
        value = held;
        value.dtype = TS_F32;
        if (!(value.data = malloc((size_t)(n ? n : 1) * sizeof(float)))) {
            printf("error: out of memory\n");
            return;
        }
        for (int64_t i = 0; i < n; i++) ((float *)value.data)[i] = (float)cli_array_value(&held, i);
        if (!assign_slice(name, &value, spec, (float)v)) {
            free(value.data);
            return;
        }
    } else {
        if (*spec) {
            printf("error: rerun %s[%s]=...: a slice takes a number (rerun %s[%s]=0.5); a .npy file replaces the whole tensor (rerun %s=%s)\n",
                   name, spec, name, spec, name, right);
            return;
        }
        if (ts_npy_load(right, &value)) {
            printf("error: rerun: '%s' is not a number, and as a .npy file: %s\n", right, ts_last_error());
            return;
        }
    }
    ts_rerun_result r;
    ts_status st = ts_model_rerun(m, name, &value, &r);
    if (number) free(value.data);
    else ts_npy_free(&value);
    if (st) {
        printf("error: %s\n", ts_last_error());
        return;
    }
    const ts_rerun_diff *d = r.diffs;
    size_t n = r.n_diffs;
    printf("rerun of the held run with %s: loss %.7g (held run: %.7g); the model is unchanged\n", arg, r.loss, r.held_loss);
    if (!n) printf("no tensor differs from the held run\n");
    else printf("%zu tensor%s differ%s from the held run; the first %s, in the order the rerun made them:\n", n, n == 1 ? "" : "s",
                n == 1 ? "s" : "", n > RERUN_SHOWN ? "10" : "ones");
    for (size_t i = 0; i < n && i < RERUN_SHOWN; i++)
        printf("  %-40s max |diff| %-12.7g %lld of %lld values\n", d[i].name, d[i].max_abs_diff, (long long)d[i].changed, (long long)d[i].numel);
}

static cli_inspect_action prompt(cli_inspector *in, ts_model *m, long run, bool can_go_on) {
    for (;;) {
        char *line = read_command();
        if (!line) { /* end of input: go on, never wait */
            printf("\n");
            forget_seen(in);
            return CLI_INSPECT_CONTINUE;
        }
        char *cmd = trim(line), *arg = cmd + strcspn(cmd, " \t");
        if (*arg) *arg++ = 0;
        arg = trim(arg);
        char name[512];
        ts_array a;
        if (!*cmd) {
        } else if (strcmp(cmd, "help") == 0 || strcmp(cmd, "h") == 0 || strcmp(cmd, "?") == 0) {
            help(arg);
        } else if (strcmp(cmd, "list") == 0 || strcmp(cmd, "ls") == 0) {
            list(m, arg);
        } else if (strcmp(cmd, "where") == 0) {
            char where[1024];
            if (!*arg) printf("error: where NAME: give a tensor name\n");
            else if (ts_model_tensor_origin(m, arg, where, sizeof where)) printf("error: %s\n", ts_last_error());
            else printf("%s\n", where);
        } else if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "print") == 0 || strcmp(cmd, "p") == 0 || strcmp(cmd, "grad") == 0) {
            char target[600];
            int len = snprintf(target, sizeof target, "%s%s", strcmp(cmd, "grad") == 0 ? "Gradient___" : "", arg);
            if (!*arg) printf("error: %s NAME: give a tensor name ('list' shows them)\n", cmd);
            else if (len < 0 || (size_t)len >= sizeof target) printf("error: %s: the name is %zu characters long; at most %zu\n", cmd, strlen(arg), sizeof target - 12);
            else if (select_values(m, target, name, sizeof name, &a)) {
                note_seen(in, name);
                if (strcmp(cmd, "stats") == 0) cli_print_summary(target, &a);
                else print_values(target, &a);
                free(a.data);
            }
        } else if (strcmp(cmd, "diff") == 0) {
            if (!*arg) printf("error: diff NAME: give a tensor name\n");
            else diff(in, m, arg);
        } else if (strcmp(cmd, "eval") == 0 || strcmp(cmd, "e") == 0) {
            if (!*arg) printf("error: eval EXPR: give an expression (eval fc1.weight.T @ x[0]; 'help eval')\n");
            else cli_print_eval(arg, ts_model_held_eval(m, arg, &a), &a);
        } else if (strcmp(cmd, "rerun") == 0) {
            rerun(m, arg);
        } else if (strcmp(cmd, "save") == 0) {
            save(m, in, arg);
        } else if (strcmp(cmd, "step") == 0 || strcmp(cmd, "s") == 0 || strcmp(cmd, "next") == 0) {
            int64_t k = 1;
            int got = *arg ? parse_int(arg, arg + strlen(arg), &k) : NUM_OK;
            if (got != NUM_OK || k < 1 || k > LONG_MAX - run)
                printf("error: step K: K is a number of runs from 1 to %ld, got '%s'\n", LONG_MAX - run, arg);
            else if (!can_go_on) printf("error: training cannot go on after the numeric check stopped it; 'continue' ends it, 'quit' exits 130\n");
            else {
                in->next = run + (long)k;
                keep_seen(in, m);
                free(line);
                return CLI_INSPECT_CONTINUE;
            }
        } else if (strcmp(cmd, "continue") == 0 || strcmp(cmd, "c") == 0 || strcmp(cmd, "cont") == 0) {
            keep_seen(in, m);
            free(line);
            return CLI_INSPECT_CONTINUE;
        } else if (strcmp(cmd, "quit") == 0 || strcmp(cmd, "q") == 0 || strcmp(cmd, "exit") == 0) {
            free(line);
            return CLI_INSPECT_QUIT;
        } else {
            const char *names[N_COMMANDS];
            for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].name;
            char near[256];
            printf("error: unknown command '%s'; closest: %s ('help' lists them)\n", cmd, ts_closest_words(cmd, names, N_COMMANDS, near, sizeof near));
        }
        fflush(stdout);
        free(line);
    }
}

cli_inspect_action cli_inspector_after_run(cli_inspector *in, ts_model *m, long run) {
    ts_model_hold(m, 0);
    const char *why = g_pause ? "on SIGUSR2" : run == in->break_at ? "at --break-at-step" : "after 'step'";
    g_pause = 0;
    if (!in->lead) return share_answer(in, CLI_INSPECT_CONTINUE); /* waits for rank 0's */
    printf("\ntraining paused %s after run %ld (optimizer step %lld); 'help' lists the commands\n", why, run, (long long)ts_model_steps(m));
    fflush(stdout);
    return share_answer(in, prompt(in, m, run, true));
}

cli_inspect_action cli_inspector_on_nan(cli_inspector *in, ts_model *m, const char *const *names, const ts_array *inputs, int n,
                                        int64_t steps_before) {
    if (!in || !in->on_nan) return CLI_INSPECT_CONTINUE;
    if (ts_model_steps(m) != steps_before) {
        printf("--break-on-nan: the run completed %lld optimizer steps before it stopped, so its inputs cannot be replayed as they were; "
               "use one step per run to inspect it\n", (long long)(ts_model_steps(m) - steps_before));
        return CLI_INSPECT_CONTINUE;
    }
    /* the same inputs again, the weights unchanged: the same NaN, with every tensor held */
    int level = ts_get_log_level();
    ts_set_log_level(TS_LOG_OFF); /* its report was logged once already */
    ts_status st = in->lead ? ts_model_hold(m, 1) : TS_OK; /* every rank runs it again (its collectives), rank 0 holds it */
    if (!st) st = ts_model_run(m, names, inputs, n);
    ts_model_hold(m, 0);
    ts_set_log_level(level);
    const char *failed = ts_model_failed_tensor(m);
    if (!in->lead) return share_answer(in, CLI_INSPECT_CONTINUE); /* every rank ran it again; rank 0 prompts */
    if (st != TS_ERR_NUMERICS || !failed) {
        printf("--break-on-nan: running the batch again did not stop at a NaN (%s); nothing to inspect\n", st ? ts_last_error() : "it ran clean");
        return share_answer(in, CLI_INSPECT_CONTINUE);
    }
    char where[1024] = "";
    ts_model_tensor_origin(m, failed, where, sizeof where);
    printf("\ntraining stopped by the numeric check at '%s': %s\nthe step's update was not applied; 'print %s' shows it, 'list' what "
           "the run made before it; 'help' lists the commands\n", failed, where, failed);
    fflush(stdout);
    return share_answer(in, prompt(in, m, (long)ts_model_runs(m), false));
}

cli_inspect_action cli_inspector_on_spike(cli_inspector *in, ts_model *m) {
    if (!in) return CLI_INSPECT_CONTINUE;
    if (in->cannot) {
        fprintf(stderr, "tensorscope %s: --on-spike inspect: %s; going on (the spike's step was not applied)\n", in->cmd, in->cannot);
        return CLI_INSPECT_CONTINUE;
    }
    ts_spike sp;
    ts_model_spike(m, &sp);
    printf("\ntraining paused at the spike of step %lld, before its update: %s of '%s' (layer %s), z %.3g; 'print %s' shows it, 'list' the "
           "step's tensors; 'continue' trains on from the next batch (this step's update is not applied)\n", (long long)sp.step, sp.signal,
           sp.tensor, sp.layer, sp.z, sp.tensor);
    fflush(stdout);
    return share_answer(in, prompt(in, m, (long)ts_model_runs(m), true));
}

/* ---- the same slicing and printing for the offline inspector (cmd_inspect_dump.c) */
bool cli_slice_values(const char *name, const ts_array *a, const char *spec, ts_array *out) { return slice_array(name, a, spec, out); }
void cli_print_values(const char *label, const ts_array *a) { print_values(label, a); }
char *cli_read_command(void) { return read_command(); }
