#!/usr/bin/env bash
# bench_pending.sh - the measurements that the changes of 2026-12-02 still wait for, in one
# call on the GPU machine (about 4 minutes), each against its reference in the same process:
#   1. attention (tools/ab_attention.py, interleaved rounds): the default schedule against
#      causal tiles walked persistently in snake order (persistent=1) and against the rotated
#      loop with ping-pong and FA3's register split (overlap=1, regs=24/240);
#   2. skinny GEMMs at the defaults and with TILE_AUTOCONFIG (bench_gemm --our AUTO=1, and
#      bench_examples' gemm rows against torch.mm);
#   3. paged decode attention with the block table loaded one iteration ahead (prefetch=1)
#      against the default and the contiguous cache (bench_examples' decode rows).
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
C=BM=128,BN=128,BNM=64,NW=8
echo "== 1. attention: default vs persistent=1 (snake) vs overlap=1,regs=24/240"
timeout 240 python3 tools/ab_attention.py --lib "$LIB" --variant base=@$C --variant snake=persistent=1@$C \
  --variant fa3=overlap=1,regs=24/240@$C --n 1024,4096 --rounds 3
echo "== 2. skinny GEMMs: defaults and TILE_AUTOCONFIG"
timeout 240 "$CARRY/bench_gemm" --quick --lib lib --shapes 1x8192x8192,16x8192x8192,64x8192x8192,128x4096x4096 \
  --dtypes f16,bf16 --epilogues none --our default --our AUTO=1 2>&1 | sed -n '/== bench_gemm summary/,$p'
echo "== 3. paged decode (and the skinny rows against torch.mm)"
PYSITE=$(mktemp -d)
WHEEL=$(ls "$CARRY"/tile_lang-*.whl | head -1)
python3 -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$PYSITE" cffi pycparser &&
  python3 -m pip install -q --no-index --no-deps --target "$PYSITE" "$WHEEL" &&
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 240 python3 tools/bench_examples.py decode gemm
