/* main.c -- `tensorscope COMMAND [flags]`: dispatch, help and version.
 * Exit codes: 0 success, 1 runtime error, 2 usage error. */
#include "cli.h"

#include <signal.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: tensorscope COMMAND [flags]\n\n"
               "Train neural networks on a compiled static graph and see any tensor in it.\n\n"
               "commands:\n"
               "  train       train a model (mlp, cnn on MNIST or arrays, gpt on text, an ONNX file), observing what you ask for\n"
               "  eval        evaluate a model (optionally with saved weights)\n"
               "  generate    sample text from a language model trained on a text corpus (train --model gpt)\n"
               "  names       compile a model and print every tensor name\n"
               "  graph       print a model's graph as text or Graphviz DOT\n"
               "  inspect     summarise a .npy file: one line, stats and a histogram; or open a --dump-debug DIR in the inspector\n"
               "  compare     run a model and compare every tensor with a reference dump (or two dumps)\n"
               "  diff        two runs' dumps tensor by tensor: the first that differs, its op, line and inputs\n"
               "  memory      where a model's memory goes over one step: the live tensors at each op, the peak\n"
               "  lint        list the mistakes a model's graph shows that give bad scores without an error\n"
               "  debug-run   run a command with debug settings and archive what it left\n"
               "  info        the version, the optional features built and the devices here (CPU, every GPU)\n"
               "  stacks      print every thread's native stack of a running tensorscope process (stacks PID)\n\n"
               "Run 'tensorscope COMMAND --help' for a command's flags; --version prints the version\n"
               "and the optional features this build has.\n");
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* a closed pipe is an error to report, not a death */
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(c, "--version") == 0 || strcmp(c, "version") == 0) return cmd_version();
    if (strcmp(c, "info") == 0) return cmd_info(argc, argv);
    if (strcmp(c, "train") == 0) return cmd_train(argc, argv, false);
    if (strcmp(c, "generate") == 0) return cmd_generate(argc, argv);
    if (strcmp(c, "eval") == 0) return cmd_train(argc, argv, true);
    if (strcmp(c, "names") == 0) return cmd_names(argc, argv);
    if (strcmp(c, "graph") == 0) return cmd_graph(argc, argv);
    if (strcmp(c, "inspect") == 0) return cmd_inspect(argc, argv);
    if (strcmp(c, "debug-run") == 0) return cmd_debug_run(argc, argv);
    if (strcmp(c, "compare") == 0) return cmd_compare(argc, argv);
    if (strcmp(c, "diff") == 0) return cmd_diff(argc, argv);
    if (strcmp(c, "memory") == 0) return cmd_memory(argc, argv);
    if (strcmp(c, "lint") == 0) return cmd_lint(argc, argv);
    if (strcmp(c, "stacks") == 0) return cmd_stacks(argc, argv);
    static const char *const commands[] = {"train", "eval", "generate", "names", "graph", "inspect", "compare", "diff", "memory", "lint", "debug-run", "info", "stacks", "help", "version"};
    char close[256];
    ts_closest_words(c, commands, sizeof commands / sizeof commands[0], close, sizeof close);
    fprintf(stderr, "tensorscope: unknown command '%s'; did you mean %s?\nRun 'tensorscope --help' for the list of commands.\n", c, close);
    return CLI_USAGE;
}
