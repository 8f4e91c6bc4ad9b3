#!/bin/bash
# test_cli_tensorboard.sh -- `tensorscope train --tensorboard DIR` read back by
# TensorBoard's own EventAccumulator: each run in its own subdirectory
# (DIR/<date>_<host>, a second run beside the first; --run-name NAME), the
# training scalars grouped with `/` (loss/train per run, loss/heldout and
# accuracy/heldout per epoch, train/learning_rate, train/samples_per_second,
# grad/norm/global and per parameter), the histograms of the watched fc3
# gradients under grad/ (bucket totals = tensor sizes), their fp16/bf16/fp8
# range fractions (range/...), the Custom Scalars layout (the losses first,
# one chart per tensor for its eight range fractions), the hyperparameters
# for the HParams dashboard and the run's config text, cross-checked against
# what train printed; a CNN's --feature-maps and --filters and the GPT's
# --attention-map as images (act/, weight/, attention/); on cpu-staged (the
# device path on the CPU) the device's memory per run (device_memory/in_use
# and /peak, MiB: the figures --log-memory printed), none on the CPU, and
# the watches' histograms and range fractions, taken on the device, equal
# to the same run's on the CPU.
# Uses the venv of tests/test_tensorboard.sh ($TS_BUILD_DIR/tb-venv, same
# pins), creating it the same way when missing: needs PyPI the first time,
# and fails rather than skips without it.
# needs: tensorboard
set -uo pipefail

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
EPOCHS=2

fail() { echo "FAIL $*"; echo "0 passed, 1 failed"; exit 1; }

[ -x "$BIN" ] || fail "$BIN is missing: build the CLI first (cmake --build $BUILD)"

. "$(dirname "$0")/support/tb_venv.sh"
tb_venv_ensure

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ts_cli_tb.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if ! "$BIN" train --data "$SRC/data/mnist" --epochs $EPOCHS --batch-size 1000 \
    --tensorboard "$TMP/tb" --watch 'Gradient___fc3*' --watch-range --watch Relu:1 --watch fc3.bias > "$TMP/train.out" 2> "$TMP/train.err"; then
    sed 's/^/     | /' "$TMP/train.err" | head -n 8
    fail "tensorscope train --tensorboard exited non-zero"
fi
echo "ok   train --epochs $EPOCHS --batch-size 1000 --tensorboard DIR --watch 'Gradient___fc3*' --watch-range --watch Relu:1 --watch fc3.bias exits 0"
RUN=$(sed -n 's/^TensorBoard logs in \([^ ]*\) (run: tensorboard --logdir .*)$/\1/p' "$TMP/train.out")
case "$RUN" in
"$TMP/tb/"20[0-9][0-9]-[01][0-9]-[0-3][0-9]_[0-2][0-9]-[0-5][0-9]-[0-5][0-9]_*) echo "ok   the run went to its own subdirectory ${RUN#$TMP/}" ;;
*) fail "the run's directory '$RUN' is not DIR/<date>_<host>" ;;
esac
"$BIN" train --data "$SRC/data/mnist" --quiet --max-steps 2 --batch-size 1000 --tensorboard "$TMP/tb" > /dev/null 2>&1
"$BIN" train --data "$SRC/data/mnist" --quiet --max-steps 2 --batch-size 1000 --tensorboard "$TMP/tb" --run-name lr-0.01 > /dev/null 2>&1
n=$(find "$TMP/tb" -name 'events.out.tfevents.*' | wc -l)
[ "$n" -eq 3 ] && [ -d "$TMP/tb/lr-0.01" ] || fail "three runs into one DIR left $n event files (want 3, one in DIR/lr-0.01)"
echo "ok   three runs into one DIR: three subdirectories, one named by --run-name"

# CNN pictures: feature maps and filters as images beside their PNG files
CNN_OK=true
"$BIN" train --model cnn --data "$SRC/data/mnist" --quiet --max-steps 2 --batch-size 1000 --tensorboard "$TMP/tb" --run-name cnn \
    --feature-maps 'conv1/Conv2d:0' --filters conv1.weight --picture-dir "$TMP/pictures" > "$TMP/cnn.out" 2>&1 || CNN_OK=false

# a device's memory per run (cpu-staged: the device path on the CPU, its
# backend's own allocations counted as a GPU's are), beside --log-memory's lines
# and its watches' histograms and range fractions, taken on the device, the
# CPU's (the same run with --device cpu)
STAGED_OK=true
for dev in cpu-staged cpu; do
    "$BIN" train --data "$SRC/data/mnist" --quiet --max-steps 3 --batch-size 100 --device $dev --log-memory \
        --watch 'Gradient___fc3*' --watch-range --watch Relu:1 \
        --tensorboard "$TMP/tb" --run-name $dev > "$TMP/$dev.out" 2> "$TMP/$dev.err" || STAGED_OK=false
done

# the character GPT's attention map as an image too
GPT_OK=true
"$BIN" train --model gpt --data "$SRC/data/tinyshakespeare" --layers 1 --heads 2 --embd 16 --block-size 16 --batch-size 8 \
    --steps 1 --holdout 16 --quiet --attention-map 'blocks.0.attn/Softmax:0' --attention-map-dir "$TMP/maps" \
    --tensorboard "$TMP/tb" --run-name gpt > "$TMP/gpt.out" 2>&1 || GPT_OK=false

"$VENV/bin/python" - "$RUN" "$TMP/train.out" "$EPOCHS" "$TMP/tb/cnn" "$TMP/pictures" "$CNN_OK" "$TMP/tb/gpt" "$GPT_OK" \
    "$TMP/tb/cpu-staged" "$STAGED_OK" "$TMP/cpu-staged.err" "$TMP/tb/cpu" <<'PY'
import math, re, sys, warnings

warnings.simplefilter("ignore")
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.util import tensor_util

logdir, train_out, epochs = sys.argv[1], open(sys.argv[2]).read(), int(sys.argv[3])
passed = failed = 0


def check(ok, msg):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    passed, failed = passed + bool(ok), failed + (not ok)
    return ok


# What train printed: runs, per-epoch mean loss and held-out accuracy.
m = re.search(r"^trained (\d+) runs \((\d+) steps", train_out, re.M)
runs = int(m.group(1)) if m else -1
epoch_lines = re.findall(r"^epoch (\d+)/\d+: loss ([0-9.]+)\s+held-out accuracy ([0-9.]+)%", train_out, re.M)
check(runs > 0 and len(epoch_lines) == epochs, f"train printed {runs} runs and {len(epoch_lines)} epoch lines")

acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0})
acc.Reload()
tags = acc.Tags()
want_scalars = ["loss/train", "train/learning_rate", "train/samples_per_second", "grad/norm/global", "loss/heldout", "accuracy/heldout"] + \
    [f"grad/norm/fc{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")]
groups = {t.split("/")[0] for t in tags["scalars"]}
check(groups == {"loss", "accuracy", "train", "grad", "range"}, f"scalar groups: {sorted(groups)}")
check(all(t in tags["scalars"] for t in want_scalars), f"scalars grouped with '/': {sorted(t for t in tags['scalars'] if not t.startswith('range/'))}")


def scalars(tag):
    return acc.Scalars(tag) if tag in tags["scalars"] else []


loss = scalars("loss/train")
steps = [e.step for e in loss]
check(len(loss) == runs and steps == sorted(set(steps)) and steps and steps[0] >= 0,
      f"loss: {len(loss)} values (want one per run: {runs}), steps {steps[:1]}..{steps[-1:]} increasing")
vals = [e.value for e in loss]
check(vals and all(math.isfinite(v) and 0 < v < 10 for v in vals) and abs(vals[0] - math.log(10)) < 0.2,
      f"loss values finite, first {vals[0] if vals else None:.4f} near ln 10 (untrained 10 classes)")
if runs > 0 and len(loss) == runs and len(epoch_lines) == epochs:
    per = runs // epochs
    means = [sum(vals[i * per:(i + 1) * per]) / per for i in range(epochs)]
    printed = [float(l) for _, l, _ in epoch_lines]
    check(all(abs(a - b) < 6e-4 for a, b in zip(means, printed)),
          f"loss per epoch averages to what train printed: {[round(x, 4) for x in means]} vs {printed}")

lr = scalars("train/learning_rate")
check(len(lr) == runs and all(math.isclose(e.value, 0.01, rel_tol=1e-6) for e in lr),
      f"train/learning_rate: {len(lr)} values, all 0.01 (the default)")
sps = scalars("train/samples_per_second")
check(len(sps) == runs and all(math.isfinite(e.value) and e.value > 0 for e in sps),
      f"samples_per_second: {len(sps)} positive values (first {sps[0].value if sps else None:.0f})")
gn = scalars("grad/norm/global")
check(len(gn) == runs and all(math.isfinite(e.value) and e.value > 0 for e in gn),
      f"gradient_norm: {len(gn)} positive values (first {gn[0].value if gn else None:.4f})")

per_param = [scalars(f"grad/norm/fc{i}.{p}") for i in (1, 2, 3) for p in ("weight", "bias")]
check(gn and all(len(s) == len(gn) for s in per_param)
      and all(abs(g.value ** 2 - sum(s[k].value ** 2 for s in per_param)) <= 1e-4 * g.value ** 2 for k, g in enumerate(gn)),
      "grad/norm/global^2 = the sum of the six grad/norm/<param>^2 at every step")

ha = scalars("accuracy/heldout")
printed = [float(a) for _, _, a in epoch_lines]
check(len(ha) == epochs and all(0 <= e.value <= 100 for e in ha)
      and all(abs(e.value - p) < 6e-3 for e, p in zip(ha, printed)),
      f"accuracy/heldout: {len(ha)} values (one per epoch: {epochs}), {[round(e.value, 2) for e in ha]}% "
      f"= train's {printed}%")
check(len(ha) == epochs and steps and ha[-1].step == steps[-1],
      "accuracy/heldout logged at the step of the epoch's last run")
hl = scalars("loss/heldout")
printed_hl = [float(x) for x in re.findall(r"^epoch \d+/\d+: .*held-out accuracy [0-9.]+% \(loss ([0-9.]+)\)", train_out, re.M)]
check(len(hl) == epochs and all(abs(e.value - p) < 6e-4 for e, p in zip(hl, printed_hl)),
      f"loss/heldout: {[round(e.value, 4) for e in hl]} = train's {printed_hl}")

rng = [t for t in tags["scalars"] if t.startswith("range/")]
want_rng = {f"range/Gradient___fc3.{p}/{f}_{k}" for p in ("weight", "bias") for f in ("fp16", "bf16", "e4m3", "e5m2")
            for k in ("underflow", "overflow")}
check(want_rng <= set(rng) and all(0 <= e.value <= 1 for t in want_rng for e in scalars(t)),
      f"{len(rng)} range/ scalars, the 16 of fc3's gradients among them, fractions in [0, 1]")
# The Custom Scalars layout: categories in order, the losses first; one
# multi-line chart per range tensor whose regular expression matches its
# eight fractions and nothing else.
import re as _re
from tensorboard.plugins.custom_scalar import layout_pb2
lay = acc.Tensors("custom_scalars__config__") if "custom_scalars__config__" in tags["tensors"] else []
layout = layout_pb2.Layout()
if lay:
    layout.ParseFromString(tensor_util.make_ndarray(lay[0].tensor_proto).item())
cats = [c.title for c in layout.category]
check(len(lay) == 1 and acc.SummaryMetadata("custom_scalars__config__").plugin_data.plugin_name == "custom_scalars"
      and cats[:1] == ["loss"], f"Custom Scalars layout written once, categories {cats}")
charts = {ch.title: list(ch.multiline.tag) for c in layout.category for ch in c.chart}
loss_chart = [t for c in layout.category if c.title == "loss" for ch in c.chart for t in tags["scalars"]
              if any(_re.search(r, t) for r in ch.multiline.tag)]
check(sorted(loss_chart) == ["loss/heldout", "loss/train"], f"the loss chart draws {sorted(loss_chart)}")
for p in ("weight", "bias"):
    name = f"Gradient___fc3.{p}"
    drawn = sorted(t for t in tags["scalars"] if any(_re.search(r, t) for r in charts.get(name, [])))
    check(drawn == sorted(t for t in want_rng if t.startswith(f"range/{name}/")) and len(drawn) == 8,
          f"one range chart for {name}: its 8 fractions ({len(drawn)} tags)")
hp = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data if "_hparams_/session_start_info" in tags["tensors"] else None
check(hp is not None and hp.plugin_name == "hparams" and b"optimizer" in hp.content and b"batch_size" in hp.content,
      "hyperparameters for the HParams dashboard (_hparams_/session_start_info)")

# Histograms of the watched gradients: one per run, bucket totals = sizes.
sizes = {"grad/Gradient___fc3.weight": 1000, "grad/Gradient___fc3.bias": 10}
norm_sq = {}
for tag, n in sizes.items():
    h = acc.Histograms(tag) if tag in tags["histograms"] else []
    bad = [(e.step, e.histogram_value.num, sum(e.histogram_value.bucket)) for e in h
           if e.histogram_value.num != n or sum(e.histogram_value.bucket) != n
           or not e.histogram_value.min <= e.histogram_value.max]
    check(len(h) == runs and not bad,
          f"histogram {tag}: {len(h)} (want {runs}), each num = bucket total = {n} (wrong: {bad[:3]})")
    norm_sq[tag] = {e.step: e.histogram_value.sum_squares for e in h}
# Other watched tensors by kind: an activation under act/, a parameter under weight/
for tag, n in {"act/Relu:1": 100000, "weight/fc3.bias": 10}.items():
    h = acc.Histograms(tag) if tag in tags["histograms"] else []
    check(len(h) == runs and all(e.histogram_value.num == n for e in h), f"histogram {tag}: {len(h)} (want {runs}) of {n} values")
check(all(t.split("/")[0] in ("grad", "act", "weight") for t in tags["histograms"]), f"histogram groups: {sorted(tags['histograms'])}")
# The global norm covers every parameter's gradient, fc3's among them (D=A=1:
# the accumulated gradient is the micro-batch's).
below = [e.step for e in gn
         if e.value ** 2 < sum(norm_sq[t].get(e.step, 0) for t in sizes) * (1 - 1e-4)]
check(gn and not below, f"gradient_norm^2 >= fc3's gradient sum of squares at every step (violations: {below[:3]})")

# The run's config as text.
cfg = acc.Tensors("config") if "config" in tags["tensors"] else []
text = tensor_util.make_ndarray(cfg[0].tensor_proto).item().decode("utf-8") if cfg else ""
meta = acc.SummaryMetadata("config").plugin_data.plugin_name if cfg else ""
check(len(cfg) == 1 and meta == "text" and "model: mlp" in text and "batch size: 1000" in text
      and f"epochs: {epochs}" in text,
      f"config text ({meta!r} plugin): {text.splitlines()[0] if text else None!r} ...")

# Feature maps and filters: images in the CNN run's log, the same PNGs as the files
cnn_dir, pictures, cnn_ok = sys.argv[4], sys.argv[5], sys.argv[6] == "true"
check(cnn_ok, "train --model cnn --feature-maps conv1/Conv2d:0 --filters conv1.weight --tensorboard exits 0")
cnn = ea.EventAccumulator(cnn_dir, size_guidance={ea.IMAGES: 0})
cnn.Reload()
images = cnn.Tags().get("images", [])
for tag, f in (("act/conv1/Conv2d:0/sample_0", "feature_maps_conv1_Conv2d_0_0.png"), ("weight/conv1.weight", "filters_conv1.weight.png")):
    ev = cnn.Images(tag) if tag in images else []
    try:
        same = bool(ev) and ev[0].encoded_image_string == open(f"{pictures}/{f}", "rb").read()
    except OSError:
        same = False
    check(len(ev) == 1 and ev[0].encoded_image_string[:4] == b"\x89PNG" and ev[0].width == 800 and ev[0].height == 600 and same,
          f"image {tag}: one 800x600 PNG, the bytes of {f} (images: {images})")

gpt_dir, gpt_ok = sys.argv[7], sys.argv[8] == "true"
check(gpt_ok, "train --model gpt --attention-map 'blocks.0.attn/Softmax:0' --tensorboard exits 0")
gpt = ea.EventAccumulator(gpt_dir, size_guidance={ea.IMAGES: 0})
gpt.Reload()
att = gpt.Images("attention/blocks.0.attn/Softmax:0/sample_0") if "attention/blocks.0.attn/Softmax:0/sample_0" in gpt.Tags().get("images", []) else []
check(len(att) >= 1 and att[0].encoded_image_string[:4] == b"\x89PNG",
      f"image attention/blocks.0.attn/Softmax:0/sample_0: the attention map ({len(att)}; images: {gpt.Tags().get('images', [])})")

# Device memory: on cpu-staged a scalar per run of what its backend holds
# (device_memory/in_use) and its peak, in MiB: the figures --log-memory
# printed after the same runs, and at least the model's own buffers
staged_dir, staged_ok, staged_err = sys.argv[9], sys.argv[10] == "true", open(sys.argv[11]).read()
check(staged_ok, "train --device cpu-staged (and cpu) --log-memory --watch ... --tensorboard exits 0")
st = ea.EventAccumulator(staged_dir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
st.Reload()
st_tags = st.Tags()["scalars"]
oncpu = ea.EventAccumulator(sys.argv[12], size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
oncpu.Reload()
hist_tags = sorted(st.Tags()["histograms"])
check(hist_tags == sorted(oncpu.Tags()["histograms"]) and {"grad/Gradient___fc3.weight", "act/Relu:1"} <= set(hist_tags),
      f"cpu-staged's histograms are the CPU's tags: {hist_tags}")
differ = [t for t in hist_tags if [(e.step, e.histogram_value) for e in st.Histograms(t)]
          != [(e.step, e.histogram_value) for e in oncpu.Histograms(t)]]
check(hist_tags and not differ and all(len(st.Histograms(t)) == 3 for t in hist_tags),
      f"... each run's histogram the CPU's, bucket for bucket (differ: {differ})")
rng_tags = sorted(t for t in st_tags if t.startswith("range/"))
rdiffer = [t for t in rng_tags if [(e.step, e.value) for e in st.Scalars(t)] != [(e.step, e.value) for e in oncpu.Scalars(t)]]
check(len(rng_tags) == 8 * len(hist_tags) > 0 and not rdiffer, f"... and its {len(rng_tags)} range fractions each run (differ: {rdiffer})")
use = st.Scalars("device_memory/in_use") if "device_memory/in_use" in st_tags else []
peak = st.Scalars("device_memory/peak") if "device_memory/peak" in st_tags else []
st_loss = st.Scalars("loss/train") if "loss/train" in st_tags else []
UNITS = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}
lines = re.findall(r"^step (\d+): memory: params ([0-9.]+)(\w+) grads ([0-9.]+)(\w+) optimizer ([0-9.]+)(\w+) activations ([0-9.]+)(\w+) "
                   r".* cpu-staged ([0-9.]+)(\w+) \(peak ([0-9.]+)(\w+), free", staged_err, re.M)
logged = {int(l[0]): [float(l[i]) * UNITS[l[i + 1]] / 1024 ** 2 for i in range(1, 13, 2)] for l in lines}
check(len(use) == len(peak) == len(st_loss) == 3 and [e.step for e in use] == [e.step for e in st_loss],
      f"device_memory/in_use and /peak: one value per run ({len(use)}, {len(peak)}; runs {len(st_loss)})")
check(len(logged) == 3 and all(e.step in logged for e in use), f"--log-memory printed cpu-staged's memory after steps {sorted(logged)}")
agree = [(e.step, round(e.value, 3), round(logged[e.step][4], 3)) for e in use if e.step in logged]
check(agree and all(abs(a - b) <= 0.006 * max(b, 0.01) for _, a, b in agree)
      and all(abs(p.value - logged[p.step][5]) <= 0.006 * max(logged[p.step][5], 0.01) for p in peak if p.step in logged),
      f"the scalars are the figures --log-memory printed (step, MiB, printed): {agree}")
check(use and all(u.value <= p.value + 1e-9 and u.value >= 0.99 * sum(logged[u.step][:4]) > 0 for u, p in zip(use, peak) if u.step in logged),
      "in use <= peak, and in use holds at least the parameters, gradients, optimizer state and activations")
check(not any(t.startswith("device_memory/") for t in tags["scalars"] + oncpu.Tags()["scalars"]),
      "no device_memory/ scalars for a model on the CPU")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
