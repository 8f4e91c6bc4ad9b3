#!/usr/bin/env bash
# Installs what tensorscope needs on Debian 12, skipping what is present.
# Usage: scripts/install-deps.sh [build|test]
#   build: compilers and libraries to build the library, CLI and demo
#   test:  also the reference tools the tests use (PyTorch, NumPy, Graphviz,
#          headless Chromium for the TensorBoard screenshots, Node for
#          Perfetto's trace processor) and OpenMPI
#          (the replica tests run under mpirun; optional to build)
set -euo pipefail
what=${1:-build}

pkgs=(build-essential cmake pkg-config zlib1g-dev libopenblas-dev
      libcairo2-dev libprotobuf-c-dev protobuf-c-compiler libarchive-dev
      libunwind-dev binutils # binutils: addr2line, file:line in crash reports
      libedit-dev # the inspector's line editing and history (train --break-at-step)
      # libarchive's private dependencies, for linking libtensorscope.a
      # statically (pkg-config --static): -lacl -lzstd -llz4
      libacl1-dev libzstd-dev liblz4-dev)
if [ "$what" = test ]; then
  pkgs+=(python3-torch python3-torchvision python3-numpy python3-venv python3-pip python3-pil graphviz clang
         libclang-rt-14-dev chromium libopenmpi-dev openmpi-bin
         tmux nodejs) # tmux: the inspector's test types into a terminal; nodejs: runs Perfetto's trace processor on --trace files (tests/test_trace.sh);
                      # python3-torchvision: the real models ts.training_model(module) trains with Debian's PyTorch (python/tests/test_torch_models.py)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
