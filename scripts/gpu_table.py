#!/usr/bin/python3
"""The GPU benchmark table from gpu-check.sh's logs: per row tensorscope's
ms/step plain and observed, PyTorch's eager, CUDA-graph and hooked ms/step,
the ratios (speed-up over PyTorch eager; observation overheads), and what
the observed step's summaries read.

    python3 scripts/gpu_table.py LOGDIR
"""
import os
import re
import sys


def fields(path, prefix):
    if not os.path.exists(path):
        return None
    for line in open(path, errors="replace"):
        if line.startswith(prefix + " "):
            return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    return None


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def main():
    logs = sys.argv[1]
    rows = sorted({m.group(1) for f in os.listdir(logs) for m in [re.match(r"bench-ts-(\w+)\.log$", f)] if m},
                  key=["mlp32", "mlp1000", "lenet64", "gpt128", "gpt2", "gpt2_tf32"].index)
    print("| row | tensorscope ms/step | observed (all, stats) | overhead | call by call (no CUDA graph) | PyTorch eager | PyTorch CUDA graph | PyTorch hooks overhead | speed-up vs eager | vs CUDA graph | peak MiB (tensorscope / PyTorch) | observed step's summaries read, MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = fields(os.path.join(logs, "bench-ts-%s.log" % r), "tensorscope") or {}
        p = fields(os.path.join(logs, "bench-torch-%s.log" % r), "torch") or {}
        ts, ob, e, g = num(t.get("ms_per_step")), num(t.get("observed_ms_per_step")), num(p.get("eager_ms")), num(p.get("graph_ms"))
        cb = num(t.get("call_by_call_ms_per_step"))
        def f(x, fmt="%.3f"):
            return fmt % x if x is not None else "–"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |" % (
            r, f(ts), f(ob), (t.get("overhead_pct", "–") + "%") if t else "–", f(cb), f(e), f(g),
            (p.get("hooks_overhead_pct", "–") + "%") if p else "–",
            f(e / ts, "%.2fx") if e and ts else "–", f(g / ts, "%.2fx") if g and ts else "–",
            f(num(t.get("peak_mb")), "%.0f"), f(num(p.get("peak_mb")), "%.0f"), f(num(t.get("summary_mb_per_step")), "%.0f")))


if __name__ == "__main__":
    main()
