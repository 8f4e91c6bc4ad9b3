#!/usr/bin/env python3
"""doc_samples.py -- runs the code samples of README.md and docs/*.md, so the
documentation and the behaviour cannot drift apart.

    doc_samples.py --build DIR [--source DIR] [--python-preload LIBS] [--list] [FILE.md ...]

A sample is a fenced block whose language is console, sh or python:
- console: each line starting with `$ ` is a command (a line ending in `\\`
  goes on on the next one); the lines up to the next command are what it
  prints. The command must print the lines the block shows, in order, and
  no others (numbers masked, so timings and losses may differ; a `...` line
  stands for any lines; source lines as in `tools/models.c:42` masked too):
  scripts/readme_samples.py's rule, which regenerates the README's. With no line shown, the command
  must exit 0; with lines, the lines are the check (a sample may show a
  command that fails).
- sh: every line is a command (comments dropped), each must exit 0.
- python: run by Debian's /usr/bin/python3 (NumPy and PyTorch) with the
  package of python/ over the library of the build (LIBS preloaded, for a
  sanitizer build), the samples of a page in one interpreter, in order, so
  a sample may use the names an earlier one defined; must not raise. A
  console block right after it with no `$ ` line is what it prints. A
  sample of `>>> ` lines (`... ` continuing) runs as typed at the prompt,
  and its other lines are what it prints.
Other blocks (text, c, a diagram) are not samples and are only counted.

The samples of one file run in order in one scratch directory holding links
to the build (`build/`), `data/`, `examples/` and `python/`, with the build
directory first on PATH (`tensorscope` is the CLI just built), so a sample
may use the files an earlier sample of its file wrote.

A sample that cannot run here says so on the line before its fence, and is
listed with its reason instead of run:
    <!-- sample: skip REASON -->      needs a GPU, MPI, PyPI, minutes, ...
    <!-- sample: fragment REASON -->  names defined elsewhere (an excerpt)

Prints `ok`, `FAIL` or `skip` per sample with FILE:LINE, then a summary;
exits 1 when a sample failed.
"""
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "scripts"))
from readme_samples import mask, merge  # noqa: E402  (one matching rule for both)

RUN = {"console", "sh", "python"}
MARKER = re.compile(r"^<!--\s*sample:\s*(skip|fragment)\s+(.*?)\s*-->\s*$")
TIMEOUT = 300


def blocks(path):
    """(line, language, body lines, marker or None) per fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2).lower(), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = [l[len(indent):] if l.startswith(indent) else l for l in lines[i + 1:j]]
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = MARKER.match(lines[k].strip()) if k >= 0 else None
        out.append((start + 1, lang, body, (mk.group(1), mk.group(2)) if mk else None))
        i = j + 1
    return out


def commands(body, console):
    """[(command, shown output lines)]: console `$ ` lines, or sh lines."""
    out, cur = [], None
    pending = ""
    for line in body:
        if pending:  # a continued command
            pending += "\n" + line
            if not line.rstrip().endswith("\\"):
                cur[0] = pending
                pending = ""
            continue
        if console and not line.startswith("$ "):
            if cur is not None:
                cur[1].append(line)
            continue
        text = line[2:] if console else line
        if not console and (not text.strip() or text.lstrip().startswith("#")):
            continue
        cur = [text, []]
        out.append(cur)
        if text.rstrip().endswith("\\"):
            pending = text
    return [(c, shown) for c, shown in out]


def run(argv, cwd, env, stdin=None):
    try:
        r = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=TIMEOUT)
        return r.returncode, (r.stdout + r.stderr).rstrip("\n").split("\n") if (r.stdout + r.stderr).strip() else []
    except subprocess.TimeoutExpired:
        return 124, [f"(timed out after {TIMEOUT} s)"]


LOCATION = re.compile(r"(\.(?:c|h|py|onnx)):\d+")  # tools/models.c:42: moves as the source does


# One interpreter per page: its Python samples run in order in one namespace
# (a page may build on its earlier samples), each sample's output (fds 1
# and 2, the library's log lines too) captured alone. A sample of `>>>`
# lines runs as typed at the prompt, its other lines being what it prints.
RUNNER = r"""
import json, os, sys, tempfile, traceback
ns = {"__name__": "__main__"}
out = tempfile.TemporaryFile()
reply = os.fdopen(os.dup(1), "w")
while True:
    header = sys.stdin.readline()
    if not header:
        break
    kind, n = header.split()
    src = sys.stdin.read(int(n))
    out.seek(0)
    out.truncate()
    saved = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1)
    os.dup2(out.fileno(), 2)
    ok = True
    try:
        if kind == "prompt":
            stmts = []
            for line in src.split("\n"):
                if line.startswith(">>> "):
                    stmts.append(line[4:])
                elif line.startswith("... ") and stmts:
                    stmts[-1] += "\n" + line[4:]
            for st in stmts:
                exec(compile(st + "\n", "<sample>", "single"), ns)
        else:
            exec(compile(src, "<sample>", "exec"), ns)
    except SystemExit as e:
        ok = e.code in (None, 0)
    except BaseException:
        traceback.print_exc()
        ok = False
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    out.seek(0)
    reply.write(json.dumps({"ok": ok, "out": out.read().decode("utf-8", "replace")}) + "\n")
    reply.flush()
"""


class PythonSession:
    def __init__(self, cwd, env):
        self.cwd, self.env, self.p = cwd, env, None

    def run(self, code, prompt):
        """(exit status 0 or 1, printed lines); 124 when it ran past TIMEOUT."""
        if self.p is None:
            self.p = subprocess.Popen(["/usr/bin/python3", "-u", "-c", RUNNER], cwd=self.cwd, env=self.env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.p.stdin.write(f"{'prompt' if prompt else 'exec'} {len(code)}\n{code}")
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], TIMEOUT)
        line = self.p.stdout.readline() if ready else ""
        if not line:  # timed out or died: the next sample gets a new interpreter
            self.close()
            return 124, [f"(the interpreter stopped or ran past {TIMEOUT} s)"]
        r = json.loads(line)
        text = r["out"].rstrip("\n")
        return (0 if r["ok"] else 1), text.split("\n") if text.strip() else []

    def close(self):
        if self.p:
            self.p.kill()
            self.p.wait()
            self.p = None


def check_output(shown, printed):
    """None when the output is what the block shows, else what differs."""
    if not [l for l in shown if l.strip()]:
        return None
    shown = [LOCATION.sub(r"\1:#", l) for l in shown]
    printed = [LOCATION.sub(r"\1:#", l) for l in printed]
    merged, missing = merge(shown, printed)
    if merged is None:
        return f"the line {missing.strip()!r} is not printed"
    if [mask(x) for x in merged] != [mask(x) for x in shown]:
        extra = next((x for x in merged if mask(x) not in {mask(y) for y in shown}), "?")
        return f"it prints lines the block does not show (first: {extra.strip()!r}; a `...` line allows any)"
    return None


def main():
    args = sys.argv[1:]
    build = os.path.abspath(args[args.index("--build") + 1]) if "--build" in args else os.path.join(SRC, "build")
    src = os.path.abspath(args[args.index("--source") + 1]) if "--source" in args else SRC
    listing = "--list" in args
    preload = args[args.index("--python-preload") + 1] if "--python-preload" in args else ""
    files = [a for a in args if a.endswith(".md")]
    if not files:
        files = [os.path.join(src, "README.md")] + sorted(
            os.path.join(src, "docs", f) for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))
    env = dict(os.environ, COLUMNS="100", PATH=build + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=os.path.join(src, "python"), TENSORSCOPE_LIBRARY=os.path.join(build, "libtensorscope.so"))
    env.pop("TS_LOG_LEVEL", None)
    counts = {"ok": 0, "FAIL": 0, "skip": 0, "other": 0}
    for path in files:
        rel = os.path.relpath(path, src)
        work = tempfile.mkdtemp(prefix="ts_doc_")
        try:
            for name, target in (("build", build), ("data", os.path.join(src, "data")),
                                 ("examples", os.path.join(src, "examples")), ("python", os.path.join(src, "python"))):
                os.symlink(target, os.path.join(work, name))
            bl = blocks(path)
            session = None
            k = 0
            while k < len(bl):
                line, lang, body, marker = bl[k]
                k += 1
                where = f"{rel}:{line}"
                if lang not in RUN:
                    counts["other"] += 1
                    continue
                # a python block's output: the console block right after it, without a command
                shown_py = None
                if lang == "python" and k < len(bl) and bl[k][1] == "console" and not any(l.startswith("$ ") for l in bl[k][2]):
                    shown_py = bl[k][2]
                    k += 1
                if marker:
                    counts["skip"] += 1
                    print(f"skip {where} ({lang}, {marker[0]}): {marker[1]}")
                    continue
                if listing:
                    print(f"run  {where} ({lang})")
                    continue
                problems = []
                if lang == "python":
                    py_env = env if not preload else dict(env, LD_PRELOAD=preload, ASAN_OPTIONS=(
                        env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":"))
                    if session is None:
                        session = PythonSession(work, py_env)
                    prompt = any(l.startswith(">>> ") for l in body)
                    rc, printed = session.run("\n".join(body) + "\n", prompt)
                    if prompt:  # the lines after each `>>>` statement are what it prints
                        shown_py = [l for l in body if not l.startswith((">>> ", "... "))]
                    if rc != 0:
                        problems.append(f"python exited {rc}")
                    diff = check_output(shown_py or [], printed)
                    if diff:
                        problems.append(diff)
                else:
                    for cmd, shown in commands(body, lang == "console"):
                        rc, printed = run(["bash", "-c", cmd], work, env)
                        diff = check_output(shown, printed)
                        if diff:
                            problems.append(f"`{cmd.strip()}`: {diff}")
                        elif not [l for l in shown if l.strip()] and rc != 0:
                            problems.append(f"`{cmd.strip()}` exited {rc}")
                        if problems:
                            break
                if problems:
                    counts["FAIL"] += 1
                    print(f"FAIL {where} ({lang}): {problems[0]}")
                    for l in printed[-12:]:
                        print(f"     | {l}")
                else:
                    counts["ok"] += 1
                    print(f"ok   {where} ({lang})")
        finally:
            if session is not None:
                session.close()
            shutil.rmtree(work, ignore_errors=True)
    print(f"{counts['ok']} passed, {counts['FAIL']} failed, {counts['skip']} skipped (marked); "
          f"{counts['other']} other blocks (text, c, diagrams) not run")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
