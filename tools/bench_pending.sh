#!/usr/bin/env bash
# bench_pending.sh - the figures the next session starts from, in one call on the GPU machine
# (about 5 minutes), each against its reference in the same process:
#   1. bench_examples' backward rows at the defaults (issue 17; PERF.md 65-67) and the
#      sweep around them (the persistent walk, once=0, three stages at hd128);
#   2. decode with the split and combine times (PERF.md 67) and the rows;
#   3. the one-kernel backward experiment (dQ by atomics, PERF.md 66);
#   4. programmatic dependent launch on and off (PERF.md 70), the vocabulary rows at
#      16-byte strides (PERF.md 68) and the one-pass rows' occupancy (PERF.md 73).
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
echo "== 1. bench_examples bwd sweep-bwd"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 240 python3 tools/bench_examples.py bwd sweep-bwd
echo "== 2. bench_examples decode rows"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 150 python3 tools/bench_examples.py decode rows
echo "== 3. bench_examples bwd-atomic"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 120 python3 tools/bench_examples.py bwd-atomic
echo "== 4. bench_examples pdl rows-even occupancy"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 240 python3 tools/bench_examples.py pdl rows-even occupancy
