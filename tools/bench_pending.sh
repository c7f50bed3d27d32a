#!/usr/bin/env bash
# bench_pending.sh - the figures the next session starts from, in one call on the GPU machine
# (about 7 minutes), each against its reference in the same process:
#   1. gpu_check's attention rows (forward and backward) under the sanitizers, with the
#      fifteenth session's defaults (one ring, Q through the producer, hd128 dkdv's second
#      clause: PERF.md 56-59);
#   2. the full bench_attention table at the kernel's own defaults, f16 and bf16 (issue 15's
#      figures in one run);
#   3. LPT=true (the programs of a batch dealt out heads first) on the causal rows, against
#      the defaults (ab_attention; built in the fifteenth session, not measured: PERF.md 60);
#   4. bench_examples' backward section (dkdv at hd128 with BM=64 BN=32 NW=4).
#
#   bash tools/bench_pending.sh [CARRY_DIR]      (default .carry; from the repository root)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
CARRY=$(cd "${1:-.carry}" && pwd) || exit 2
export LD_LIBRARY_PATH="$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TILE_LIB_DIR="$PWD/lib"
LIB=$CARRY/libtile.so
if [ ! -f "$LIB" ]; then # the wheel holds it
  python3 -c 'import glob, sys, zipfile; w = glob.glob(sys.argv[1] + "/tile_lang-*.whl")[0]; open(sys.argv[1] + "/libtile.so", "wb").write(zipfile.ZipFile(w).read("tile/libtile.so"))' "$CARRY" || exit 2
fi
export PATH=$PATH:/usr/local/cuda/bin
echo "== 1. attention rows of gpu_check (with the sanitizers)"
SANITIZE=1 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=100 ONLY='^attention' OUT="${OUT:-$(mktemp -d)}" \
  timeout 130 bash tools/gpu_check.sh "$CARRY" 2>&1 | tail -6
echo "== 2. bench_attention (kernel defaults)"
timeout 200 python3 tools/bench_attention.py --lib "$LIB" --no-extra 2>&1 | grep -E "^(f16|bf16) |TFLOP|failed"
echo "== 3. LPT on the causal rows"
timeout 120 python3 tools/ab_attention.py --lib "$LIB" --d 64,128 --n 1024,4096 --causal 1 --rounds 3 \
  --variant def=@ --variant lpt=@LPT=true --variant lptg=@LPT=true@tools/exp/attention_lpt_global.tile
PYSITE=$(mktemp -d)
WHEEL=$(ls "$CARRY"/tile_lang-*.whl | head -1)
python3 -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$PYSITE" cffi pycparser &&
  python3 -m pip install -q --no-index --no-deps --target "$PYSITE" "$WHEEL" || exit 2
echo "== 4. backward (bench_examples)"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 100 python3 tools/bench_examples.py bwd
