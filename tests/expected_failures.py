"""A test's committed list of known failures (`name  reason` lines, sorted,
under a header), as the ONNX conformance and real-model tests keep them:
the command-line flags that run a subset or rewrite the list, and the
verdict, which fails on a failure missing from the list, on a listed name
that passes and on a listed name that is no item any more."""
import argparse
import os


def parser(doc, expected_file, items):
    """An ArgumentParser with --source, --write-expected and --only (a
    regex over the `items`)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--source", default=os.environ.get("TS_SOURCE_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."))
    p.add_argument("--write-expected", action="store_true",
                   help=f"rewrite {expected_file} from today's failures")
    p.add_argument("--only", help=f"run only the {items} whose name matches this regex")
    return p


def check_args(p, args):
    if args.write_expected and args.only:
        p.error("--write-expected writes the whole list: run it without --only")


def read(path):
    """{name: reason} of the list at path (empty when there is none)."""
    expected = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip() or line.startswith("#"):
                    continue
                name, _, reason = line.strip().partition(" ")
                expected[name] = reason.strip()
    return expected


def write(path, header, results, reason_of):
    """The list of every failing name of {name: None (pass) or why}, each
    with reason_of(why), written whole or not at all."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(header)
        for name in sorted(n for n, why in results.items() if why is not None):
            f.write(f"{name}  {reason_of(results[name])}\n")
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")


def verdict(results, expected, reason_of, expected_file, items, regenerate, subset):
    """Prints what differs from the list; the number of names that fail the
    test (unexpected failures, listed names that pass, stale names).
    `subset`: only some items ran, so listed names not run are not stale."""
    unexpected = [n for n, w in results.items() if w is not None and n not in expected]
    fixed = [n for n, w in results.items() if w is None and n in expected]
    stale = [] if subset else sorted(set(expected) - set(results))
    for n, w in results.items():
        if w is not None and n in expected and reason_of(w) != expected[n]:
            print(f"note {n} fails for another reason now: {reason_of(w)} (listed: {expected[n]})")
    for n in unexpected:
        print(f"FAIL {n}: {results[n]}")
    for n in fixed:
        print(f"FAIL {n} now passes: remove it from {expected_file}")
    for n in stale:
        print(f"FAIL {n} is listed in {expected_file} but is no {items} any more: remove it")
    if unexpected:
        print(f"{len(unexpected)} failing {items}(s) not in {expected_file}: fix them, or (a known "
              f"gap) list them with {regenerate} --write-expected")
    return len(unexpected) + len(fixed) + len(stale)
