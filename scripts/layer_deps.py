#!/usr/bin/env python3
"""layer_deps.py [--write-doc | --check | --include-folders] BUILD_DIR -- the
structure of src/ as the code draws it.

Arrows between files come from the code itself:
  - a call or data reference: an undefined symbol of one library object
    defined by another, read with `nm` from every object BUILD_DIR's library
    is made of (CUDA's .cu objects included when the build has CUDA);
  - an #include of a header: every quoted include of every source and
    header under src/ (.c, .h, .cu), resolved as the compiler does (the
    including file's folder, then src/). An include of a header whose folder
    holds a .c of the same stem counts as an arrow to that .c (the header
    is its interface; for a header of OWNER, the .c of that stem in its
    owner's folder), else to the header itself.
Each file belongs to a layer: its top folder under src/, except that the
backend table (the files at the top of src/backend/), each backend
(src/backend/cpu/, src/backend/cuda/) and the registry that names them
(src/backend/registry/) are layers of their own, and a file
listed in OWNER belongs to the layer that owns what it declares. ALLOWED is
docs/design.md's flow (section "Layers and the flow of data"); ACCEPTED
names every arrow against it that stays, one pair of files a line, with the
reason. Nothing is accepted by pattern.

Modes:
  (none)             print the layer matrix, every arrow against the flow
                     and every cycle between files of different layers
  --write-doc        write the figures into docs/backend.md's generated block
  --check            exit 1 when docs/backend.md's block is not what
                     --write-doc would write, when a figure is above
                     tests/layer_deps_ceiling.txt, or when an ACCEPTED
                     pair is no longer an arrow (remove it)
  --include-folders  print the folder graph of the includes alone, one
                     "from to" line a pair (tests/test_layer_deps.sh checks
                     it against its own reading)
"""
import collections
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SRC = os.path.join(ROOT, "src")
DOC = os.path.join(ROOT, "docs", "backend.md")
CEILING = os.path.join(ROOT, "tests", "layer_deps_ceiling.txt")
BEGIN = "<!-- begin layer_deps: written by scripts/layer_deps.py --write-doc BUILD_DIR; make test checks it -->"
END = "<!-- end layer_deps -->"

# Which layers a layer may use (docs/design.md#layers-and-the-flow-of-data: data flows one way).
ALLOWED = {
    "core": set(),
    "graph": {"core"},
    "import": {"core", "graph"},
    # the backend table: the contract every backend implements
    "backend": {"core", "graph"},
    # kernels read the graph's vocabulary (ops, shapes, node attributes) and
    # implement the table's contract
    "cpu": {"core", "graph", "backend"},
    "cuda": {"core", "graph", "backend"},
    # the registry: every device by the name a user gives it, the one place
    # that names each backend
    "registry": {"core", "graph", "backend", "cpu", "cuda"},
    # compile plans memory in the arenas a backend allocates
    "compile": {"core", "graph", "backend"},
    "observe": {"core", "graph", "compile", "backend", "registry", "io"},
    "exec": {"core", "graph", "compile", "backend", "observe"},
    # a model's split over ranks works on its program and observers; the
    # executor and observers reach it through the runs' table (ts_run.par)
    "parallel": {"core", "graph", "compile", "backend", "observe"},
    "io": {"core"},
    "data": {"core", "io"},
    "diag": {"core", "graph", "compile", "registry", "observe", "io"},
    "model": {"core", "graph", "import", "compile", "backend", "cpu", "cuda", "registry", "observe", "exec", "parallel", "io",
              "data", "diag"},
}

# Files counted in the layer that owns what they declare, not their folder's.
OWNER = {}

# Arrows accepted against the flow, each pair of files by name with its
# reason (docs/backend.md#layers): ("from.c", "to.c"): "why". A new arrow
# into the same file is not accepted until it is named here. None is.
ACCEPTED = {}


def folder_of(path):
    """src/backend/cpu/x.c -> backend/cpu; src/exec/x.c -> exec"""
    parts = path.split("/")
    if parts[0] == "backend" and len(parts) > 2:
        return "backend/" + parts[1]
    return parts[0]


def layer_of(path):
    if path in OWNER:
        return OWNER[path][0]
    f = folder_of(path)
    return f.split("/")[1] if "/" in f else f


def sources():
    """every .c, .h and .cu under src/, relative to it"""
    out = []
    for ext in ("c", "h", "cu"):
        out += [os.path.relpath(p, SRC) for p in glob.glob(os.path.join(SRC, "**", "*." + ext), recursive=True)]
    return sorted(f for f in out if "/proto/" not in f)


INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def includes(f):
    """the files under src/ that f's quoted includes name, resolved as the
    compiler does: f's folder first, then src/ (others: include/, proto/)"""
    out = []
    text = open(os.path.join(SRC, f), encoding="utf-8", errors="replace").read()
    for name in INCLUDE.findall(text):
        for base in (os.path.dirname(f), ""):
            p = os.path.normpath(os.path.join(base, name))
            if not p.startswith("..") and os.path.isfile(os.path.join(SRC, p)):
                out.append(p)
                break
    return out


def include_folders():
    """(from folder, to folder) for every include between two folders"""
    return {(folder_of(f), folder_of(h)) for f in sources() for h in includes(f) if folder_of(f) != folder_of(h)}


def objects(build):
    """(source, object path) of every object the build's library is made of"""
    objroot = os.path.join(build, "CMakeFiles", "ts_objs.dir")
    make = os.path.join(objroot, "build.make")
    if os.path.exists(make):  # the objects this configuration compiles, no stale ones
        rels = sorted(set(re.findall(r"^CMakeFiles/ts_objs\.dir/(src/\S+)\.o:", open(make).read(), re.M)))
    else:
        rels = sorted(os.path.relpath(o, objroot)[: -len(".o")]
                      for o in glob.glob(os.path.join(objroot, "src", "**", "*.o"), recursive=True))
    out = []
    for r in rels:
        f = r[len("src/"):]
        o = os.path.join(objroot, r + ".o")
        if os.path.exists(os.path.join(SRC, f)) and os.path.exists(o):
            out.append((f, o))
    return out


def measure(build):
    objs = objects(build)
    if not objs:
        sys.exit(f"layer_deps: no library objects under {build}/CMakeFiles/ts_objs.dir (build first)")
    defined, undefined = {}, collections.defaultdict(set)
    for f, o in objs:
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
    refs = collections.Counter()  # (file, file) -> symbols; 0 for an include
    for f, syms in undefined.items():
        for s in syms:
            g = defined.get(s)
            if g and g != f:
                refs[(f, g)] += 1
    via = {}  # (file, file) -> the header an include arrow came through
    for f in sources():
        for h in includes(f):
            # the interface's code: the .c of the same stem in the header's
            # folder, or for a header OWNER gives away, in its owner's
            stem = os.path.splitext(h)[0]
            if h in OWNER:
                stem = os.path.join(OWNER[h][0], os.path.basename(stem))
            target = h
            for ext in (".c", ".cu"):
                if os.path.exists(os.path.join(SRC, stem + ext)):
                    target = stem + ext
            if target != f and layer_of(f) != layer_of(target):
                refs[(f, target)] += 0
                via.setdefault((f, target), h)
    edges = collections.defaultdict(set)
    for f, g in refs:
        edges[f].add(g)
    layers = sorted({layer_of(f) for p in refs for f in p})
    matrix = collections.Counter()
    against = collections.defaultdict(list)  # (layer, layer) -> [(f, g, n, reason)]
    for (f, g), n in sorted(refs.items()):
        a, b = layer_of(f), layer_of(g)
        if a == b:
            continue
        matrix[(a, b)] += max(n, 1)
        if b not in ALLOWED[a]:
            against[(a, b)].append((f, g, n, ACCEPTED.get((f, g))))
    cycles = [c for c in sccs(edges) if len({layer_of(f) for f in c}) > 1]
    built = {f for f, _ in objs}
    arrows = {(f, g) for v in against.values() for f, g, _, _ in v}
    return {
        "objects": len(objs),
        "cuda_objects": sum(1 for f, _ in objs if f.endswith(".cu")),
        "layers": layers,
        "matrix": matrix,
        "against": against,
        "layer_pairs": sum(1 for v in against.values() if any(r is None for *_, r in v)),
        "file_pairs": sum(1 for v in against.values() for x in v if x[3] is None),
        "accepted": sum(1 for v in against.values() for x in v if x[3]),
        # judged only where this build compiles both files (a feature left
        # out of a build takes its arrows with it)
        "stale": sorted((f, g) for f, g in ACCEPTED if (f, g) not in arrows and
                        all(x.endswith(".h") or x in built for x in (f, g))),
        "cycles": sorted(sorted(c) for c in cycles),
        "via": via,
    }


def sccs(edges):
    """Tarjan's strongly connected components of the file graph"""
    index, low, stack, on, out = {}, {}, [], set(), []
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
            out.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def report(m):
    layers = m["layers"]
    print(f"layers: {', '.join(layers)}  ({m['objects']} library objects, {m['cuda_objects']} of them CUDA's)")
    tied = {frozenset((a, b)) for (a, b), n in m["matrix"].items() if n}
    print(f"pairs of layers tied by an arrow: {len(tied)} of {len(layers) * (len(layers) - 1) // 2}")
    print("\nreferences from row layer to column layer:")
    print(" " * 9 + "".join(f"{b[:7]:>8}" for b in layers))
    for a in layers:
        print(f"{a:>8} " + "".join(f"{(m['matrix'][(a, b)] or '.'):>8}" for b in layers))
    print(f"\narrows against the flow: {m['layer_pairs']} layer pairs, {m['file_pairs']} file pairs"
          f" (+{m['accepted']} accepted)")
    for (a, b), items in sorted(m["against"].items()):
        if any(r is None for *_, r in items):
            print(f"  {a} -> {b}:")
        for f, g, n, reason in items:
            if reason is None:
                print(f"    {f} -> {g} ({how(m, f, g, n)})")
    print(f"\ncycles between files of different layers: {len(m['cycles'])}")
    for c in m["cycles"]:
        print(f"  {len(c)} files over {', '.join(sorted({layer_of(f) for f in c}))}: {' '.join(c)}")
    for f, g in m["stale"]:
        print(f"ACCEPTED names {f} -> {g}, which is not an arrow against the flow (any more): remove it")


def how(m, f, g, n):
    """what an arrow is made of: symbols, or the header an include names"""
    if n:
        return f"{n} symbol" + ("s" if n > 1 else "")
    h = m["via"].get((f, g), g)
    return f"#include \"{h}\""


def figures(m):
    return {"layer_pairs": m["layer_pairs"], "file_pairs": m["file_pairs"], "accepted": m["accepted"],
            "cycles": len(m["cycles"])}


def block(m):
    """docs/backend.md's generated block"""
    fig = figures(m)
    out = [BEGIN, "",
           "Measured over every object of a build with CUDA and the includes of every source and header "
           "under `src/`:", "",
           "| | now |", "|---|---|",
           f"| layer pairs with an arrow against the flow | {fig['layer_pairs']} |",
           f"| file pairs with an arrow against the flow | {fig['file_pairs']} |",
           f"| arrows against the flow accepted by name | {fig['accepted']} |",
           f"| cycles between files of different layers | {fig['cycles']} |", ""]
    if OWNER:
        out += ["Counted in the layer that owns what they declare:", ""]
        out += [f"- `{f}`: the {lay} layer's; it {why}." for f, (lay, why) in sorted(OWNER.items())] + [""]
    if fig["file_pairs"]:
        out += ["Arrows against the flow:", ""]
        for (a, b), items in sorted(m["against"].items()):
            bad = [(f, g, n) for f, g, n, r in items if r is None]
            if bad:
                out.append(f"- {a} -> {b}: " + ", ".join(f"`{f}` -> `{g}` ({how(m, f, g, n)})" for f, g, n in bad))
        out.append("")
    if m["cycles"]:
        out += ["Cycles between files of different layers:", ""]
        out += [f"- {', '.join(sorted({layer_of(f) for f in c}))}: " + ", ".join(f"`{f}`" for f in c)
                for c in m["cycles"]] + [""]
    if fig["accepted"]:
        out += ["Accepted, each by name:", ""]
        for (a, b), items in sorted(m["against"].items()):
            out += [f"- `{f}` -> `{g}`: {r}" for f, g, n, r in items if r]
        out.append("")
    return "\n".join(out + [END])


def doc_parts():
    text = open(DOC, encoding="utf-8").read()
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        sys.exit(f"layer_deps: {DOC} has no generated block ({BEGIN} ... {END}): put one where the figures go")
    return text[:i], text[i:j + len(END)], text[j + len(END):]


def read_ceiling():
    out = {}
    for line in open(CEILING, encoding="utf-8"):
        line = line.split("#")[0].split()
        if len(line) == 2:
            out[line[0]] = int(line[1])
    return out


def check(m):
    fails = []
    pre, old, post = doc_parts()
    if m["cuda_objects"] == 0:
        print("skip: this build has no CUDA objects; docs/backend.md's figures are of a build with CUDA")
    elif old != block(m):
        fails.append("docs/backend.md's generated block is stale: run scripts/layer_deps.py --write-doc BUILD_DIR")
    ceiling = read_ceiling()
    for k, v in figures(m).items():
        if k not in ceiling:
            fails.append(f"{CEILING} has no '{k}' line")
        elif v > ceiling[k]:
            fails.append(f"{k}: {v}, above the ceiling of {ceiling[k]} ({os.path.relpath(CEILING, ROOT)}); "
                         "remove the new arrows (the ceiling only comes down)")
        elif v < ceiling[k] and m["cuda_objects"]:
            print(f"note: {k} is {v}, below the ceiling of {ceiling[k]}: lower it in {os.path.relpath(CEILING, ROOT)}")
    for f, g in m["stale"]:
        fails.append(f"ACCEPTED names {f} -> {g}, which is not an arrow against the flow: remove it")
    for f in fails:
        print("FAIL " + f)
    if fails:
        return 1
    return 77 if m["cuda_objects"] == 0 else 0


def main():
    args = sys.argv[1:]
    mode = args.pop(0) if args and args[0].startswith("--") else None
    if len(args) != 1 or mode not in (None, "--write-doc", "--check", "--include-folders"):
        sys.exit(__doc__)
    if mode == "--include-folders":  # the includes alone: no object is read
        for a, b in sorted(include_folders()):
            print(a, b)
        return
    m = measure(args[0])
    if mode == "--write-doc":
        if m["cuda_objects"] == 0:
            sys.exit("layer_deps: the figures are of every object, CUDA's included: use a build with CUDA")
        pre, _, post = doc_parts()
        open(DOC, "w", encoding="utf-8").write(pre + block(m) + post)
        print(f"wrote {os.path.relpath(DOC, ROOT)}'s figures: {figures(m)}")
    elif mode == "--check":
        report(m)
        print()
        sys.exit(check(m))
    else:
        report(m)


if __name__ == "__main__":
    main()
