#!/usr/bin/env python3
"""Regenerates (or checks) the README's console samples from real output.

    scripts/readme_samples.py [--check] [--build DIR]

Every ```console block of README.md whose first line is
`$ ./build/tensorscope ...` is run (in a temporary directory, with the CLI
of DIR, default build/), and its lines are replaced by what the command
prints (stdout, then stderr). A `...` line in the README stands for any
lines the sample leaves out and is kept; a line the command now prints
where the README has none (and no `...`) is added. Lines are matched with
numbers masked, so timings and losses are refreshed and wording is checked.
--check changes nothing and exits 1 when a sample no longer matches (a line
the README shows that the command does not print), naming the block.
"""
import os
import re
import subprocess
import sys
import tempfile

NUM = re.compile(r"(?<![A-Za-z_:.\d])[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")  # numbers, not digits in names


DURATION = re.compile(r"\b\d[\dmsu.]*s\b")  # 06m09s401ms746.001us
SIZE = re.compile(r"\b\d+(\.\d+)?[KMGT]?B\b")  # 888.22KB, 1.43MB: a byte rate's unit follows the machine's speed
HASH = re.compile(r"(?<![\w.])[0-9a-f]{16}(?![\w.])")  # a 64-bit hash of computed bytes: a product's last bits follow the CPU's BLAS kernel


def mask(line):
    return re.sub(r"\s+", " ", NUM.sub("#", SIZE.sub("#", DURATION.sub("#", HASH.sub("#", line.strip())))))


def merge(template, actual):
    """The block's new lines, or None when a README line is not printed."""
    out, a = [], 0
    for i, t in enumerate(template):
        if t.strip() == "...":
            out.append(t)
            # skip actual lines up to the next literal template line
            nxt = next((x for x in template[i + 1:] if x.strip() != "..."), None)
            while a < len(actual) and (nxt is None or mask(actual[a]) != mask(nxt)):
                a += 1
            continue
        while a < len(actual) and mask(actual[a]) != mask(t):
            out.append(actual[a])  # printed now, not in the README: added
            a += 1
        if a == len(actual):
            return None, t
        out.append(actual[a])
        a += 1
    if not template or template[-1].strip() != "...":
        out.extend(actual[a:])
    return out, None


def main():
    check = "--check" in sys.argv
    build = sys.argv[sys.argv.index("--build") + 1] if "--build" in sys.argv else "build"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cli = os.path.abspath(os.path.join(root, build, "tensorscope")) if not os.path.isabs(build) else os.path.join(build, "tensorscope")
    path = os.path.join(root, "README.md")
    lines = open(path).read().split("\n")
    new, i, bad, blocks = [], 0, 0, 0
    while i < len(lines):
        new.append(lines[i])
        if lines[i].strip() != "```console" or i + 1 >= len(lines) or not lines[i + 1].startswith("$ ./build/tensorscope "):
            i += 1
            continue
        cmd = lines[i + 1][2:]
        j = i + 2
        while lines[j].strip() != "```":
            j += 1
        template = lines[i + 2:j]
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["sh", "-c", cmd.replace("./build/tensorscope", cli, 1)]
            r = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, COLUMNS="100"))
        actual = (r.stdout + r.stderr).rstrip("\n").split("\n")
        merged, missing = merge(template, actual)
        blocks += 1
        if merged is None:
            bad += 1
            print(f"README.md:{i + 2}: `{cmd}` no longer prints:\n    {missing}", file=sys.stderr)
            merged = template if check else actual  # regenerated whole: elide by hand again if it is long
        elif check and merged != template and [mask(x) for x in merged] != [mask(x) for x in template]:
            bad += 1
            print(f"README.md:{i + 2}: `{cmd}` prints lines the README does not show; run scripts/readme_samples.py", file=sys.stderr)
        new.append(lines[i + 1])
        new.extend(merged)
        i = j
    if not check:
        open(path, "w").write("\n".join(new))
    print(f"{blocks} README samples {'checked' if check else 'regenerated'}, {bad} out of date")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
