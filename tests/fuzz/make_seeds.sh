#!/usr/bin/env bash
# make_seeds.sh - writes candidate seeds for fuzz_ir and fuzz_pipeline from the kernel
# library, with the main build's tilec:
#   tests/fuzz/make_seeds.sh BUILD_DIR OUT_DIR
# OUT_DIR/pipeline/*.tile: one lib kernel each (its text and the file's constants only), with a
#   first line "//! arch=... kernel=... NAME=VALUE ..." (fuzz_pipeline.c): small tile shapes,
#   both targets, a few schedules and dtypes;
# OUT_DIR/ir/*.ir: the generic IR of each (tilec --emit=ir) and the GPU IR after each GPU
#   pass that changes the stage or the schedule (--dump-after; not after cse, dce, licm), plus tests/golden/ir and tests/golden/ir-invalid.
# The repository keeps only what `-merge=1` finds new (tests/fuzz/run.sh --merge-seeds does
# both steps), so the corpora stay small.
set -euo pipefail
BUILD=$1 OUT=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TILEC=$BUILD/tilec
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$OUT/pipeline" "$OUT/ir"

# kernel NAME of lib file F, with the file's top-level constants
extract() {
  awk -v k="$2" '/^const /{print; next}
                 /^[ \t]*\/\//{next}
                 $0 ~ "^kernel " k "[<( ]"{on=1}
                 on{print} on && /^}/{on=0}' "$ROOT/lib/$1.tile"
}

# seed NAME FILE KERNEL ARCH [SCHED] -- NAME=VALUE...
n=0
seed() {
  local name=$1 file=$2 kernel=$3 arch=$4 sched=$5
  shift 5
  local defs=("$@") line="//! arch=$arch kernel=$kernel"
  [ -n "$sched" ] && line+=" sched=$sched"
  local dflags=()
  for d in "${defs[@]}"; do line+=" $d"; dflags+=(-D "$d"); done
  local src="$OUT/pipeline/$name.tile"
  { echo "$line"; extract "$file" "$kernel"; } >"$src"
  # the generic IR and the GPU IR after each GPU pass
  "$TILEC" "$src" -k "$kernel" "${dflags[@]}" --emit=ir -o "$OUT/ir/$name.ir" 2>/dev/null || true
  local sflag=()
  [ -n "$sched" ] && sflag=(--schedule="$sched")
  "$TILEC" "$src" -k "$kernel" "${dflags[@]}" --arch="$arch" "${sflag[@]}" --emit=ptx --dump-after=all \
    -o /dev/null 2>&1 | awk -v out="$OUT/ir/$name" '
      /^\/\/ ----- IR after /{pass=$5; n++; f=""
                              if (pass !~ /^(canonicalize|fold|cse|dce|licm)$/) f=out "-" n "-" pass ".ir"; next}
      /^\/\/ ----- /{f=""; next}
      f{print > f}' || true
  n=$((n + 1))
}

SMALL=(BM=64 BN=64 BK=32 STAGES=2 NW=4)
for arch in sm_80 sm_90a; do
  seed "gemm_$arch" gemm gemm $arch "" "${SMALL[@]}"
  seed "gemm_bias_gelu_bf16_$arch" gemm gemm $arch "" "${SMALL[@]}" T=bf16 ACT=gelu HAS_BIAS=true
  seed "gemm_f32_tf32_$arch" gemm gemm $arch "" BM=32 BN=32 BK=16 STAGES=1 NW=4 T=f32 TF32=true SCALED=true
  seed "gemm_residual_silu_$arch" gemm gemm $arch "" BM=16 BN=32 BK=16 STAGES=3 NW=4 GROUP_M=1 ACT=silu HAS_RESIDUAL=true
  seed "bmm_$arch" gemm bmm $arch "" BM=32 BN=32 BK=16 STAGES=2 NW=4
  seed "bmm_shared_$arch" gemm bmm_shared $arch "" BM=64 BN=64 BK=32 STAGES=2 NW=4
  seed "linear_relu_$arch" linear linear $arch "" "${SMALL[@]}" ACT=relu HAS_BIAS=true
  seed "swiglu_$arch" linear swiglu $arch "" "${SMALL[@]}"
  seed "attention_$arch" attention attention $arch "" D=16 BM=64 BN=32 BNM=32 STAGES=2
  seed "attention_causal_lse_bf16_$arch" attention attention $arch "" T=bf16 D=32 BM=64 BN=16 BNM=16 STAGES=1 CAUSAL=true HAS_LSE=true
  seed "softmax_$arch" softmax softmax $arch "" BN=128 NW=1
  seed "softmax_f16_$arch" softmax softmax $arch "" T=f16 BN=512 NW=2
  seed "layernorm_$arch" layernorm layernorm $arch "" BN=128 NW=1
  seed "rmsnorm_bf16_$arch" rmsnorm rmsnorm $arch "" T=bf16 BN=256 NW=2
done
seed gemm_sm_90a_no_ws gemm gemm sm_90a ws=0 "${SMALL[@]}"
seed gemm_sm_90a_no_tma gemm gemm sm_90a tma=0,persistent=0 "${SMALL[@]}"
seed gemm_sm_90a_no_wgmma gemm gemm sm_90a wgmma=0 "${SMALL[@]}"
seed gemm_sm_90a_wait0 gemm gemm sm_90a wait=0,regs=40/232 "${SMALL[@]}"
seed bmm_sm_90a_no_persistent gemm bmm sm_90a persistent=0 BM=64 BN=64 BK=32 STAGES=3 NW=4
seed attention_sm_90a_no_ws attention attention sm_90a ws=0 D=64 BM=64 BN=64 BNM=64 STAGES=2 NW=4

for f in "$ROOT"/tests/golden/ir/*/*.ir "$ROOT"/tests/golden/ir/*/*.out "$ROOT"/tests/golden/ir-invalid/*.ir; do
  rel=${f#"$ROOT"/tests/golden/}
  cp "$f" "$OUT/ir/golden-${rel//\//-}"
done
echo "make_seeds: $n pipeline seeds in $OUT/pipeline, $(ls "$OUT/ir" | wc -l) IR seeds in $OUT/ir"
