#!/usr/bin/env bash
# bench_hopper.sh - the GEMM measurements of the Hopper tier in one run (GPU machine), each
# against cuBLASLt in the same process (tools/bench_gemm.c), with a short table at the end:
#   1. the schedule ladder: 4096^3 and 8192^3, f16 and bf16, with parts of the schedule
#      switched off (SCHED=...) and the persistent variant;
#   2. fused bias + GELU at 8192^3; unaligned rows (4095^3, 8192x8192x4095: repacked);
#   3. the sm_80 code on the H200 at 4096^3 (and, with OLD=DIR holding an earlier build's
#      libtile.so and tilec, the earlier compiler's sm_80 and sm_90a kernels by tilec run);
#   4. other forms of the product, tuned with `tilec tune --budget=30` first and then
#      compared with their cuBLASLt equivalents: nn.Linear's X @ W.T, a batch with one
#      shared B, and the two-product SwiGLU loop;
#   5. skinny and small products (1, 16, 64 x 8192 x 8192, 128 x 4096 x 4096, 1000^3)
#      at the defaults (TILE_AUTOCONFIG: the configuration chosen per shape) and at the
#      fixed defaults (--our AUTO=0, TILE_FIXED_CONFIG).
#
#   bash tools/bench_hopper.sh [CARRY_DIR]      (default .carry; from the repository root)
# Environment: OUT=dir (logs and the table), QUICK=0 (full timing instead of --quick),
# PARTS="1 2 3 4 5" (which parts), TUNE_BUDGET=seconds (default 30), OLD=dir.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
CARRY=$(cd "${1:-.carry}" && pwd) || exit 2
export LD_LIBRARY_PATH="$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TILE_LIB_DIR="$PWD/lib"
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
PARTS=${PARTS:-"1 2 3 4 5"}
TUNE_BUDGET=${TUNE_BUDGET:-30}
Q=--quick
[ "${QUICK:-1}" = 0 ] && Q=
BG="timeout 300 $CARRY/bench_gemm $Q --lib lib"
TABLE=$OUT/bench_hopper_table.txt
: >"$TABLE"
# the rows of a bench_gemm summary, tagged
rows() { sed -n '/== bench_gemm summary/,$p' "$1" | grep -E '^[0-9]' | sed "s/^/$2 | /" >>"$TABLE"; }
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

if has 1; then
  echo "== 1. the schedule ladder"
  $BG --shapes 4096,8192 --dtypes f16,bf16 --epilogues none --our default --our SCHED=persistent=0 \
    --our SCHED=ws=0 --our SCHED=tma=0 --our SCHED=tma=0+wait=0 --our BM=256,BN=128 \
    >"$OUT/ladder.txt" 2>&1
  tail -3 "$OUT/ladder.txt"
  rows "$OUT/ladder.txt" ladder
fi
if has 2; then
  echo "== 2. fused epilogue, unaligned rows"
  $BG --shapes 8192 --dtypes f16,bf16 --epilogues bias_gelu --our default --our SCHED=persistent=0 \
    >"$OUT/epilogue.txt" 2>&1
  rows "$OUT/epilogue.txt" bias_gelu
  $BG --shapes 4095,8192x8192x4095 --dtypes f16,bf16 --epilogues none --our default >"$OUT/unaligned.txt" 2>&1
  rows "$OUT/unaligned.txt" unaligned
fi
if has 3; then
  echo "== 3. sm_80 code on the H200"
  $BG --shapes 4096 --dtypes f16,bf16 --epilogues none --arch sm_80 >"$OUT/sm80.txt" 2>&1
  rows "$OUT/sm80.txt" "sm_80"
  RUN=(run lib/gemm.tile -k gemm -a alpha=1 -a beta=0 --size M=4096,N=4096,K=4096 --device=cuda --bench)
  for arch in sm_80 sm_90a; do
    echo "tilec run --bench --arch=$arch (this build): $("$CARRY/tilec" "${RUN[@]}" --arch=$arch 2>&1 | grep -i 'tflop' | tail -1)" | tee -a "$TABLE"
    if [ -n "${OLD:-}" ] && [ -x "$OLD/tilec" ]; then
      echo "tilec run --bench --arch=$arch (earlier build): $(LD_LIBRARY_PATH=$OLD "$OLD/tilec" "${RUN[@]}" --arch=$arch 2>&1 | grep -i 'tflop' | tail -1)" | tee -a "$TABLE"
    fi
  done
fi
if has 4; then
  echo "== 4. other forms, tuned for ${TUNE_BUDGET} s"
  # form | file | kernel | tilec --size | bench_gemm shape
  while IFS='|' read -r form file kernel size shape; do
    best=$(timeout $((TUNE_BUDGET * 3 + 60)) "$CARRY/tilec" tune "lib/$file" -k "$kernel" --size "$size" --device=cuda \
      --budget="$TUNE_BUDGET" 2>"$OUT/tune_$form.err" | tee "$OUT/tune_$form.txt" | sed -n 's/^best: \([^ ]*\).*/\1/p')
    echo "tuned $form: ${best:-(none)}" | tee -a "$TABLE"
    cfgs=(--our default --our SCHED=persistent=0)
    [ -n "$best" ] && [ "$best" != "(default)" ] && cfgs+=(--our "$best")
    $BG --form "$form" --shapes "$shape" --dtypes f16 "${cfgs[@]}" >"$OUT/form_$form.txt" 2>&1
    rows "$OUT/form_$form.txt" "$form"
  done <<'FORMS'
linear|linear.tile|linear|M=2000,N=2568,K=2048|2000x2568x2048
bmm_shared|gemm.tile|bmm_shared|BATCH=32,M=1024,N=1040,K=1024|32x1024x1040x1024
swiglu|linear.tile|swiglu|M=2000,N=3072,K=2048|2000x3072x2048
FORMS
fi
if has 5; then
  echo "== 5. skinny and small products: defaults (chosen per shape) and the fixed defaults"
  $BG --shapes 1x8192x8192,16x8192x8192,64x8192x8192,128x4096x4096,1000 --dtypes f16,bf16 --epilogues none \
    --our default --our AUTO=0 >"$OUT/skinny.txt" 2>&1
  rows "$OUT/skinny.txt" skinny
fi
echo
echo "== bench_hopper: part | shape dtype epilogue ours cuBLASLt ratio ... config"
cat "$TABLE"
