#!/usr/bin/env python3
"""step_walk.py BUILD_DIR [FUNCTION] -- the walk of a training step through
the code, as the compiler left it: every library function FUNCTION
(default ts_model_run, one run of a model) reaches, read from the
disassembly of BUILD_DIR's library objects (`objdump -dr`).

A function reaches the functions it calls and those whose address it
takes (an observer registered, a callback handed on); a call through a
table (the backend's kernels, the op chain's observers) is not followed,
the walk sees where the table is filled, not where it is called. Each
function is one stay, however often it is reached. A climb is a call or
an address taken from a function of one layer to one of a layer it may
not use (scripts/layer_deps.py's ALLOWED, docs/design.md's flow): the walk
goes back up the layers. Prints the stays by layer, the files, and every
climb by pair of files.
"""
import collections
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layer_deps  # noqa: E402  (the layers, their flow and the build's objects)

HEAD = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
RELOC = re.compile(r"R_X86_64_\w+\s+([A-Za-z_.$][\w.$]*)")
DIRECT = re.compile(r"\b(?:call|jmp)\s+[0-9a-f]+ <([^>+]+)>")


def base(name):
    """foo.cold, foo.part.0, foo.isra.0 -> foo (pieces GCC split off foo)"""
    return name.split(".")[0]


def read(objs):
    """functions: (file, name) -> set of (file, name) it reaches"""
    defined = {}  # global name -> file
    local = collections.defaultdict(set)  # file -> names it defines
    for f, o in objs:
        out = subprocess.run(["nm", "-P", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) >= 2 and p[1] in "Tt":
                local[f].add(base(p[0]))
                if p[1] == "T":
                    defined.setdefault(base(p[0]), f)
    reach = collections.defaultdict(set)
    for f, o in objs:
        out = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", o], capture_output=True, text=True, check=True).stdout
        fn = None
        for line in out.splitlines():
            h = HEAD.match(line)
            if h:
                fn = (f, base(h.group(1)))
                continue
            if fn is None:
                continue
            for sym in RELOC.findall(line) + DIRECT.findall(line):
                s = base(sym)
                g = f if s in local[f] else defined.get(s)
                if g and (g, s) != fn:
                    reach[fn].add((g, s))
    return reach, defined


def main():
    args = sys.argv[1:]
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    root = args[1] if len(args) == 2 else "ts_model_run"
    objs = layer_deps.objects(args[0])
    if not objs:
        sys.exit(f"step_walk: no library objects under {args[0]} (build first)")
    reach, defined = read(objs)
    if root not in defined:
        sys.exit(f"step_walk: no library function named {root}")
    start = (defined[root], root)
    seen, order, stack = {start}, [], [start]
    while stack:  # depth first, each function once
        fn = stack.pop()
        order.append(fn)
        for g in sorted(reach.get(fn, ()), reverse=True):
            if g not in seen:
                seen.add(g)
                stack.append(g)
    climbs = collections.Counter()
    for fn in order:
        a = layer_deps.layer_of(fn[0])
        for g in reach.get(fn, ()):
            b = layer_deps.layer_of(g[0])
            if a != b and b not in layer_deps.ALLOWED[a]:
                climbs[(fn[0], g[0])] += 1
    files = collections.Counter(f for f, _ in order)
    layers = collections.Counter(layer_deps.layer_of(f) for f, _ in order)
    print(f"walk of {root}: {len(order)} stays in {len(files)} files, {sum(climbs.values())} climbs back up")
    print("stays by layer: " + ", ".join(f"{lay} {n}" for lay, n in layers.most_common()))
    for (f, g), n in sorted(climbs.items()):
        print(f"  climb {f} -> {g}: {n}")


if __name__ == "__main__":
    main()
