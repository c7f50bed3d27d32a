#!/usr/bin/env bash
# gpu_cache_tune.sh - the on-disk cache and the autotuner on the GPU, in one run.
#
#   here:              tools/carry.sh                               (fills ./.carry)
#   on the GPU:        bash tools/gpu_cache_tune.sh [CARRY_DIR]      (default ./.carry)
#
# Steps (each prints its result; the summary table comes last):
#   1. cache bench, GEMM f16 4096^3 and attention hd128: cold compile + prepare in a fresh
#      process (CUDA_CACHE_DISABLE=1, empty cache), then fresh processes that load from the
#      on-disk cache (target: GEMM under 20 ms), and which entries hold a cubin;
#   1b. Triton's cold compile of the same matmul (tools/triton_cold_compile.py), if present;
#   2. tilec tune of the GEMM at M=N=K=$SIZE (default 8192) within $BUDGET seconds (default
#      25, so the whole search ends within 30 s): the table's top rows, the counts, the winner against the default and cuBLAS
#      (bench_gemm, one run); 2b. the skinny shapes $SKINNY (16x8192x8192 64x8192x8192), tuned
#      within $SKINNY_BUDGET s (30) each, the winner against cuBLAS;
#   3. the same tilec tune again: the stored result, nothing timed;
#   4. tilec run --autotune --bench at that size: the tuned kernel from the disk, no tuning;
#   5. tilec run --autotune --check at 1024^3 (tuning at the first launch, within
#      TILE_AUTOTUNE_BUDGET_MS, then the tuned kernel checked against the CPU interpreter).
# Full logs go to $OUT (else a temporary folder). Exit status 1 when a step failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
CARRY=$(cd "${1:-.carry}" 2>/dev/null && pwd) || {
  echo "gpu_cache_tune: no folder '${1:-.carry}': build it with tools/carry.sh" >&2
  exit 2
}
[ -x "$CARRY/tilec" ] || { echo "gpu_cache_tune: $CARRY/tilec is missing" >&2; exit 2; }
export LD_LIBRARY_PATH="$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TILEC=$CARRY/tilec
SIZE=${SIZE:-8192}
BUDGET=${BUDGET:-25}
LOG_DIR=${OUT:-$(mktemp -d /tmp/gpu_cache_tune.XXXXXX)}
mkdir -p "$LOG_DIR"
export TILE_CACHE_DIR=$LOG_DIR/cache-$$
rm -rf "$TILE_CACHE_DIR"
GEMM=("$PWD/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0)
SUMMARY=()
fails=0
note() { SUMMARY+=("$1"); echo "== $1"; }
failed() { note "FAIL: $1"; fails=$((fails + 1)); }

echo "== 1. cold and warm compile, fresh processes"
if "$TILEC" cache bench "${GEMM[@]}" --size M=4096,N=4096,K=4096 --device=cuda --reps=6 >"$LOG_DIR/bench_gemm.txt" 2>&1; then
  cat "$LOG_DIR/bench_gemm.txt"
  note "gemm: $(tail -1 "$LOG_DIR/bench_gemm.txt")"
else
  cat "$LOG_DIR/bench_gemm.txt"
  failed "cache bench gemm"
fi
if "$TILEC" cache bench "$PWD/lib/attention.tile" -a scale=0.088 -D D=128 --size B=4,H=32,HKV=32,N=4096,NK=4096 \
  --device=cuda --reps=4 >"$LOG_DIR/bench_attention.txt" 2>&1; then
  cat "$LOG_DIR/bench_attention.txt"
  note "attention: $(tail -1 "$LOG_DIR/bench_attention.txt")"
else
  cat "$LOG_DIR/bench_attention.txt"
  failed "cache bench attention"
fi
# what a run stores: one entry, with or without the driver's image
"$TILEC" run "${GEMM[@]}" --size M=4096,N=4096,K=4096 --device=cuda >/dev/null 2>&1
"$TILEC" cache list >"$LOG_DIR/cache_list.txt" 2>&1
if grep -q "(cubin)" "$LOG_DIR/cache_list.txt"; then
  note "module entries hold a cubin (a warm load skips the driver's JIT)"
else
  failed "no module entry holds a cubin (cuLink failed?): $(grep -m1 'PTX only' "$LOG_DIR/cache_list.txt")"
fi

echo "== 1b. Triton's cold compile of the same matmul (fresh Triton cache), same machine"
if command -v python3 >/dev/null; then
  python3 tools/triton_cold_compile.py >"$LOG_DIR/triton.txt" 2>&1
  rc=$?
  tail -1 "$LOG_DIR/triton.txt"
  if [ $rc -eq 0 ]; then note "$(tail -1 "$LOG_DIR/triton.txt")"; else note "triton: not measured (exit $rc)"; fi
fi

echo "== 2. tilec tune gemm ${SIZE}^3, budget ${BUDGET}s"
T0=$(date +%s)
"$TILEC" tune "${GEMM[@]}" --size M=$SIZE,N=$SIZE,K=$SIZE --device=cuda --budget="$BUDGET" --top=0 \
  >"$LOG_DIR/tune.txt" 2>"$LOG_DIR/tune_progress.txt"
rc=$?
T1=$(date +%s)
head -27 "$LOG_DIR/tune.txt"
echo "      ... (all rows in $LOG_DIR/tune.txt)"
tail -4 "$LOG_DIR/tune.txt"
tail -3 "$LOG_DIR/tune_progress.txt"
if [ $rc -ne 0 ]; then
  failed "tilec tune (exit $rc): $(tail -1 "$LOG_DIR/tune_progress.txt")"
else
  note "tune: $(grep '^best:' "$LOG_DIR/tune.txt") in $((T1 - T0)) s"
  note "tune: $(grep 'timed,' "$LOG_DIR/tune.txt")"
  def=$(grep 'default (the reference)' "$LOG_DIR/tune.txt" | head -1)
  [ -n "$def" ] && note "tune: the default: $(echo "$def" | awk '{print $2, $3, $4 " ms", $5 " TFLOP/s"}')"
  note "tune: outcomes: $(awk '$1 ~ /^[0-9]+$/ && $3 ~ /^(timed|pruned|failed|wrong|skipped)$/ {print $3}' "$LOG_DIR/tune.txt" | sort | uniq -c | tr '\n' ' ')"
fi

# the winner against the default (the best hand-picked configuration) and cuBLAS, same run
best=$(awk '/^best:/ {print $2}' "$LOG_DIR/tune.txt")
if [ -n "$best" ] && [ -x "$CARRY/bench_gemm" ]; then
  "$CARRY/bench_gemm" --quick --dtypes f16 --epilogues none --shapes "$SIZE" --our default --our "$best" \
    >"$LOG_DIR/tune_bench.txt" 2>&1
  sed -n '/summary/,$p' "$LOG_DIR/tune_bench.txt"
  note "tuned vs default vs cuBLAS: $(awk '$1 ~ /^[0-9]+x/ {printf "%s %s TFLOP/s (%sx cuBLAS %s); ", $(NF-5)" "$(NF-4)" "$(NF-3)" "$(NF-2), $4, $6, $5}' "$LOG_DIR/tune_bench.txt")"
fi

echo "== 2b. skinny shapes: tilec tune within ${SKINNY_BUDGET:-30}s each, then the winner against cuBLAS"
for shape in ${SKINNY:-16x8192x8192 64x8192x8192}; do
  IFS=x read -r m n k <<<"$shape"
  "$TILEC" tune "${GEMM[@]}" --size M=$m,N=$n,K=$k --device=cuda --budget="${SKINNY_BUDGET:-30}" --top=8 \
    >"$LOG_DIR/tune_$shape.txt" 2>"$LOG_DIR/tune_${shape}_progress.txt"
  head -12 "$LOG_DIR/tune_$shape.txt"
  grep -E '^best:|timed,' "$LOG_DIR/tune_$shape.txt"
  best=$(awk '/^best:/ {print $2}' "$LOG_DIR/tune_$shape.txt")
  if [ -z "$best" ]; then failed "tune $shape: $(tail -1 "$LOG_DIR/tune_${shape}_progress.txt")"; continue; fi
  "$CARRY/bench_gemm" --quick --dtypes f16 --epilogues none --shapes "$shape" --our "$best" >"$LOG_DIR/skinny_$shape.txt" 2>&1
  sed -n '/summary/,$p' "$LOG_DIR/skinny_$shape.txt"
  note "tuned $shape: $(awk '$1 ~ /^[0-9]+x/ {printf "%s: %s TFLOP/s vs cuBLAS %s (%sx)", $(NF-5)" "$(NF-4)" "$(NF-3)" "$(NF-2), $4, $5, $6}' "$LOG_DIR/skinny_$shape.txt")"
done

echo "== 3. tilec tune again (stored result)"
T0=$(date +%s%N)
"$TILEC" tune "${GEMM[@]}" --size M=$SIZE,N=$SIZE,K=$SIZE --device=cuda --top=3 >"$LOG_DIR/tune2.txt" 2>&1
rc=$?
T1=$(date +%s%N)
cat "$LOG_DIR/tune2.txt"
if [ $rc -eq 0 ] && grep -q "stored result" "$LOG_DIR/tune2.txt"; then
  note "second tune: stored result reused in $(((T1 - T0) / 1000000)) ms"
else
  failed "second tune did not reuse the stored result"
fi

echo "== 4. run --autotune at ${SIZE}^3 (reuses the tuning and the cubin)"
if "$TILEC" run "${GEMM[@]}" --size M=$SIZE,N=$SIZE,K=$SIZE --device=cuda --autotune --bench >"$LOG_DIR/auto.txt" 2>&1; then
  cat "$LOG_DIR/auto.txt"
  note "autotuned run: $(grep -o 'compiled in.*' "$LOG_DIR/auto.txt"); $(grep -o 'time median.*' "$LOG_DIR/auto.txt")"
else
  cat "$LOG_DIR/auto.txt"
  failed "run --autotune ${SIZE}^3"
fi

echo "== 5. run --autotune --check at 1024^3 (tunes at the first launch)"
if TILE_AUTOTUNE_BUDGET_MS=${AUTOTUNE_BUDGET_MS:-60000} "$TILEC" run "${GEMM[@]}" --size M=1024,N=1024,K=1024 \
  --device=cuda --autotune --check --bench >"$LOG_DIR/auto_check.txt" 2>&1; then
  cat "$LOG_DIR/auto_check.txt"
  note "autotune at first launch + check: $(grep -o 'check C .*' "$LOG_DIR/auto_check.txt")"
else
  cat "$LOG_DIR/auto_check.txt"
  failed "run --autotune --check 1024^3"
fi
"$TILEC" cache list >"$LOG_DIR/cache_list_end.txt" 2>&1
note "cache: $(tail -1 "$LOG_DIR/cache_list_end.txt")"

echo
echo "== summary (logs in $LOG_DIR)"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
[ "$fails" -eq 0 ]
