/* bench_onnx_import.c -- time to import an ONNX file (parse, initializers,
 * folding, graph), the median of REPS imports of the same file.
 *     bench_onnx_import FILE.onnx [REPS]
 * prints `onnx_import file=... bytes=... reps=N median_ms=.. min_ms=.. max_ms=..
 * cpu_median_ms=..` (CPU time, user + system: what a loaded machine inflates less)
 * and, when the import fails, the library's message (an op not yet
 * supported) with the time it took to fail. Models: bench/make_onnx_models.py. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "bench_common.h"

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec + ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_onnx_import FILE.onnx [REPS]\n");
        return 2;
    }
    long reps = arg_or(argc, argv, 2, 7);
    if (reps < 1 || reps > 1000) reps = 7;
    struct stat st;
    if (stat(argv[1], &st) != 0) {
        fprintf(stderr, "bench_onnx_import: cannot stat %s\n", argv[1]);
        return 1;
    }
    double *ms = calloc((size_t)reps, sizeof *ms), *cpu = calloc((size_t)reps, sizeof *cpu);
    ts_status status = TS_OK;
    size_t tensors = 0;
    for (long r = 0; r < reps && ms; r++) {
        ts_graph *g = NULL;
        double t0 = now_s(), c0 = cpu_s();
        status = ts_graph_from_onnx(&g, argv[1], NULL, 0);
        ms[r] = (now_s() - t0) * 1e3;
        cpu[r] = (cpu_s() - c0) * 1e3;
        tensors = ts_graph_tensor_count(g);
        ts_graph_free(g);
    }
    if (!ms || !cpu) return 1;
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
    printf("onnx_import file=%s bytes=%lld tensors=%zu reps=%ld median_ms=%.1f min_ms=%.1f max_ms=%.1f cpu_median_ms=%.1f%s\n",
           argv[1], (long long)st.st_size, tensors, reps, ms[reps / 2], ms[0], ms[reps - 1], cpu[reps / 2], status ? " (failed)" : "");
    if (status) printf("  import failed: %s\n", ts_last_error());
    free(ms);
    free(cpu);
    return 0;
}
