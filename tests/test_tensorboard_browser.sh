#!/bin/bash
# test_tensorboard_browser.sh -- what `tensorscope train --tensorboard DIR`
# writes, seen the way a user sees it: TensorBoard from PyPI (the venv of
# tests/support/tb_venv.sh) serving two runs on 127.0.0.1 (a free port,
# bounded in time), its HTTP data API listing both runs, the `/`-grouped
# scalar tags, the Custom Scalars layout (the losses first) and the
# hyperparameters of the HParams dashboard, and headless
# Chromium (Debian's) taking screenshots of the scalars, histograms and
# hparams dashboards into $TS_BUILD_DIR/tb-screenshots/, checked for the two
# runs' line colours. Needs PyPI the first time and chromium; fails, never
# skips, without them.
# needs: tensorboard plots
set -uo pipefail

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
PY=/usr/bin/python3 # Debian's, with python3-pil
SHOTS=$BUILD/tb-screenshots

passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
fail() { bad "$*"; echo "$passed passed, $failed failed"; exit 1; }

[ -x "$BIN" ] || fail "$BIN is missing: build the CLI first"
CHROMIUM=$(command -v chromium || command -v chromium-browser) || fail "chromium is missing: run scripts/install-deps.sh test"
. "$(dirname "$0")/support/tb_venv.sh"
tb_venv_ensure

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ts_tb_browser.XXXXXX")
TB_PID=
cleanup() {
    [ -n "$TB_PID" ] && kill "$TB_PID" 2> /dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

T_ARGS=(--data "$SRC/data/mnist" --quiet --epochs 2 --batch-size 1000 --tensorboard "$TMP/tb" --watch 'Gradient___fc3*')
"$BIN" train "${T_ARGS[@]}" --run-name sgd > "$TMP/sgd.out" 2>&1 &&
    "$BIN" train "${T_ARGS[@]}" --run-name adam-cosine --optimizer adam --lr 0.001 --lr-schedule cosine > "$TMP/adam.out" 2>&1 ||
    fail "training the two runs failed: $(tail -n 3 "$TMP/sgd.out" "$TMP/adam.out")"
ok "two runs trained into $TMP/tb (sgd, adam-cosine)"

PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 300 "$VENV/bin/tensorboard" --logdir "$TMP/tb" --host 127.0.0.1 --port "$PORT" > "$TMP/tb.log" 2>&1 &
TB_PID=$!
URL=http://127.0.0.1:$PORT
for _ in $(seq 1 480); do # at most 4 minutes: TensorBoard starts slowly on a loaded machine
    curl -sf "$URL/data/runs" > "$TMP/runs.json" 2> /dev/null && break
    kill -0 "$TB_PID" 2> /dev/null || break
    sleep 0.5
done
[ -s "$TMP/runs.json" ] || fail "TensorBoard did not answer on $URL within 4 minutes: $(tail -n 3 "$TMP/tb.log")"
ok "tensorboard $TB_VERSION serving on $URL"

curl -sf "$URL/data/plugin/scalars/tags" > "$TMP/tags.json"
curl -sf -X POST -H 'Content-Type: application/json' -d '{"experimentName": ""}' "$URL/data/plugin/hparams/experiment" > "$TMP/experiment.json"
curl -sf "$URL/data/plugin/custom_scalars/layout" > "$TMP/layout.json"
"$PY" - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
runs = json.load(open(f"{d}/runs.json"))
tags = json.load(open(f"{d}/tags.json"))
exp = json.load(open(f"{d}/experiment.json"))
ok = True
def check(c, msg):
    global ok
    print(("ok   " if c else "FAIL ") + msg)
    ok = ok and c
check(sorted(runs) == ["adam-cosine", "sgd"], f"/data/runs: {runs}")
want = {"loss/train", "train/learning_rate", "loss/heldout", "accuracy/heldout", "grad/norm/global", "grad/norm/fc3.weight"}
for r in ("sgd", "adam-cosine"):
    have = set(tags.get(r, {}))
    check(want <= have, f"/data/plugin/scalars/tags[{r}]: {len(have)} tags, {sorted(want)} among them")
infos = {h["name"]: h for h in exp.get("hparamInfos", [])}
opt = infos.get("optimizer", {}).get("domainDiscrete", [])
sched = infos.get("lr_schedule", {}).get("domainDiscrete", [])
lr = infos.get("lr", {}).get("domainInterval", {})
check(sorted(opt) == ["adam", "sgd"] and sorted(sched) == ["constant", "cosine"] and lr.get("minValue") == 0.001 and lr.get("maxValue") == 0.01,
      f"/data/plugin/hparams/experiment: optimizer {opt}, lr_schedule {sched}, lr {lr}")
layout = json.load(open(f"{d}/layout.json"))
cats = [c.get("title") for c in layout.get("category", [])]
check(cats[:1] == ["loss"] and "grad" in cats, f"/data/plugin/custom_scalars/layout: categories {cats}, the losses first")
metrics = [m["name"]["tag"] for m in exp.get("metricInfos", [])]
check("accuracy/heldout" in metrics and "loss/train" in metrics, f"HParams metrics include accuracy/heldout and loss/train ({len(metrics)} metrics)")
sys.exit(0 if ok else 1)
PY
if [ $? -eq 0 ]; then ok "TensorBoard's data API: runs, scalar tags and hyperparameters as written"; else bad "TensorBoard's data API (see above)"; fi

mkdir -p "$SHOTS"
for page in scalars histograms hparams; do
    rm -f "$SHOTS/$page.png"
    timeout 90 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --no-first-run \
        --user-data-dir="$TMP/chromium" --window-size=1400,1000 --virtual-time-budget=20000 \
        --screenshot="$SHOTS/$page.png" "$URL/#$page" > "$TMP/chromium_$page.log" 2>&1
    [ -s "$SHOTS/$page.png" ] || bad "no screenshot of #$page: $(tail -n 2 "$TMP/chromium_$page.log")"
done
# TensorBoard colours the first two runs #ff7043 (orange) and #0077bb (blue);
# below the (orange #f57c00) top bar, lines and histograms in those colours
# mean the runs' data was drawn, dark text in the hparams table its rows.
"$PY" - "$SHOTS" <<'PY'
import sys
from PIL import Image
d = sys.argv[1]
ok = True
def near(p, c, tol=40):
    return all(abs(a - b) <= tol for a, b in zip(p[:3], c))
for page, need in (("scalars", 300), ("histograms", 300), ("hparams", 0)):
    try:
        im = Image.open(f"{d}/{page}.png").convert("RGB")
    except Exception as e:
        print(f"FAIL {page}.png: {e}")
        ok = False
        continue
    w, h = im.size
    px = im.crop((0, 120, w, h)).getdata()
    orange = sum(near(p, (255, 112, 67), 30) for p in px)
    blue = sum(near(p, (0, 119, 187), 40) for p in px)
    dark = sum(max(p) < 80 for p in px)
    if need:
        c = orange >= need and blue >= need
        msg = f"{page}.png {w}x{h}: {orange} pixels of the first run's orange, {blue} of the second's blue (want >= {need} each)"
    else:
        c = dark >= 2000
        msg = f"{page}.png {w}x{h}: {dark} dark text pixels in the table (want >= 2000)"
    print(("ok   " if c else "FAIL ") + msg)
    ok = ok and c
sys.exit(0 if ok else 1)
PY
if [ $? -eq 0 ]; then ok "screenshots in $SHOTS show both runs"; else bad "screenshots in $SHOTS (see above)"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
