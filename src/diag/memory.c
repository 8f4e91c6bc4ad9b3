/* memory.c -- process memory from /proc (docs/observation.md#diagnostics).
 * Files are read with open/read into the caller's stack buffers: the
 * memory watcher's thread samples through here and allocates nothing. */
#include "diag/memory.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Reads up to cap - 1 bytes of path into buf (NUL-terminated); the byte
 * count, or -1 when it cannot be opened. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* The "<key>: N kB" lines of a /proc file; out_kb[i] -1 where key i is
 * absent. -1 if the file cannot be read. */
static int read_kb_fields(const char *path, const char *const *keys, size_t nkeys, int64_t *out_kb) {
    char buf[4096];
    if (read_small(path, buf, sizeof buf) < 0) return -1;
    for (size_t i = 0; i < nkeys; i++) out_kb[i] = -1;
    for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        for (size_t i = 0; i < nkeys; i++) {
            size_t k = strlen(keys[i]);
            if (strncmp(line, keys[i], k) == 0 && line[k] == ':') out_kb[i] = strtoll(line + k + 1, NULL, 10);
        }
    return 0;
}

/* RSS/PSS/USS of /proc/<pid> ("self" or a number); false when neither
 * file can be read (a process that has exited meanwhile). Not `full`: RSS
 * alone from statm (microseconds; smaps_rollup walks every page table,
 * milliseconds per 100 MB), PSS and USS -1. */
static bool memory_of(const char *pid, ts_memory_usage *out, bool full) {
    static const char *const rollup[] = {"Rss", "Pss", "Private_Clean", "Private_Dirty"};
    char path[64];
    int64_t kb[4];
    if (!full) {
        char buf[256];
        long long size, resident;
        snprintf(path, sizeof path, "/proc/%s/statm", pid);
        if (read_small(path, buf, sizeof buf) > 0 && sscanf(buf, "%lld %lld", &size, &resident) == 2) {
            out->rss = resident * sysconf(_SC_PAGESIZE);
            out->pss = out->uss = -1;
            return true;
        }
    }
    snprintf(path, sizeof path, "/proc/%s/smaps_rollup", pid);
    if (read_kb_fields(path, rollup, 4, kb) == 0 && kb[0] >= 0) {
        out->rss = kb[0] * 1024;
        out->pss = kb[1] >= 0 ? kb[1] * 1024 : -1;
        out->uss = kb[2] >= 0 && kb[3] >= 0 ? (kb[2] + kb[3]) * 1024 : -1;
        return true;
    }
    /* Kernels before 4.14 have no smaps_rollup: RSS only, the rest unknown. */
    static const char *const status[] = {"VmRSS"};
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    if (read_kb_fields(path, status, 1, kb) == 0 && kb[0] >= 0) {
        out->rss = kb[0] * 1024;
        out->pss = out->uss = -1;
        return true;
    }
    return false;
}

static ts_status self_memory(const char *fn, ts_memory_usage *out, bool full) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (!memory_of("self", out, full))
        return ts_error(TS_ERR_IO, "%s: cannot read /proc/self/smaps_rollup or /proc/self/status (is /proc mounted?)", fn);
    return TS_OK;
}

ts_status ts_memory_get(ts_memory_usage *out) { return self_memory("ts_memory_get", out, true); }

#define TREE_MAX 1024 /* processes counted at most (this one and its descendants) */

/* Appends the children of every thread of `pid` to pids[*n...]. */
static void add_children(int pid, int *pids, int *n) {
    char path[64], dents[4096], list[4096];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    long got;
    while ((got = syscall(SYS_getdents64, fd, dents, sizeof dents)) > 0) {
        for (long off = 0; off < got;) {
            const struct linux_dirent64 {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (const void *)(dents + off);
            off += d->reclen;
            if (d->name[0] < '0' || d->name[0] > '9') continue;
            snprintf(path, sizeof path, "/proc/%d/task/%.16s/children", pid, d->name);
            if (read_small(path, list, sizeof list) <= 0) continue;
            for (char *p = list, *end; *p && *n < TREE_MAX; p = end) {
                long child = strtol(p, &end, 10);
                if (end == p) break;
                pids[(*n)++] = (int)child;
            }
        }
    }
    close(fd);
}

ts_status ts_memory_get_tree(ts_memory_usage *out, int *processes) { return ts_memory_tree(out, processes, true); }

ts_status ts_memory_tree(ts_memory_usage *out, int *processes, bool full) { return ts_memory_tree_procs(out, processes, full, NULL, 0, NULL); }

/* One process's entry: its pid, command (/proc/PID/comm) and memory. */
static void note_process(ts_process_memory *procs, int cap, int *n, int pid, const ts_memory_usage *u) {
    if (!procs || *n >= cap) return;
    ts_process_memory *p = &procs[(*n)++];
    p->pid = pid;
    p->usage = *u;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    ssize_t k = read_small(path, p->command, sizeof p->command);
    p->command[k > 0 ? (size_t)k : 0] = '\0';
    p->command[strcspn(p->command, "\n")] = '\0';
}

ts_status ts_memory_tree_procs(ts_memory_usage *out, int *processes, bool full, ts_process_memory *procs, int cap, int *n_procs) {
    ts_status st = self_memory("ts_memory_get_tree", out, full);
    if (st) return st;
    int listed = 0;
    note_process(procs, cap, &listed, (int)getpid(), out);
    int pids[TREE_MAX], n = 0;
    add_children((int)getpid(), pids, &n);
    int counted = 1;
    for (int i = 0; i < n; i++) { /* breadth first: each child's children join the list */
        char name[16];
        ts_memory_usage c;
        snprintf(name, sizeof name, "%d", pids[i]);
        if (!memory_of(name, &c, full)) continue; /* exited meanwhile */
        note_process(procs, cap, &listed, pids[i], &c);
        out->rss += c.rss;
        out->pss = out->pss >= 0 && c.pss >= 0 ? out->pss + c.pss : -1;
        out->uss = out->uss >= 0 && c.uss >= 0 ? out->uss + c.uss : -1;
        counted++;
        add_children(pids[i], pids, &n);
    }
    if (processes) *processes = counted;
    if (n_procs) *n_procs = listed;
    return TS_OK;
}
