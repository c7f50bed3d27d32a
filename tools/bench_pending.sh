#!/usr/bin/env bash
# bench_pending.sh - the figures the next session starts from, in one call on the GPU machine
# (about 8 minutes), each against its reference in the same process. Pending since the
# twenty-seventh session (PERF.md 102-104; first run on an H100 on 2026-12-07, PERF.md 112):
#   1. gpu_check's row, scan, decode and attention checks (the store packing of PERF.md 104
#      and the loop counters of PERF.md 102 change the PTX of every row kernel, the scans,
#      decode's combine and the backward's dQ scaling), with the first run on hardware of
#      the cluster form (lib's rows at BN=65536 on 16 warps, and the user-written row
#      kernels of tests/kernels/user_rows.tile in their looped, one-tile and cluster forms);
#   2. tools/exp/row_align.py rev clustercheck cluster: row-reverse against rowrev=0, and the
#      rows split across a cluster (PERF.md 103) against PyTorch and against the defaults;
#   3. ncu: softmax 4096 x 50257 with and without row-reverse (DRAM bytes, L2 hit rate),
#      and the cluster split at BN=65536.
#
#   bash tools/bench_pending.sh [CARRY_DIR]      (default .carry; from the repository root)
#   PART=1 or PART=2 runs section 1 or sections 2-3 alone (each fits one 10-minute call);
#   PART=3: tools/exp/nodq_ab.py, what the fused backward's dQ reduce-adds cost (PERF.md 111);
#   PART=6: the rows after PERF.md 115 (gpu_check's row checks, row_align.py check, the
#   rows, row_align.py shift: the norms against shift=1 (shifted weights, off by default
#   since that run), occupancy=1 and prefetch=1), about 6 minutes;
#   PART=7: tools/exp/writer_ab.py, lib's fused backward (PERF.md 117) against the form
#   before it and against writer=1 (PERF.md 116), after gpu_check's backward rows (with
#   memcheck, racecheck and synccheck), T7=SECONDS, G7=SECONDS for gpu_check;
#   PART=9: PERF.md 119: gpu_check's row checks, row_align.py check, then row_align.py rule
#   (the defaults against shift=0,prefetch=0), G9 / T9 bound the first and the last;
#   PART=10: PERF.md 120: gpu_check's row checks (G10 seconds; 0: none), row_align.py rawcheck (C10 seconds), then
#   row_align.py raw (T10; S10 names other sections), and row_align.py rule when R10 gives
#   it seconds;
#   PART=8: ncu (stall samples, then throughput sections) of the norms' vocabulary rows against
#   softmax's, V8="KIND N SCHEDULE BN NW;..." replaces the variants, T8/T8B bound the two;
#   NS=SECONDS first runs row_align.py nsweep (the norms over BN, NW, shift=1, prefetch=1),
#   or the sections NSEC names; NCU=0 then leaves ncu out;
#   PART=4: tools/exp/row_align.py pfcheck pf, the register prefetch (PERF.md 113), T4=SECONDS;
#   SKIP_NCU=1 leaves out section 3, T3=SECONDS bounds PART=3
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
PART=${PART:-all}
# gpu_check's checks whose names match $1 within $2 seconds (killed $3 later), its log in
# $OUT/$4, its summary printed
gpu_rows() {
  OUT=${OUT:-$(mktemp -d)} ONLY=$1 TIME_BUDGET=$2 timeout $(($2 + $3)) bash tools/gpu_check.sh "$CARRY" > "${OUT:-/tmp}/$4" 2>&1
  grep -E "FAIL|passed|failed" "${OUT:-/tmp}/$4" | tail -8
}
# row_align.py check: ragged rows against PyTorch, the failures and the count printed
ragged_check() {
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 120 python3 -u tools/exp/row_align.py check > "${OUT:-/tmp}/check.txt" 2>&1
  grep -E "FAIL|rows ok" "${OUT:-/tmp}/check.txt" | tail -5
}
# py_tee SECONDS FILE WIDTH SCRIPT ARGS...: a Python script's output kept in $OUT/FILE and
# printed cut to WIDTH columns
py_tee() {
  local t=$1 file=$2 width=$3
  shift 3
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout "$t" python3 -u "$@" 2>&1 | grep -v Warning | tee "${OUT:-/tmp}/$file" |
    cut -c1-"$width"
}
if [ "$PART" = all ] || [ "$PART" = 1 ]; then
echo "== 1. gpu_check rows, scans, decode, attention"
OUT=${OUT:-$(mktemp -d)} ONLY='^(softmax|layernorm|rmsnorm|xent|addnorm|minmax|logsoftmax|gemm_tn|linear_ln|swa|bgemm|gemm_softmax|conv1d|linear_t|gqa|gemm_rms|moe_scatter|mlp2|cumsum|cummax|decode|attention)' TIME_BUDGET=200 \
  timeout 300 bash tools/gpu_check.sh "$CARRY" 2>&1 | tail -25
fi
[ "$PART" = 1 ] && exit 0
if [ "$PART" = 6 ]; then
  echo "== 7. the rows after PERF.md 115 (the norms' weights as shifted vectors): issue 17's rows,"
  echo "   ragged rows against PyTorch, the norms against shift=1, occupancy=1 and prefetch=1, gpu_check's rows"
  rows_of() {
    PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout ${3:-150} python3 -u tools/$1 $2 2>&1 | tee -a "${OUT:-/tmp}/rows.txt" |
      python3 -c '
import sys, re
for l in sys.stdin:
    m = re.search(r"ours (\d+) GB/s = (\d+)% of copy", l); t = re.search(r"torch (\d+) GB/s = (\d+)%", l)
    if m: print("%-52s %5s %3s%% torch %3s%%" % (l[:52].strip(), m.group(1), m.group(2), t.group(2)))
    elif "FAIL" in l: print(l.strip()[:150])'
  }
  rows_of bench_examples.py rows
  ragged_check
  rows_of exp/row_align.py shift 200
  gpu_rows '^(softmax|layernorm|rmsnorm|xent|addnorm|minmax|logsoftmax)' "${T6:-100}" 40 gpucheck.txt
  exit 0
fi
if [ "$PART" = 7 ]; then
  echo "== 8. the fused backward's candidates (PERF.md 116-117): correctness, then speed"
  gpu_rows '^attention_bwd' "${G7:-120}" 80 gpucheck-bwd.txt
  py_tee "${T7:-300}" writer.txt 190 tools/exp/writer_ab.py
  exit 0
fi
if [ "$PART" = 10 ]; then
  echo "== 11. PERF.md 120 (shifted loads carried ahead as their blocks)"
  [ "${G10:-40}" != 0 ] && gpu_rows '^(softmax|layernorm|rmsnorm|addnorm|xent)' "${G10:-40}" 30 gpucheck-rows.txt
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout "${C10:-150}" python3 -u tools/exp/row_align.py rawcheck > "${OUT:-/tmp}/rawcheck.txt" 2>&1
  grep -E "FAIL|rows ok|Error" "${OUT:-/tmp}/rawcheck.txt" | tail -5
  py_tee "${T10:-200}" raw.txt 200 tools/exp/row_align.py ${S10:-raw}
  [ -n "${R10:-}" ] && py_tee "$R10" rule.txt 200 tools/exp/row_align.py rule
  exit 0
fi
if [ "$PART" = 9 ]; then
  echo "== 10. PERF.md 119 (a long row cache's output pass: ties shifted, weights loaded two chunks ahead)"
  gpu_rows '^(softmax|layernorm|rmsnorm|addnorm|xent)' "${G9:-60}" 40 gpucheck-rows.txt
  ragged_check
  py_tee "${T9:-200}" rule.txt 200 tools/exp/row_align.py rule
  exit 0
fi
if [ "$PART" = 8 ]; then
  echo "== 9. ncu: the norms' output pass against softmax's at the vocabulary row (where W's loads cost)"
  V=("softmax 50264 - 4096 16" "rmsnorm 50264 - 4096 16" "layernorm 50257 - 4096 16" "layernorm 50257 shift=1 4096 16"
     "layernorm 4097 - 1024 4 16384" "layernorm 4097 shift=1 1024 4 16384")
  [ -n "${V8:-}" ] && IFS=';' read -r -a V <<< "$V8"
  # shellcheck disable=SC2086 # (NSEC: sections, one word each)
  [ -n "${NS:-}" ] && py_tee "$NS" nsweep.txt 200 tools/exp/row_align.py ${NSEC:-nsweep}
  [ "${NCU:-1}" = 0 ] && exit 0
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout ${T8:-250} bash tools/exp/rows_stalls.sh "${V[@]}" 2>&1 | tee "${OUT:-/tmp}/stalls.txt"
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout ${T8B:-250} bash tools/exp/rows_ncu.sh "${V[@]}" 2>&1 | tee "${OUT:-/tmp}/ncu.txt"
  exit 0
fi
if [ "$PART" = 4 ]; then
  echo "== 5. register prefetch D chunks ahead (PERF.md 113): ragged rows, then speed"
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout ${T4:-500} python3 -u tools/exp/row_align.py pfcheck pf 2>&1 |
    tee "${OUT:-/tmp}/pf.txt" | grep -E "FAIL|GB/s|rows ok" | cut -c1-150 | tail -70
  [ -n "${SKIP_NCU:-}" ] && exit 0
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 150 bash tools/exp/rows_stalls.sh "softmax 50257 - 4096 16" \
    "softmax 50257 prefetch=1 4096 16" "softmax 50257 rowcache=1,prefetch=1 4096 16" 2>&1 | tee "${OUT:-/tmp}/stalls.txt"
  exit 0
fi
if [ "$PART" = 3 ]; then
  echo "== 4. the fused backward without its dQ reduce-adds (timing only, PERF.md 111)"
  PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout ${T3:-300} python3 -u tools/exp/nodq_ab.py 2>&1 | grep -v Warning
  exit 0
fi
echo "== 2. row_align.py clustercheck cluster exp rev"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 330 python3 -u tools/exp/row_align.py clustercheck cluster exp rev
[ -n "${SKIP_NCU:-}" ] && exit 0
echo "== 3. ncu: row-reverse and the cluster split"
PYTHONPATH="$PYSITE" TILE_LIBRARY= timeout 120 bash tools/exp/rows_ncu.sh "softmax 50257 rowrev=0 4096 16" \
  "softmax 50257 - 4096 16" "softmax 50257 - 65536 16" "rmsnorm 50264 - 65536 16"
