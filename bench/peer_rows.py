"""peer_rows.py -- what bench/onnx_resnet.py and bench/onnx_models.py share:
each side's steps timed (TS_BENCH_CLOCK=cpu: the process's CPU time, as
bench_common.h's now_s, for a machine other processes load), the sides
interleaved round by round, and the rows bench/run.sh reads (each side's
median ms per step and spread, the peer's ratio to tensorscope)."""
import os
import time

CLOCK = time.process_time if os.environ.get("TS_BENCH_CLOCK") == "cpu" else time.perf_counter


def timed(fn, steps):
    t0 = CLOCK()
    for _ in range(steps):
        fn()
    return (CLOCK() - t0) * 1000.0 / steps


def compare(sides, batch, threads, warmup, steps, reps):
    """sides: {"tensorscope": step, PEER: step}; prints a row per side and
    the ratio PEER/tensorscope (median and the rounds' range)."""
    names = list(sides)
    for n in names:
        timed(sides[n], warmup)
    ms = {n: [] for n in names}
    for r in range(reps):
        for i in range(len(names)):
            n = names[(i + r) % len(names)]
            ms[n].append(timed(sides[n], steps))
    for n in names:
        v = sorted(ms[n])
        med = v[len(v) // 2]
        print(f"{n} batch={batch} threads={threads} steps={steps} ms_per_step={med:.3f} "
              f"samples_per_s={batch * 1000.0 / med:.1f} spread_ms={v[0]:.3f}..{v[-1]:.3f}")
    peer = next(n for n in names if n != "tensorscope")
    rounds = sorted(p / t for p, t in zip(ms[peer], ms["tensorscope"]))
    med = sorted(ms[peer])[reps // 2] / sorted(ms["tensorscope"])[reps // 2]
    print(f"ratio {peer}/tensorscope median={med:.3f} rounds={rounds[0]:.3f}..{rounds[-1]:.3f}")
