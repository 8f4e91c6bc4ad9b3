#!/usr/bin/env python3
"""layer_deps.py BUILD_DIR -- the structure of src/ as the code draws it.

Edges between source files come from the code itself: a call or data
reference (an undefined symbol of one object file defined by another, read
with `nm` from BUILD_DIR's library objects) and an #include of a header of
another layer. Files are grouped into the layers of docs/design.md (section "Layers and the
flow of data"); the table ALLOWED below is that section's flow. Prints the layer-to-layer
matrix (references per pair), every arrow against the flow, and every cycle
between files of different layers (strongly connected components of the
file graph that span two or more layers). Exit status is always 0: this is
a measurement, not a gate.
"""
import collections
import glob
import os
import re
import subprocess
import sys

# Which layers a layer may use (docs/design.md#layers-and-the-flow-of-data: data flows one way).
ALLOWED = {
    "core": set(),
    "graph": {"core"},
    "import": {"core", "graph"},
    # compile plans memory in the arenas a backend allocates
    "compile": {"core", "graph", "backend"},
    # kernels read the graph's vocabulary: ops, shapes, node attributes
    "backend": {"core", "graph"},
    "observe": {"core", "graph", "compile", "backend", "io"},
    "exec": {"core", "graph", "compile", "backend", "observe"},
    # a model's split over ranks works on its program and observers; the
    # executor and observers reach it through the model's table (m->par)
    "dist": {"core", "graph", "compile", "backend", "observe"},
    "io": {"core"},
    "data": {"core", "io"},
    "diag": {"core", "graph", "compile", "observe", "io"},
    "model": {"core", "graph", "import", "compile", "backend", "observe", "exec", "dist", "io", "data", "diag"},
}
# Arrows accepted against the flow, with the reason (docs/backend.md#layers).
ACCEPTED = {
    ("*", "diag/metrics.c"): "metrics counters are bumped from every layer",
    ("*", "diag/hooks.c"): "the crash handler's current-op note is set from every layer",
    ("*", "diag/crash.c"): "the crash handler's current-op note is set from every layer",
    ("diag/hooks.c", "dist/mpi.c"): "rank 0 alone writes the graph and metrics files: the job's rank",
    ("*", "diag/trace.c"): "the trace recorder takes slices from every layer, as the metrics take counts (a sink, nothing read back)",
    ("exec/exec.c", "diag/memwatch.c"): "the micro-batch trace line (--log-verbosity 5) shows the memory watcher's latest sample",
    ("exec/exec.c", "diag/memory.c"): "the header of the memory watcher's latest-sample call (above)",
    ("graph/options.c", "io/atomic_file.c"): "ts_options_set_trace says at once that the path cannot be written, with the writer's own open",
}


def layer_of(path):
    return path.split("/")[0]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    objroot = os.path.join(build, "CMakeFiles", "ts_objs.dir", "src")
    # objects of sources that no longer exist (moved or removed) are stale
    objs = sorted(o for o in glob.glob(os.path.join(objroot, "**", "*.c.o"), recursive=True)
                  if os.path.exists(os.path.join(src, os.path.relpath(o, objroot)[: -len(".o")])))
    if not objs:
        sys.exit(f"layer_deps: no library objects under {objroot} (build first)")
    defined, undefined = {}, collections.defaultdict(set)
    for o in objs:
        f = os.path.relpath(o, objroot)[: -len(".o")]
        out = subprocess.run(["nm", "-P", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            sym, kind = parts[0], parts[1]
            if kind == "U":
                undefined[f].add(sym)
            elif kind in "TDBRCVW":
                defined.setdefault(sym, f)
    edges = collections.defaultdict(set)  # file -> {file}; weights in refs
    refs = collections.Counter()
    for f, syms in undefined.items():
        for s in syms:
            g = defined.get(s)
            if g and g != f:
                edges[f].add(g)
                refs[(f, g)] += 1
    # #include "layer/x.h" of another layer's header: an edge to that layer's
    # file of the same stem when there is one, else to the header itself
    inc = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_]+)\.h"', re.M)
    for f in list(undefined) + [os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "**", "*.h"), recursive=True)]:
        path = os.path.join(src, f)
        if not os.path.exists(path):
            continue
        for lay, stem in inc.findall(open(path, encoding="utf-8", errors="replace").read()):
            if lay != layer_of(f):
                target = f"{lay}/{stem}.c" if os.path.exists(os.path.join(src, lay, stem + ".c")) else f"{lay}/{stem}.h"
                edges[f].add(target)
                refs[(f, target)] += 0
    layers = sorted({layer_of(f) for f in list(edges) + [g for v in edges.values() for g in v]})
    matrix = collections.Counter()
    against = collections.defaultdict(list)
    for (f, g), n in refs.items():
        a, b = layer_of(f), layer_of(g)
        if a == b:
            continue
        matrix[(a, b)] += max(n, 1)
        if b not in ALLOWED.get(a, set()):
            reason = ACCEPTED.get((f, g)) or ACCEPTED.get(("*", g))
            against[(a, b)].append((f, g, n, reason))
    print(f"layers: {', '.join(layers)}  ({len(objs)} library objects)")
    pairs = [(a, b) for a in layers for b in layers if a != b]
    tied = [p for p in pairs if matrix[p]]
    print(f"pairs of layers tied by an arrow: {len({frozenset(p) for p in tied})} of {len(layers) * (len(layers) - 1) // 2}")
    print("\nreferences from row layer to column layer:")
    print(" " * 9 + "".join(f"{b[:7]:>8}" for b in layers))
    for a in layers:
        print(f"{a:>8} " + "".join(f"{(matrix[(a, b)] or '.'):>8}" for b in layers))
    bad = {k: v for k, v in against.items() if any(r is None for *_, r in v)}
    print(f"\narrows against the flow: {len(bad)} layer pairs, "
          f"{sum(1 for v in bad.values() for x in v if x[3] is None)} file pairs"
          f" (+{sum(1 for v in against.values() for x in v if x[3])} accepted)")
    for (a, b), items in sorted(bad.items()):
        print(f"  {a} -> {b}:")
        for f, g, n, reason in sorted(items):
            if reason is None:
                print(f"    {f} -> {g}" + (f" ({n} symbols)" if n else " (#include)"))
    # cycles: Tarjan's SCCs over files, reported when they span layers
    index, low, stack, on, sccs = {}, {}, [], set(), []
    nodes = sorted(set(edges) | {g for v in edges.values() for g in v})
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    cross = [c for c in sccs if len({layer_of(f) for f in c}) > 1]
    print(f"\ncycles between files of different layers: {len(cross)}")
    for c in cross:
        print(f"  {len(c)} files over {', '.join(sorted({layer_of(f) for f in c}))}: {' '.join(sorted(c))}")


if __name__ == "__main__":
    main()
