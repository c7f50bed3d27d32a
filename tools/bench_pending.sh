#!/usr/bin/env bash
# bench_pending.sh - the measurements that the changes of 2026-12-02 (thirteenth session)
# still wait for, in one call on the GPU machine (about 3 minutes), each against its
# reference in the same process:
#   1. the decode rows of gpu_check (ragged shapes, paged 8/16, GQA) with decode_split's new
#      sm_90a defaults (BN=16, NW=1, STAGES=6: PERF.md 48), under memcheck too;
#   2. bench_examples' decode rows at those defaults against SDPA, and its gemm rows (lib
#      gemm called from Python as g(a, b, c): the fast launch path now takes such calls;
#      prediction: within a few percent of bench_gemm's figures);
#   3. the Python launch overhead (tools/bench_python.py) with TILE_AUTOCONFIG on by default.
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
echo "== 1. decode rows of gpu_check (with memcheck)"
SANITIZE=1 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=120 ONLY='^decode' OUT="${OUT:-$(mktemp -d)}" \
  timeout 150 bash tools/gpu_check.sh "$CARRY" 2>&1 | tail -12
PYSITE=$(mktemp -d)
WHEEL=$(ls "$CARRY"/tile_lang-*.whl | head -1)
python3 -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$PYSITE" cffi pycparser &&
  python3 -m pip install -q --no-index --no-deps --target "$PYSITE" "$WHEEL" || exit 2
echo "== 2. decode and gemm rows (bench_examples)"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 120 python3 tools/bench_examples.py decode gemm
echo "== 3. Python launch overhead"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 60 python3 tools/bench_python.py | tail -5
