#!/usr/bin/env bash
# bench_pending.sh - the figures the next session starts from, in one call on the GPU machine
# (about 6 minutes), each against its reference in the same process:
#   1. bench_examples' backward, decode and row sections at the defaults (issue 17's rows;
#      the hd128 dkdv clause of PERF.md 59 has not been measured since it became the default);
#   2. the row cache (PERF.md 63, off by default) at the vocabulary rows with more warps than
#      the defaults give (bench_examples rowcache, with rowcache=1 where it says default);
#   3. the attention table at the kernel defaults (PERF.md 62), to see it hold.
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
PYSITE=$(mktemp -d)
WHEEL=$(ls "$CARRY"/tile_lang-*.whl | head -1)
python3 -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$PYSITE" cffi pycparser &&
  python3 -m pip install -q --no-index --no-deps --target "$PYSITE" "$WHEEL" || exit 2
echo "== 1. bench_examples bwd decode rows (defaults)"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 240 python3 tools/bench_examples.py bwd decode rows
echo "== 2. the row cache"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 150 python3 tools/bench_examples.py rowcache
echo "== 3. bench_attention (kernel defaults)"
timeout 200 python3 tools/bench_attention.py --lib "$LIB" --no-extra 2>&1 | grep -E "^(f16|bf16) |TFLOP|failed"
