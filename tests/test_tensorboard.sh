#!/bin/bash
# test_tensorboard.sh -- the event files of ts_tb_* read by TensorBoard itself.
#
# Installs a pinned TensorBoard into a venv under $TS_BUILD_DIR/tb-venv (made
# once, reused while the pins match), has test_tb_writer write its known run
# (see tests/test_tb_writer.c for the formulas), then checks it with
# TensorBoard's record reader (both CRCs), its classic EventAccumulator
# (keeping every event) and the plugin accumulator the web UI uses.
# Needs PyPI the first time: without it the test fails, it does not skip.
# needs: tensorboard
set -euo pipefail

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
WRITER=${TS_TB_WRITER:-$BUILD/test_tb_writer}

fail() { echo "FAIL $*"; exit 1; }

if [ ! -x "$WRITER" ]; then
    fail "test program $WRITER is missing: build the tests first (cmake --build $BUILD)"
fi

. "$(dirname "$0")/support/tb_venv.sh"
tb_venv_ensure

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ts_tensorboard.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

OUT=$("$WRITER" --write "$TMP/run") || fail "$WRITER --write $TMP/run: $OUT"
EVENT_FILE=${OUT#EVENT_FILE }
[ -f "$EVENT_FILE" ] || fail "the writer did not report an event file (said: $OUT)"
echo "ok   test_tb_writer wrote $EVENT_FILE"

"$VENV/bin/python" - "$EVENT_FILE" <<'PY'
import math, os, re, socket, sys, warnings

warnings.simplefilter("ignore")
import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors as tf_errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow as tf_records
from tensorboard.util import tensor_util

path = sys.argv[1]
failures = 0


def check(ok, msg):
    global failures
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        failures += 1
    return ok


# The known run of tests/test_tb_writer.c
N_SCALARS, N_HISTOS, N_SAMPLE = 25, 3, 1000
TEXT = "**tensorscope** run notes: \u00fcnicode \u2713\nsecond line"


def loss_at(s):
    return float(np.float32(2.0 * math.exp(-0.1 * s) + 0.01 * s))


def sample(s):
    return np.array([(s + 1) * (i - 500) * 0.01 for i in range(N_SAMPLE)], dtype=np.float32)


def default_limits():
    """TensorFlow's InitDefaultBucketsInner."""
    pos, v = [], 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    dmax = sys.float_info.max
    return [-dmax] + [-x for x in reversed(pos)] + [0.0] + pos + [dmax]


name = os.path.basename(path)
check(re.fullmatch(r"events\.out\.tfevents\.\d+\." + re.escape(socket.gethostname()), name)
      is not None, f"file name {name} is events.out.tfevents.<secs>.<host>")

# 1. TensorBoard's record reader: raises DataLossError on either CRC.
reader = tf_records.PyRecordReader_New(path, 0, None, None)
records = []
try:
    while True:
        reader.GetNext()
        records.append(reader.record())
except tf_errors.OutOfRangeError:
    pass
except tf_errors.DataLossError as e:
    check(False, f"TensorBoard's record reader: {e}")
n_expected = 1 + N_SCALARS + N_HISTOS + 1
check(len(records) == n_expected,
      f"TensorBoard's reader reads {len(records)} records, CRCs checked (want {n_expected})")
first = event_pb2.Event.FromString(records[0]) if records else event_pb2.Event()
check(first.file_version == "brain.Event:2", f"first record: file_version {first.file_version!r}")

# 2. The classic EventAccumulator, keeping every event.
acc = ea.EventAccumulator(path, size_guidance={
    ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.COMPRESSED_HISTOGRAMS: 0, ea.TENSORS: 0,
    ea.IMAGES: 0, ea.AUDIO: 0})
acc.Reload()
tags = acc.Tags()
check(acc.file_version == 2.0, f"EventAccumulator: file version {acc.file_version}")
check(tags["scalars"] == ["loss"] and tags["histograms"] == ["weights"]
      and tags["tensors"] == ["notes"],
      f"EventAccumulator tags: scalars {tags['scalars']}, histograms {tags['histograms']}, "
      f"tensors {tags['tensors']}")

scalars = acc.Scalars("loss")
check([e.step for e in scalars] == list(range(N_SCALARS)),
      f"{len(scalars)} scalars 'loss' at steps 0..{N_SCALARS - 1}")
bad = [(e.step, e.value) for e in scalars if e.value != loss_at(e.step)]
check(not bad, f"scalar values are 2 exp(-0.1 s) + 0.01 s as float32 (mismatches: {bad[:3]})")
walls = [e.wall_time for e in scalars]
check(walls == sorted(walls) and abs(walls[0] - first.wall_time) < 60,
      "scalar wall times are increasing and near the file's start")

limits = default_limits()
limit_set = set(limits)
histos = acc.Histograms("weights")
check([e.step for e in histos] == list(range(N_HISTOS)),
      f"{len(histos)} histograms 'weights' at steps 0..{N_HISTOS - 1}")
for e in histos:
    s, h, x = e.step, e.histogram_value, sample(e.step)
    xd = x.astype(np.float64)
    check(h.min == float(x.min()) and h.max == float(x.max()) and h.num == N_SAMPLE,
          f"histogram {s}: min {h.min} max {h.max} num {h.num} "
          f"(want {x.min()} {x.max()} {N_SAMPLE})")
    check(math.isclose(h.sum, xd.sum(), rel_tol=1e-9, abs_tol=1e-9)
          and math.isclose(h.sum_squares, (xd * xd).sum(), rel_tol=1e-9),
          f"histogram {s}: sum {h.sum:.6g} sum_squares {h.sum_squares:.6g} "
          f"(want {xd.sum():.6g} {(xd * xd).sum():.6g})")
    lim, cnt = list(h.bucket_limit), list(h.bucket)
    check(len(lim) == len(cnt) and all(a < b for a, b in zip(lim, lim[1:]))
          and all(l in limit_set for l in lim),
          f"histogram {s}: {len(lim)} increasing limits, all from TensorFlow's default buckets")
    check(lim and lim[-1] == limits[-1],
          f"histogram {s}: the last limit is DBL_MAX, so the buckets cover every value "
          f"(got {lim[-1] if lim else None})")
    # bucket j holds [limit j-1, limit j): TensorFlow's upper_bound rule
    lo, wrong = -math.inf, []
    for j, (hi, c) in enumerate(zip(lim, cnt)):
        want = int(np.count_nonzero((xd >= lo) & (xd < hi)))
        if c != want:
            wrong.append((j, hi, c, want))
        lo = hi
    check(sum(cnt) == N_SAMPLE and not wrong,
          f"histogram {s}: bucket counts total {sum(cnt):g} and match the sample "
          f"(wrong: {wrong[:3]})")

compressed = acc.CompressedHistograms("weights")
ok = len(compressed) == N_HISTOS
for e in compressed:
    v = {bp: val for bp, val in e.compressed_histogram_values}
    s = e.step
    ok = ok and v[0] == float(sample(s).min()) and v[10000] == float(sample(s).max()) \
        and abs(v[5000]) <= 0.02 * (s + 1)
check(ok, "compressed histograms (TensorBoard's own interpolation): min, max and a median "
          "near 0")

texts = acc.Tensors("notes")
check(len(texts) == 1 and texts[0].step == 3, f"{len(texts)} text 'notes' at step 3")
if texts:
    tp = texts[0].tensor_proto
    arr = tensor_util.make_ndarray(tp)
    check(tp.dtype == 7 and arr.shape == () and arr.item().decode("utf-8") == TEXT,
          f"text: DT_STRING scalar {arr.item()!r}")
meta = acc.SummaryMetadata("notes")
check(meta.plugin_data.plugin_name == "text", f"text plugin: {meta.plugin_data.plugin_name!r}")

# 3. What the web UI reads: the plugin accumulator, which migrates
# simple_value and histo into tensors (data_compat).
pacc = pea.EventAccumulator(path, size_guidance={pea.TENSORS: 0})
pacc.Reload()
check(list(pacc.PluginTagToContent("scalars")) == ["loss"]
      and list(pacc.PluginTagToContent("histograms")) == ["weights"]
      and list(pacc.PluginTagToContent("text")) == ["notes"],
      "plugins: scalars has 'loss', histograms 'weights', text 'notes'")
ps = pacc.Tensors("loss")
check(len(ps) == N_SCALARS and all(
    float(tensor_util.make_ndarray(e.tensor_proto)) == loss_at(e.step) for e in ps),
    f"scalars plugin: {len(ps)} values as written")
ph = pacc.Tensors("weights")
ok = len(ph) == N_HISTOS
for e in ph:
    a = tensor_util.make_ndarray(e.tensor_proto)  # rows of [left, right, count]
    ok = ok and a.ndim == 2 and a.shape[1] == 3 and a[:, 2].sum() == N_SAMPLE
check(ok, f"histograms plugin: {len(ph)} histograms of {N_SAMPLE} values each")
pt = pacc.Tensors("notes")
check(len(pt) == 1 and tensor_util.make_ndarray(pt[0].tensor_proto).item().decode() == TEXT,
      "text plugin: the text as written")

print(f"test_tensorboard: {failures} failed: {'FAIL' if failures else 'PASS'}")
sys.exit(1 if failures else 0)
PY
