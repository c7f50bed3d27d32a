#!/usr/bin/env bash
# bench_pending.sh - the figures the next session starts from, in one call on the GPU machine
# (about 5 minutes), each against its reference in the same process:
#   1. gpu_check's decode and attention-backward rows under memcheck (the sm_90a defaults of
#      2026-12-02: decode_split BN=16 NW=1 STAGES=3, attention_bwd dkdv BM=64 BN=64 NW=4 and
#      dq BM=128 BN=64 NW=8; PERF.md 50 and 54);
#   2. bench_examples' decode, backward and row sections (GPU time; PERF.md 49);
#   3. the Python launch overhead (tools/bench_python.py).
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
echo "== 1. decode and attention-backward rows of gpu_check (with memcheck)"
SANITIZE=1 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=120 ONLY='^(decode|attention_bwd)' OUT="${OUT:-$(mktemp -d)}" \
  timeout 150 bash tools/gpu_check.sh "$CARRY" 2>&1 | tail -12
PYSITE=$(mktemp -d)
WHEEL=$(ls "$CARRY"/tile_lang-*.whl | head -1)
python3 -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$PYSITE" cffi pycparser &&
  python3 -m pip install -q --no-index --no-deps --target "$PYSITE" "$WHEEL" || exit 2
echo "== 2. decode, backward and row kernels (bench_examples)"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 200 python3 tools/bench_examples.py decode bwd rows
echo "== 3. Python launch overhead"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 60 python3 tools/bench_python.py | tail -5
