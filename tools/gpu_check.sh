#!/usr/bin/env bash
# gpu_check.sh - every GPU check of the project in one run, with a PASS/FAIL table at the end.
#
# Meant for the GPU machine, which cannot build libtile.so (no LLVM, flex or bison there): it
# runs binaries built elsewhere by tools/carry.sh, and the kernels in lib/. From the
# repository root:
#
#   here:              tools/carry.sh                       (fills ./.carry)
#   on the GPU:        bash tools/gpu_check.sh [CARRY_DIR]   (default ./.carry)
#
# What it runs, in order:
#   1. cuda_smoke: the Driver API layer on its own (no GPU: everything else is skipped);
#   2. the examples (on the GPU; each compares with its own C loop), and the ahead-of-time
#      GEMM: `tilec aot` launchers built with this machine's cc and -lcuda only
#      (tools/aot_gemm.c), checked against a double reference, against the JIT kernel's
#      result on the same inputs, and timed against it in the same process;
#   3. every lib kernel with `tilec run --device=cuda --check` (the GPU result against the
#      CPU interpreter on the same random inputs), over ragged and aligned shapes (sizes 1,
#      7, 33, 1000, 4095 in the relevant dimensions), T=f32/f16/bf16 where the kernel takes
#      them, the GEMM epilogues and tile configurations, attention with causal masking,
#      grouped-query heads, LSE output and other head sizes;
#   4. every lib kernel under compute-sanitizer memcheck, racecheck and synccheck on ragged
#      shapes, if compute-sanitizer is installed;
#   5. bench_compile (cold and cached compile times) and a few `tilec run --bench` timings;
#   6. the Python wheel: installed with pip, its pytest suite, the launch overhead vs Triton;
#   7. profiling: a TILE_TRACE file, and ncu's NVTX kernel names and .tile source lines.
# It takes a few minutes on an H200. Checks that would start after TIME_BUDGET seconds are
# not run (listed as SKIP), so that the table is printed within a 10-minute command limit.
#
# Environment:
#   OUT=dir          write the full log (every command and all its output) to dir/gpu_check.log
#                    and the final table to dir/gpu_check_table.txt (else a temporary folder)
#   ONLY=regex       run only the checks whose "kernel config" matches (ONLY='^attention')
#   DEVICE=cpu       dry run on the CPU interpreter (no GPU needed; the checks compare the
#                    interpreter with itself, so this tests the script, not the kernels)
#   SANITIZE=0       skip the compute-sanitizer runs;  BENCH=0  skip the timings
#   CHECK_TIMEOUT=s  the time limit of one check (default 120)
#   TIME_BUDGET=s    start no check after this many seconds (default 450; with the
#                    check time limit that ends the script inside 10 minutes)
#   SEED=n           the inputs' random seed (default 1)
#
# Exit status: 0 when every check passed, 1 when any failed (or timed out), 77 when none
# failed but some were skipped (no GPU), 2 when the carried binaries are missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

CARRY=$(cd "${1:-.carry}" 2>/dev/null && pwd) || {
  echo "gpu_check: no folder '${1:-.carry}': build it with tools/carry.sh" >&2
  exit 2
}
# tools/carry.sh carries libtile.so inside the Python wheel only (the transfer limit)
WHEEL=$(ls "$CARRY"/tile_lang-*.whl 2>/dev/null | head -1)
if [ ! -e "$CARRY/libtile.so" ] && [ -n "$WHEEL" ]; then
  python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("tile/libtile.so"))' \
    "$WHEEL" "$CARRY/libtile.so" && chmod +x "$CARRY/libtile.so"
fi
for f in libtile.so tilec bench_compile cuda_smoke; do
  [ -e "$CARRY/$f" ] || { echo "gpu_check: $CARRY/$f is missing: run tools/carry.sh" >&2; exit 2; }
done
export LD_LIBRARY_PATH="$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TILE_LIB_DIR="$PWD/lib" # where the examples and bench_compile find the kernels
export TILE_CACHE_DIR=""        # no on-disk kernel cache: every run compiles
TILEC=$CARRY/tilec
DEVICE=${DEVICE:-cuda}
ONLY=${ONLY:-}
SEED=${SEED:-1}
CHECK_TIMEOUT=${CHECK_TIMEOUT:-120}
TIME_BUDGET=${TIME_BUDGET:-450}

LOG_DIR=${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$LOG_DIR"
LOG=$LOG_DIR/gpu_check.log
TABLE=$LOG_DIR/gpu_check_table.txt
: >"$LOG"

# ---- running one check ---------------------------------------------------------------------

# One row per check: result, kernel, config, shape, dtype, error (the worst measured error,
# a timing, or the last line of output on failure).
R_RESULT=() R_KERNEL=() R_CONFIG=() R_SHAPE=() R_DTYPE=() R_ERROR=()

with_timeout() {
  if command -v timeout >/dev/null 2>&1; then timeout -k 10 "$CHECK_TIMEOUT" "$@"; else "$@"; fi
}

# The "error" column from a command's output.
summarize() {
  local out=$1 rc=$2 s
  # tilec --check: "check NAME rel_l2=... max_abs=... nan=..." per output; keep the worst
  s=$(printf '%s\n' "$out" | awk '
    $1 == "check" { for (i = 2; i <= NF; i++) if ($i ~ /^rel_l2=/) { v = substr($i, 8);
      if (n == 0 || v + 0 > m + 0) m = v; n++ }; if ($0 ~ /nan=[1-9]/) nan = 1 }
    END { if (n) printf "rel_l2 %s%s", m, nan ? " (NaN)" : "" }')
  # the examples: "relative L2 error X"
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | awk '
    { for (i = 1; i + 3 <= NF; i++) if ($i == "relative" && $(i+1) == "L2" && $(i+2) == "error") {
        v = $(i+3); sub(/,$/, "", v); if (n == 0 || v + 0 > m + 0) m = v; n++ } }
    END { if (n) printf "rel_l2 %s", m }')
  # tilec --bench: "time median X ms (min ...), T TFLOP/s, G GB/s"
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | sed -n 's/^ *time median \([0-9.]*\) ms.* runs)\(.*\)/\1 ms\2/p' | head -1)
  # bench_compile: the cold compile of the first gemm and attention rows
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | awk -F'|' '
    /^(gemm|attention) / && NF == 3 { split($1, a, " "); split($2, b, " ");
      if (!(a[1] in seen) && b[3] != "-") { seen[a[1]] = 1; printf "%s%s cold %s ms", sep, a[1], b[3]; sep = ", " } }')
  # cuda_smoke: "PASS name" / "FAIL name" lines
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | awk '$1 == "PASS" { p++ } $1 == "FAIL" { f++ }
    END { if (p + f) printf "%d of %d smoke checks passed", p, p + f }')
  # the profiling checks' last line
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | grep -E "^(ncu: |[0-9]+ events)" | tail -1)
  # pytest: "12 passed, 1 skipped in 3.1s"; tools/bench_python.py: the ratio line
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | grep -oE '^[0-9]+ (passed|failed).* in [0-9.]+s' | tail -1)
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | sed -n 's/^tile \/ triton host time per launch: \([0-9.]*x\).*/tile\/triton launch time \1/p')
  # compute-sanitizer: "ERROR SUMMARY: n errors"
  [ -z "$s" ] && s=$(printf '%s\n' "$out" | grep -o 'ERROR SUMMARY: [0-9]* error[s]*' | head -1)
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    local last
    last=$(printf '%s\n' "$out" | grep -v '^[[:space:]]*$' | tail -1 | sed 's/^[[:space:]]*//' | cut -c1-90)
    s="${s:+$s; }$last"
  elif [ "$rc" -eq 77 ] && [ -z "$s" ]; then
    s=$(printf '%s\n' "$out" | grep -v '^[[:space:]]*$' | tail -1 | cut -c1-90)
  fi
  printf '%s' "$s"
}

# check KERNEL CONFIG SHAPE DTYPE COMMAND [ARGS...]: runs the command, logs it, records a row.
check() {
  local kernel=$1 config=$2 shape=$3 dtype=$4
  shift 4
  if [ -n "$ONLY" ] && ! [[ "$kernel $config" =~ $ONLY ]]; then return 0; fi
  local start=$SECONDS out rc result err
  if [ "$SECONDS" -ge "$TIME_BUDGET" ]; then
    R_RESULT+=(SKIP) R_KERNEL+=("$kernel") R_CONFIG+=("$config") R_SHAPE+=("$shape")
    R_DTYPE+=("$dtype") R_ERROR+=("not run: the time budget ($TIME_BUDGET s) was used up")
    printf '\n=== %s | %s | %s | %s\nnot run: time budget\n' "$kernel" "$config" "$shape" "$dtype" >>"$LOG"
    return 0
  fi
  printf '\n=== %s | %s | %s | %s\n$ %s\n' "$kernel" "$config" "$shape" "$dtype" "$*" >>"$LOG"
  out=$(with_timeout "$@" 2>&1)
  rc=$?
  printf '%s\n--- exit status %d after %d s\n' "$out" "$rc" $((SECONDS - start)) >>"$LOG"
  case $rc in
  0) result=PASS ;;
  77) result=SKIP ;;
  124 | 137) result=TIMEOUT ;;
  *) result=FAIL ;;
  esac
  err=$(summarize "$out" "$rc")
  [ "$result" = TIMEOUT ] && err="over ${CHECK_TIMEOUT} s; $err"
  R_RESULT+=("$result") R_KERNEL+=("$kernel") R_CONFIG+=("$config") R_SHAPE+=("$shape")
  R_DTYPE+=("$dtype") R_ERROR+=("$err")
  printf '%-7s %-10s %-44s %-30s %-5s %s (%d s)\n' "$result" "$kernel" "$config" "$shape" "$dtype" \
    "$err" $((SECONDS - start))
}

# The element type a kernel uses when T is not set.
default_dtype() {
  case $1 in
  gemm | bmm | bmm_shared | linear | swiglu | attention) echo f16 ;;
  *) echo f32 ;;
  esac
}

# Expands "A=1,B=2" into repeated "FLAG A=1 FLAG B=2" words in the array named by $3.
expand() {
  local -n into=$3
  local item items
  IFS=, read -ra items <<<"$2"
  for item in "${items[@]}"; do [ -n "$item" ] && into+=("$1" "$item"); done
}

# tk FILE KERNEL DEFINES SIZES [SCALARS] [EXTRA tilec ARGS...]: one `tilec run --check`.
# FILE is in lib/, or a path from the repository root (tests/kernels/...).
# DEFINES and SCALARS are comma-separated NAME=VALUE lists ("" for none).
tk() {
  local file=$1 kernel=$2 defs=$3 sizes=$4 scalars=${5:-}
  shift 5 2>/dev/null || shift $#
  local args=() dtype config
  expand -D "$defs" args
  expand -a "$scalars" args
  dtype=$(printf '%s\n' "$defs" | tr ',' '\n' | sed -n 's/^T=//p')
  config=$(printf '%s\n' "$defs" | tr ',' '\n' | grep -v '^T=' | paste -sd, -)
  check "$kernel" "${config:-default}${TK_TAG:-}" "$sizes" "${dtype:-$(default_dtype "$kernel")}" \
    "$TILEC" run "$(case $file in */*) echo "$file" ;; *) echo "lib/$file" ;; esac)" -k "$kernel" "${args[@]}" --size "$sizes" --device="$DEVICE" \
    --check --seed="$SEED" ${TK_EXTRA:-} "$@"
}

# ---- header --------------------------------------------------------------------------------

{
  echo "gpu_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -n), device=$DEVICE"
  echo "binaries:  $CARRY ($("$TILEC" --version 2>&1))"
  [ -f "$CARRY/MANIFEST" ] && sed 's/^/           /' "$CARRY/MANIFEST"
  command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu:       /'
  echo "log:       $LOG"
} | tee -a "$LOG"
echo

# ---- 1. the driver layer -------------------------------------------------------------------

only_saved=$ONLY ONLY="" # always run: it decides whether the rest can run
check cuda_smoke driver-layer - - "$CARRY/cuda_smoke"
ONLY=$only_saved
if [ "${R_RESULT[0]}" = SKIP ] && [ "$DEVICE" = cuda ]; then
  echo "gpu_check: no usable GPU here (cuda_smoke skipped): the GPU checks are skipped" | tee -a "$LOG"
  ONLY='^$' # nothing more matches; the table below shows the one row
fi

# ---- 2. the examples (each checks itself against a C loop) -------------------------------

for ex in "$CARRY"/example_*; do
  [ -x "$ex" ] || continue
  name=${ex##*/example_}
  case $name in
  gemm_bias_gelu | attention) dt=bf16 ;;
  *) dt=f32 ;;
  esac
  if [ "$DEVICE" = cuda ]; then # an example falls back to the CPU by itself: not here
    # shellcheck disable=SC2016 # expanded by the inner bash
    check example "$name" default "$dt" bash -c 'out=$("$@" 2>&1); rc=$?; printf "%s\n" "$out"
      if [ $rc -eq 0 ] && grep -q "^device: CPU" <<<"$out"; then
        echo "FAIL: the example ran on the CPU interpreter, not the GPU"; exit 1; fi
      exit $rc' example "$ex"
  else
    check example "$name" default "$dt" "$ex"
  fi
done

# ---- 2b. the ahead-of-time GEMM (tilec aot) --------------------------------------------------
# The carried tilec writes gemm_aot.{h,c} (sm_90a and sm_80 PTX; cubins too when ptxas is
# here); tools/aot_gemm.c is built against them with this machine's cc and -lcuda only (no
# libtile: ldd must not show it), and again with -DAOT_WITH_JIT and libtile to compare with
# the JIT kernel. Rows: build, result (against double), AOT vs JIT result, AOT vs JIT time.

AOT_DIR=$LOG_DIR/aot
# aot_cc OUT EXTRA...: cc with -lcuda; where the driver package has no libcuda.so link, the
# toolkit's stub, then libcuda.so.1 itself by name
aot_cc() {
  local out=$1 try
  shift
  for try in "-lcuda" "-L/usr/local/cuda/lib64/stubs -lcuda" \
    "-L$(dirname "$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')" 2>/dev/null || echo /) -l:libcuda.so.1"; do
    # shellcheck disable=SC2086 # try holds several words
    "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -o "$out" "$@" $try -lpthread -lm && return 0
  done
  return 1
}
# shellcheck disable=SC2016 # expanded by the inner bash
aot_build='set -e; dir=$1 carry=$2; rm -rf "$dir"; mkdir -p "$dir"
  "$carry/tilec" aot lib/gemm.tile -k gemm --arch=sm_90a,sm_80 -o "$dir/gemm_aot"
  grep -c "_cubin\[" "$dir/gemm_aot.c" >/dev/null && echo "cubins embedded" || echo "PTX only (no ptxas here)"
  aot_cc "$dir/aot_gemm" -I "$dir" tools/aot_gemm.c "$dir/gemm_aot.c"
  if ldd "$dir/aot_gemm" | grep -E "libtile|LLVM"; then echo "FAIL: links libtile or LLVM"; exit 1; fi
  aot_cc "$dir/aot_gemm_jit" -DAOT_WITH_JIT -I "$dir" -I runtime/include tools/aot_gemm.c "$dir/gemm_aot.c" \
    -L "$carry" -ltile -Wl,-rpath,"$carry"
  echo "built $dir/aot_gemm (cc + -lcuda) and $dir/aot_gemm_jit"'
if [ "$DEVICE" = cuda ]; then
  export -f aot_cc
  check aot_gemm "build: tilec aot + cc -lcuda" - f16 bash -c "$aot_build" aot_build "$AOT_DIR" "$CARRY"
  if [ -x "$AOT_DIR/aot_gemm" ]; then
    for s in "1024 1024 1024" "4096 4096 4096" "4096 8192 1024"; do
      # shellcheck disable=SC2086
      check aot_gemm "result vs double" "M,N,K=${s// /,}" f16 "$AOT_DIR/aot_gemm" check $s
      # shellcheck disable=SC2086
      check aot_gemm "result vs JIT" "M,N,K=${s// /,}" f16 "$AOT_DIR/aot_gemm_jit" compare $s
    done
    check aot_gemm "time vs JIT" "M,N,K=4096,4096,4096" f16 "$AOT_DIR/aot_gemm_jit" bench 4096 4096 4096
    check aot_gemm "time vs JIT" "M,N,K=8192,8192,8192" f16 "$AOT_DIR/aot_gemm_jit" bench 8192 8192 8192
  fi
fi

# ---- 3. every lib kernel against the interpreter -------------------------------------------

AB="alpha=1,beta=0"
# gemm: sizes M,N,K. Ragged shapes keep the product modest (the interpreter costs ~1 s per
# 1e9 multiply-adds); 1000^3 runs once.
for s in M=1,N=1,K=1 M=7,N=33,K=1000 M=33,N=7,K=100 M=1000,N=1000,K=1000 M=4095,N=33,K=64 \
  M=64,N=4095,K=33 M=33,N=64,K=4095 M=256,N=384,K=512; do
  tk gemm.tile gemm T=f16 "$s" "$AB"
done
for s in M=1,N=1,K=1 M=7,N=33,K=1000 M=4095,N=33,K=64 M=64,N=4095,K=33 M=33,N=64,K=4095 \
  M=256,N=384,K=512; do
  tk gemm.tile gemm T=bf16 "$s" "$AB"
done
for s in M=1,N=1,K=1 M=33,N=7,K=100 M=64,N=4095,K=33 M=33,N=64,K=4095 M=256,N=384,K=512; do
  tk gemm.tile gemm T=f32 "$s" "$AB"
done
for s in M=1,N=1,K=1 M=33,N=7,K=100 M=7,N=33,K=1000 M=64,N=4095,K=33 M=33,N=64,K=4095 \
  M=1000,N=1000,K=1000 M=256,N=384,K=512; do
  tk gemm.tile gemm T=f32,TF32=true "$s" "$AB"
done
tk gemm.tile gemm T=f32,TF32=true,BM=64,BN=128,BK=16,NW=4 M=129,N=200,K=72 "$AB"
# 64-row tiles over two warpgroups: wgmma with the warpgroups splitting N (64 columns each),
# and its mma.sync fallback (32 columns each: MN-major B needs 64)
tk gemm.tile gemm T=f16,BM=64,BN=128,NW=8 M=129,N=200,K=72 "$AB"
tk gemm.tile gemm T=bf16,BM=64,BN=64,NW=8 M=129,N=200,K=72 "$AB"
# epilogues, on a ragged shape
E=M=129,N=200,K=72
for d in ACT=relu ACT=gelu ACT=silu SCALED=true HAS_BIAS=true HAS_RESIDUAL=true \
  SCALED=true,HAS_BIAS=true,ACT=gelu,HAS_RESIDUAL=true; do
  tk gemm.tile gemm "T=f16,$d" "$E" "alpha=0.5,beta=-1.5"
done
tk gemm.tile gemm T=bf16,ACT=gelu,HAS_BIAS=true "$E" "$AB"
tk gemm.tile gemm T=bf16,SCALED=true,HAS_BIAS=true,ACT=silu,HAS_RESIDUAL=true "$E" "alpha=2,beta=0.25"
tk gemm.tile gemm T=f32,ACT=silu,HAS_BIAS=true,HAS_RESIDUAL=true "$E" "$AB"
# tile configurations
for d in BM=64,BN=64,BK=16,STAGES=1 BM=64,BN=128,BK=64,STAGES=4,NW=8 BM=256,BN=128,NW=8 \
  BM=32,BN=32,BK=16,STAGES=2,GROUP_M=1 GROUP_M=16 BM=128,BN=256,BK=64,NW=8; do
  tk gemm.tile gemm "T=f16,$d" M=300,N=500,K=200 "$AB"
done

# the Hopper schedule (TMA rings, warp specialization, async wgmma) and each part switched
# off, on shapes whose rows are 16-byte multiples (TMA-eligible) with ragged M, N and K
for sch in default persistent=0 ws=0 tma=0 wait=0 tma=0,wait=0; do
  for s in M=8,N=8,K=8 M=129,N=200,K=72 M=256,N=384,K=512 M=520,N=264,K=1032 M=1000,N=1000,K=1000; do
    TK_TAG=" sched=$sch" tk gemm.tile gemm T=f16 "$s" "$AB" "--schedule=${sch#default}"
  done
  TK_TAG=" sched=$sch" tk gemm.tile gemm T=bf16,ACT=gelu,HAS_BIAS=true M=129,N=200,K=72 "$AB" "--schedule=${sch#default}"
done
for d in STAGES=2 STAGES=4 BM=256,BN=128 BM=64,BN=128,NW=4 BK=32,STAGES=5 GROUP_M=1; do
  tk gemm.tile gemm "T=f16,$d" M=520,N=264,K=1032 "$AB"
done

# other forms of the product (lib/linear.tile; bmm_shared): W stored [N, K], two products of
# one X block, a batch with one B; ragged and TMA-eligible shapes
for s in M=1,N=8,K=8 M=33,N=7,K=100 M=129,N=200,K=72 M=300,N=264,K=520; do
  tk linear.tile linear T=f16 "$s"
  tk linear.tile swiglu T=f16 "$s"
done
tk linear.tile linear T=bf16,ACT=gelu,HAS_BIAS=true M=129,N=200,K=72
tk linear.tile swiglu T=bf16,BM=64,NW=4 M=129,N=200,K=72
tk linear.tile linear T=f16 M=129,N=200,K=72 "" --schedule=persistent=0
tk linear.tile swiglu T=f16 M=300,N=264,K=520 "" --schedule=ws=0
for s in BATCH=1,M=1,N=8,K=8 BATCH=3,M=129,N=200,K=72 BATCH=2,M=33,N=7,K=100; do
  tk gemm.tile bmm_shared T=f16 "$s"
done

# bmm: sizes BATCH,M,N,K
for s in BATCH=1,M=1,N=1,K=1 BATCH=3,M=33,N=7,K=100 BATCH=2,M=1000,N=64,K=64 \
  BATCH=5,M=7,N=4095,K=33 BATCH=4,M=64,N=64,K=4095; do
  tk gemm.tile bmm T=f16 "$s"
done
tk gemm.tile bmm T=bf16 BATCH=3,M=33,N=7,K=100
tk gemm.tile bmm T=bf16 BATCH=2,M=256,N=128,K=64
tk gemm.tile bmm T=f16 BATCH=2,M=129,N=72,K=200
tk gemm.tile bmm T=f32 BATCH=3,M=33,N=7,K=100
tk gemm.tile bmm T=f32,TF32=true BATCH=2,M=256,N=128,K=64
tk gemm.tile bmm T=f16,BM=64,BN=64,BK=64,STAGES=2 BATCH=3,M=100,N=200,K=300

# repacking forced on (runtime/repack.c): unaligned A and B copied to aligned scratch first
# (by default only tensors of 256 KiB or more are)
export TILE_REPACK=1 TK_TAG=" repack"
for s in M=7,N=33,K=1000 M=33,N=7,K=100 M=4095,N=33,K=64 M=64,N=4095,K=33 M=33,N=64,K=4095 \
  M=300,N=516,K=300; do
  tk gemm.tile gemm T=f16 "$s" "$AB"
done
tk gemm.tile gemm T=bf16,SCALED=true,HAS_BIAS=true,ACT=gelu,HAS_RESIDUAL=true "$E" "alpha=2,beta=0.25"
tk gemm.tile gemm T=f32,TF32=true M=33,N=64,K=4095 "$AB"
tk gemm.tile gemm T=f32 M=64,N=4095,K=33 "$AB"
tk gemm.tile bmm T=f16 BATCH=5,M=7,N=4095,K=33
tk gemm.tile bmm T=bf16 BATCH=3,M=33,N=7,K=100
unset TILE_REPACK TK_TAG

# softmax, layernorm, rmsnorm: sizes M (rows), N (row length); N > BN takes the looped path
for k in softmax layernorm rmsnorm; do
  sc=""
  [ "$k" != softmax ] && sc="eps=1e-5"
  for s in M=1,N=1 M=7,N=33 M=33,N=1000 M=1000,N=1024 M=64,N=4095 M=7,N=8192 M=1000,N=4095; do
    tk "$k.tile" "$k" T=f32 "$s" "$sc"
  done
  for s in M=1,N=1 M=33,N=1000 M=64,N=4095 M=7,N=8192; do tk "$k.tile" "$k" T=f16 "$s" "$sc"; done
  for s in M=7,N=33 M=1000,N=1024 M=64,N=4095; do tk "$k.tile" "$k" T=bf16 "$s" "$sc"; done
  tk "$k.tile" "$k" T=f32,BN=64 M=33,N=1000 "$sc"
  tk "$k.tile" "$k" T=f16,BN=4096,NW=16 M=64,N=4095 "$sc"
  tk "$k.tile" "$k" T=f32,NW=1 M=7,N=33 "$sc"
  tk "$k.tile" "$k" T=bf16,BN=128,NW=8 M=1000,N=4095 "$sc"
  tk "$k.tile" "$k" T=f16,BN=8192,NW=16 M=7,N=8192 "$sc"  # one pass over a long row
  tk "$k.tile" "$k" T=f16,BN=256 M=9,N=2049 "$sc"         # rows off 16 bytes: loops from the boundary (row-align)
  tk "$k.tile" "$k" T=bf16,BN=512,NW=2 M=5,N=3001 "$sc"
  TK_TAG=" prefetch=1" tk "$k.tile" "$k" T=f32,BN=64 M=33,N=1000 "$sc" --schedule=prefetch=1
  # a vocabulary row in chunks, kept in shared memory (row-cache, on by default: PERF.md 113)
  tk "$k.tile" "$k" T=f16,BN=4096,NW=16 M=3,N=50257 "$sc"
  TK_TAG=" rowcache=0" tk "$k.tile" "$k" T=bf16,BN=4096,NW=16 M=2,N=50257 "$sc" --schedule=rowcache=0
  # a row in one 65536-wide tile on 16 warps: split across a cluster of 8 CTAs on sm_90
  # (cluster-rows, PERF.md 103), a vocabulary row shifted to its 16-byte boundary and a row
  # past the tile (the looped form, split too)
  tk "$k.tile" "$k" T=f16,BN=65536,NW=16 M=3,N=50257 "$sc"
  tk "$k.tile" "$k" T=bf16,BN=65536,NW=16 M=2,N=70001 "$sc"
  TK_TAG=" cluster=1" tk "$k.tile" "$k" T=f16,BN=65536,NW=16 M=2,N=50257 "$sc" --schedule=cluster=1
done

# kernels written from SPEC.md as a user would (tests/kernels/user_misc.tile: products
# with transposed operands, fused epilogues over whole rows, sliding-window and GQA
# attention, a depthwise convolution), on ragged shapes
tk tests/kernels/user_misc.tile gemm_tn T=f16 M=100,K=70,N=130
tk tests/kernels/user_misc.tile linear_ln T=bf16 M=70,K=96,N=200 eps=1e-5
tk tests/kernels/user_misc.tile swa T=f16 BH=3,S=300 scale=0.125
tk tests/kernels/user_misc.tile bgemm "" Bt=2,M=70,K=40,N=90
tk tests/kernels/user_misc.tile gemm_softmax T=f16 M=70,K=64,N=100
tk tests/kernels/user_misc.tile conv1d T=f16 Bt=2,L=100,C=130
tk tests/kernels/user_misc.tile linear_t T=bf16 M=70,K=64,N=150
tk tests/kernels/user_misc.tile gqa T=f16 B=1,H=4,HKV=2,S=200 scale=0.125
tk tests/kernels/user_misc.tile gemm_rms T=f16 M=70,K=64,N=200 eps=1e-5
tk tests/kernels/moe_scatter.tile moe_scatter T=f16 M=40,K=64,N=128,R=1
tk tests/kernels/mlp2.tile mlp2 T=f16 M=100,K=64,H=130,D=64

# user-written row kernels (tests/kernels/user_rows.tile: cross-entropy and its gradient,
# add + RMSNorm with an i32 count, min-max scaling, three-loop log-softmax) in the looped,
# one-tile and cluster forms, on ragged rows
for k in xent addnorm minmax logsoftmax; do
  tk tests/kernels/user_rows.tile "$k" T=f16 M=7,N=1000 eps=1e-5
  tk tests/kernels/user_rows.tile "$k" T=bf16,BN=4096,NW=8 M=5,N=4095 eps=1e-5
  tk tests/kernels/user_rows.tile "$k" T=f16,BN=65536,NW=16 M=3,N=50257 eps=1e-5
  tk tests/kernels/user_rows.tile "$k" T=f32,BN=65536,NW=16 M=2,N=65536 eps=1e-5
  # the looped form over rows off 16 bytes, the row kept in shared memory (row-cache, on by
  # default: PERF.md 113), and without it
  tk tests/kernels/user_rows.tile "$k" T=f16,BN=1024,NW=4 M=5,N=20011 eps=1e-5
  TK_TAG=" rowcache=0" tk tests/kernels/user_rows.tile "$k" T=bf16,BN=1024,NW=4 M=3,N=20011 eps=1e-5 --schedule=rowcache=0
done

# The language features (scans, gathers, masked stores, atomics, fp8, and the kernels built on
# them) on both GPU tiers: the Hopper tier (the H200's own), then the Ampere tier (sm_80 code,
# which the H200 also runs: mma.sync, cp.async, no TMA or wgmma), as rows tagged "sm_80".
lang_checks() {
  # scans (lib/scan.tile): cumsum along rows in BN chunks (REVERSE: from the end), cummax down
  # columns in BM chunks; axes within a thread, across lanes and across warps
  for s in M=1,N=1 M=7,N=33 M=33,N=1000 M=64,N=4095; do
    tk scan.tile cumsum T=f32 "$s"
    tk scan.tile cummax T=f32 "$s"
  done
  tk scan.tile cumsum T=f16,BM=16,BN=64,NW=1,REVERSE=true M=33,N=1000
  tk scan.tile cumsum T=bf16,BM=1,BN=1024,NW=8 M=7,N=4095
  tk scan.tile cumsum T=f32,BM=8,BN=512,NW=2,REVERSE=true M=100,N=3000
  tk scan.tile cummax T=f16,BM=128,BN=64,NW=8 M=1000,N=100
  tk scan.tile cummax T=f32,BM=16,BN=8,NW=1 M=70,N=13

  # gathers, masked stores and atomics (tests/kernels/memory_ops.tile; the order of atomic f32
  # additions differs from the interpreter's: within --check's tolerance; kernels whose result
  # depends on the order of racing writes, scatters with duplicate positions and the old
  # values of atomic_max, are checked on the interpreter only). Random i32 inputs lie in
  # [-32, 32): half the indices are out of range, so masking is exercised.
  for s in M=1,N=1,K=1 M=7,N=33,K=17 M=33,N=40,K=100 M=64,N=31,K=4095 M=256,N=256,K=1024; do
    tk tests/kernels/memory_ops.tile splitk "" "$s"
  done
  for s in M=1,N=1 M=7,N=33 M=33,N=32 M=1000,N=20; do tk tests/kernels/memory_ops.tile rowmask "" "$s"; done
  for s in N=1,NB=1 N=1000,NB=7 N=4095,NB=33; do tk tests/kernels/memory_ops.tile hist "" "$s"; done
  for s in N=1 N=1000 N=4095; do tk tests/kernels/memory_ops.tile total "" "$s"; done
  for s in N=1,S=1 N=333,S=40; do tk tests/kernels/memory_ops.tile umax "" "$s"; done
  # a product over gathered rows (tests/kernels/gather_gemm.tile: the gather copied by
  # cp.async and pipelined; indices in [-32, 32): half the rows zero); rows that are
  # not 16-byte multiples: the register path of the same copy
  for s in M=1,K=16,N=8,R=1 M=40,K=100,N=33,R=7 M=64,K=256,N=128,R=300; do
    tk tests/kernels/gather_gemm.tile gather_gemm "" "$s"
  done
  tk tests/kernels/gather_gemm.tile gather_gemm BM=16,NW=1 M=50,K=1000,N=70,R=129
  tk tests/kernels/gather_gemm.tile gather_gemm T=bf16,BM=128,NW=8 M=64,K=64,N=256,R=200
  tk tests/kernels/gather_gemm.tile gather_gemm "" M=40,K=99,N=33,R=70 # K=99: rows not 16-byte multiples
  # products with N = 8 (tests/kernels/narrow_dot.tile): mma.sync m16n8k16 and TF32 m16n8k8 at
  # one and eight warps, wgmma m64n8k16 (narrow_t at four warps on sm_90a: B K-major); K=70
  # rows are not 16-byte multiples (no TMA)
  for s in M=1,K=16,N=1 M=33,K=70,N=7 M=300,K=256,N=40; do
    tk tests/kernels/narrow_dot.tile narrow T=f16 "$s"
    tk tests/kernels/narrow_dot.tile narrow T=bf16,BM=128,NW=8 "$s"
    tk tests/kernels/narrow_dot.tile narrow T=f32,BM=16,NW=1 "$s"
    tk tests/kernels/narrow_dot.tile narrow_t T=f16 "$s"
    tk tests/kernels/narrow_dot.tile narrow_t T=bf16,BM=16,NW=1 "$s"
    tk tests/kernels/narrow_dot.tile narrow_t T=f16,BM=128,NW=8,BN=16 "$s"
  done
  # fp8 storage (software conversions, the same as the interpreter's): quantize and dequantize,
  # and a group-dequantizing product (an accumulator carried through two nested loops)
  for s in N=1 N=1000 N=4095; do tk tests/kernels/fp8.tile roundtrip "" "$s"; done
  for s in M=1,N=1,K=64,KG=1 M=33,N=65,K=256,KG=4 M=100,N=40,K=1024,KG=16; do
    tk tests/kernels/fp8.tile dequant_gemm "" "$s"
  done
  # paged decode attention (lib/decode_attention.tile): random block tables and lengths (pages
  # outside the pool are masked); the split and combine kernels separately. Pages of 8, 16
  # and 64 tokens take the shift form of pos / PAGE (a power of two: canonicalize), 12 and
  # 24 the division
  for s in B=1,H=1,HKV=1,NP=5,PAGE=8,MAXP=4,S=1 B=3,H=8,HKV=2,NP=40,PAGE=16,MAXP=8,S=4 B=2,H=32,HKV=8,NP=64,PAGE=64,MAXP=32,S=3 \
    B=3,H=8,HKV=2,NP=40,PAGE=12,MAXP=8,S=4 B=2,H=4,HKV=1,NP=30,PAGE=24,MAXP=12,S=3 B=2,H=32,HKV=2,NP=40,PAGE=16,MAXP=16,S=2; do
    tk decode_attention.tile decode_split T=f16 "$s" "scale=0.088"
  done
  # a group of 16 heads in one program (BG=16), pages of whole 32-key blocks, hd256 in one warp
  tk decode_attention.tile decode_split T=bf16,BG=16,BN=32 B=2,H=32,HKV=2,NP=40,PAGE=32,MAXP=8,S=2 "scale=0.088"
  tk decode_attention.tile decode_split T=f16,D=256 B=2,H=8,HKV=2,NP=40,PAGE=16,MAXP=16,S=3 "scale=0.0625"
  tk decode_attention.tile decode_split T=bf16,D=64,BN=64 B=3,H=4,HKV=4,NP=40,PAGE=8,MAXP=16,S=2 "scale=0.125"
  # the same with gathers through registers (--schedule=gather=0: no cp.async gathers)
  TK_TAG="${TK_TAG:-} gather=0" tk decode_attention.tile decode_split T=f16 B=3,H=8,HKV=2,NP=40,PAGE=16,MAXP=8,S=4 "scale=0.088" --schedule=gather=0
  TK_TAG="${TK_TAG:-} gather=0" tk decode_attention.tile decode_split T=bf16,D=64 B=2,H=32,HKV=8,NP=64,PAGE=8,MAXP=32,S=3 "scale=0.125" --schedule=gather=0
  TK_TAG="${TK_TAG:-} gather=0" tk tests/kernels/gather_gemm.tile gather_gemm "" M=40,K=100,N=33,R=70 "" --schedule=gather=0
  # the block-table and row-index loads one iteration ahead of the copies they address
  TK_TAG="${TK_TAG:-} prefetch=1" tk decode_attention.tile decode_split T=f16 B=3,H=8,HKV=2,NP=40,PAGE=16,MAXP=8,S=4 "scale=0.088" --schedule=prefetch=1
  TK_TAG="${TK_TAG:-} prefetch=1" tk decode_attention.tile decode_split T=bf16,D=64,BN=64 B=2,H=32,HKV=8,NP=64,PAGE=8,MAXP=32,S=3 "scale=0.125" --schedule=prefetch=1
  TK_TAG="${TK_TAG:-} prefetch=1" tk tests/kernels/gather_gemm.tile gather_gemm "" M=40,K=100,N=33,R=70 "" --schedule=prefetch=1
  for s in B=1,H=1,S=1 B=3,H=8,S=5 B=7,H=32,S=16; do tk decode_attention.tile decode_combine T=f16 "$s"; done
  # attention backward (lib/attention_bwd.tile): each kernel against the interpreter on random
  # inputs (LSE and delta random too: the kernels' arithmetic, not gradients; the gradients
  # are checked against PyTorch's in tools/bench_examples.py)
  for s in B=1,H=1,HKV=1,N=1,NK=1 B=2,H=4,HKV=2,N=33,NK=70 B=1,H=2,HKV=2,N=300,NK=300; do
    tk attention_bwd.tile attention_bwd_pre T=f16 "$s"
    tk attention_bwd.tile attention_bwd_dkdv T=f16 "$s" "scale=0.125"
    tk attention_bwd.tile attention_bwd_dq T=f16 "$s" "scale=0.125"
  done
  tk attention_bwd.tile attention_bwd_dkdv T=bf16,D=128,CAUSAL=true B=1,H=2,HKV=1,N=200,NK=200 "scale=0.088"
  tk attention_bwd.tile attention_bwd_dq T=bf16,D=128,CAUSAL=true B=1,H=2,HKV=1,N=200,NK=200 "scale=0.088"
  tk attention_bwd.tile attention_bwd_dkdv T=bf16,D=128 B=1,H=4,HKV=2,N=333,NK=333 "scale=0.088"
  tk attention_bwd.tile attention_bwd_dkdv T=f16,CAUSAL=true B=2,H=4,HKV=1,N=257,NK=257 "scale=0.125"
  # the fused form (dQ by atomics: TMA reduce-adds on sm_90a) and its cast
  tk attention_bwd.tile attention_bwd_fused T=bf16,D=128,CAUSAL=true B=1,H=4,HKV=2,N=200,NK=200 "scale=0.088"
  tk attention_bwd.tile attention_bwd_fused T=f16 B=1,H=2,HKV=1,N=130,NK=130 "scale=0.125"
  tk attention_bwd.tile attention_bwd_fused T=f16,CAUSAL=true B=2,H=4,HKV=1,N=257,NK=257 "scale=0.125"
  tk attention_bwd.tile attention_bwd_fused T=bf16 B=1,H=4,HKV=2,N=1000,NK=1000 "scale=0.125" # hd64: K in 64-byte panels
  TK_TAG="${TK_TAG:-} early=0" tk attention_bwd.tile attention_bwd_fused T=bf16,D=128,CAUSAL=true B=1,H=4,HKV=2,N=200,NK=200 "scale=0.088" --schedule=early=0
  # the producer warp issuing dQ's reduce-adds (bulk-writer, schedule writer=1; PERF.md 116)
  TK_TAG="${TK_TAG:-} writer=1" tk attention_bwd.tile attention_bwd_fused T=bf16,D=128,CAUSAL=true B=1,H=4,HKV=2,N=200,NK=200 "scale=0.088" --schedule=writer=1
  TK_TAG="${TK_TAG:-} writer=1" tk attention_bwd.tile attention_bwd_fused T=bf16 B=1,H=4,HKV=2,N=1000,NK=1000 "scale=0.125" --schedule=writer=1
  TK_TAG="${TK_TAG:-} writer=1" tk attention_bwd.tile attention_bwd_fused T=f16,CAUSAL=true B=2,H=4,HKV=1,N=257,NK=257 "scale=0.125" --schedule=writer=1
  # 128 queries per step at hd64 (the default since PERF.md 117; their 512-byte LSE rows
  # through the ring), with writer=1 and FlashAttention-3's register split; the form before 117
  TK_TAG="${TK_TAG:-} w1r24" tk attention_bwd.tile attention_bwd_fused T=bf16 B=1,H=4,HKV=2,N=1000,NK=1000 "scale=0.125" --schedule=writer=1,regs=24/240
  TK_TAG="${TK_TAG:-} w1r24" tk attention_bwd.tile attention_bwd_fused T=f16,CAUSAL=true B=2,H=4,HKV=1,N=257,NK=257 "scale=0.125" --schedule=writer=1,regs=24/240
  tk attention_bwd.tile attention_bwd_fused T=bf16,BM=64 B=1,H=4,HKV=2,N=1000,NK=1000 "scale=0.125"
  tk tools/exp/attention_bwd_unfolded.tile attention_bwd_fused T=bf16 B=1,H=4,HKV=2,N=1000,NK=1000 "scale=0.125"
  tk attention_bwd.tile attention_bwd_dq_scale T=bf16,D=128 B=1,H=3,N=77 "scale=0.088"
  # the one-kernel experiment (dQ by atomics; its product over two warpgroups along N)
  tk tools/exp/attention_bwd_atomic.tile attention_bwd_atomic T=bf16,D=128,CAUSAL=true B=1,H=4,HKV=2,N=200,NK=200 "scale=0.088"
  tk tools/exp/attention_bwd_atomic.tile attention_bwd_atomic T=f16 B=1,H=2,HKV=1,N=130,NK=130 "scale=0.125"
  # the examples (varlen attention needs valid sequence offsets: tools/bench_examples.py checks it)
  tk examples/embedding_bag.tile embedding_bag T=f32 V=1000,B=33,DIM=64
  tk examples/embedding_bag.tile embedding_bag T=f16,L=32,BD=256 V=50,B=7,DIM=1000
  tk examples/splitk_gemm.tile splitk_gemm T=f16 M=16,N=4095,K=8192
  tk examples/splitk_gemm.tile splitk_gemm T=bf16,BM=64,BN=128,SPLIT=4 M=7,N=33,K=1000
}
lang_checks
TK_TAG=" sm_80" TK_EXTRA="--arch=sm_80" lang_checks

# attention: sizes B,H,HKV (kv heads),N (queries),NK (keys); D is a define (default 64)
SC="scale=0.125"
for s in B=1,H=1,HKV=1,N=1,NK=1 B=2,H=3,HKV=3,N=7,NK=33 B=1,H=2,HKV=2,N=1000,NK=1000 \
  B=1,H=1,HKV=1,N=33,NK=4095 B=1,H=2,HKV=2,N=4095,NK=33 B=2,H=4,HKV=4,N=256,NK=256; do
  tk attention.tile attention T=f16 "$s" "$SC"
done
for s in B=1,H=1,HKV=1,N=1,NK=1 B=2,H=3,HKV=3,N=7,NK=33 B=1,H=1,HKV=1,N=33,NK=4095 \
  B=2,H=4,HKV=4,N=256,NK=256; do
  tk attention.tile attention T=bf16 "$s" "$SC"
done
# head sizes
tk attention.tile attention T=f16,D=16 B=2,H=3,HKV=3,N=7,NK=33 "scale=0.25"
tk attention.tile attention T=f16,D=32 B=1,H=2,HKV=2,N=1000,NK=1000 "scale=0.18"
tk attention.tile attention T=f16,D=128 B=2,H=3,HKV=3,N=7,NK=33 "scale=0.088"
tk attention.tile attention T=f16,D=128 B=1,H=2,HKV=2,N=1000,NK=1000 "scale=0.088"
tk attention.tile attention T=bf16,D=256,BM=32,BN=32 B=1,H=2,HKV=2,N=100,NK=300 "scale=0.0625"
# causal (key j visible to query i when j <= i), also with N != NK
tk attention.tile attention T=f16,CAUSAL=true B=1,H=2,HKV=2,N=1000,NK=1000 "$SC"
tk attention.tile attention T=f16,CAUSAL=true B=2,H=3,HKV=3,N=7,NK=33 "$SC"
tk attention.tile attention T=f16,CAUSAL=true B=1,H=2,HKV=2,N=4095,NK=33 "$SC"
tk attention.tile attention T=f16,CAUSAL=true,D=128 B=2,H=4,HKV=4,N=256,NK=256 "scale=0.088"
tk attention.tile attention T=bf16,CAUSAL=true B=1,H=2,HKV=2,N=1000,NK=1000 "$SC"
# grouped-query and multi-query heads
tk attention.tile attention T=f16 B=1,H=8,HKV=2,N=300,NK=300 "$SC"
tk attention.tile attention T=f16 B=2,H=6,HKV=3,N=33,NK=100 "$SC"
tk attention.tile attention T=bf16 B=1,H=8,HKV=1,N=129,NK=257 "$SC"
# the log-sum-exp output
tk attention.tile attention T=f16,HAS_LSE=true B=2,H=3,HKV=3,N=7,NK=33 "$SC"
tk attention.tile attention T=f16,HAS_LSE=true B=1,H=2,HKV=2,N=1000,NK=1000 "$SC"
tk attention.tile attention T=bf16,HAS_LSE=true B=1,H=1,HKV=1,N=33,NK=4095 "$SC"
# everything together
tk attention.tile attention T=f16,CAUSAL=true,HAS_LSE=true,D=128 B=2,H=8,HKV=2,N=333,NK=333 "scale=0.088"
tk attention.tile attention T=bf16,CAUSAL=true,HAS_LSE=true B=1,H=6,HKV=2,N=1000,NK=1000 "$SC"
# tile configurations
tk attention.tile attention T=f16,BM=128,BN=64,NW=8 B=1,H=2,HKV=2,N=1000,NK=1000 "$SC"
tk attention.tile attention T=f16,BM=16,BN=16,STAGES=1 B=2,H=3,HKV=3,N=7,NK=33 "$SC"
tk attention.tile attention T=f16,BM=64,BN=128,STAGES=3,CAUSAL=true B=1,H=2,HKV=2,N=1000,NK=1000 "$SC"
# the Hopper schedule (two consumer warpgroups taking turns: both products on wgmma, K and V
# through TMA rings filled by a producer warpgroup, one ring per key loop; PERF.md 39, 43), with the rotated
# loop of the wgmma-overlap pass and without warp specialization
HA="T=f16,D=128,BM=128,BN=128,BNM=32,NW=8"
for s in B=1,H=1,HKV=1,N=1,NK=1 B=2,H=3,HKV=3,N=7,NK=33 B=1,H=1,HKV=1,N=33,NK=4095 B=1,H=8,HKV=2,N=1000,NK=1000; do
  tk attention.tile attention "$HA" "$s" "scale=0.088"
  tk attention.tile attention "$HA,CAUSAL=true,HAS_LSE=true" "$s" "scale=0.088"
  TK_TAG=" overlap=1" tk attention.tile attention T=bf16,BM=128,BN=128,NW=8,CAUSAL=true,HAS_LSE=true "$s" "$SC" --schedule=overlap=1
done
TK_TAG=" overlap=1" tk attention.tile attention "$HA,BN=64" B=2,H=4,HKV=2,N=4095,NK=4095 "scale=0.088" --schedule=overlap=1
TK_TAG=" ws=0" tk attention.tile attention "$HA" B=2,H=4,HKV=2,N=1000,NK=333 "scale=0.088" --schedule=ws=0
# the consumer warpgroups take turns issuing the products (pingpong, the default); without
TK_TAG=" pingpong=0" tk attention.tile attention "$HA,CAUSAL=true" B=2,H=4,HKV=2,N=1000,NK=1000 "scale=0.088" --schedule=pingpong=0
# causal tiles walked persistently in snake order (persistent=1 asked explicitly)
TK_TAG=" persistent=1" tk attention.tile attention "$HA,CAUSAL=true,HAS_LSE=true" B=2,H=4,HKV=2,N=1000,NK=1000 "scale=0.088" --schedule=persistent=1
TK_TAG=" persistent=1" tk attention.tile attention T=bf16,BM=128,BN=128,NW=8,CAUSAL=true B=3,H=5,HKV=5,N=4095,NK=4095 "$SC" --schedule=persistent=1
tk attention.tile attention T=bf16,BM=128,BN=128,BNM=64,NW=8,STAGES=3,CAUSAL=true,HAS_LSE=true B=1,H=4,HKV=1,N=4095,NK=4095 "$SC"

# ---- 4. compute-sanitizer on ragged shapes ---------------------------------------------------
# memcheck (out-of-bounds and misaligned accesses on ragged edges that a result check can
# miss), racecheck (shared-memory hazards between threads: the staging, rings and
# reductions) and synccheck (barriers reached by part of a block, or with a wrong thread
# count: named barriers of the warp-specialized schedules) on every lib kernel.

SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ "${SANITIZE:-1}" != 0 ] && [ "$DEVICE" = cuda ]; then
  if [ -n "$SANITIZER" ]; then
    # Runs the sanitizer; a device it cannot instrument (seen under gVisor) is a skip.
    # shellcheck disable=SC2016 # expanded by the inner bash
    wrap='out=$("$@" 2>&1); rc=$?; printf "%s\n" "$out"
      if [ $rc -ne 0 ] && grep -q "Device not supported" <<<"$out"; then exit 77; fi
      exit $rc'
    sancheck() { # sancheck TOOL FILE KERNEL DEFINES SIZES SCALARS [tilec options...]
      local args=() tool=$1 file=$2 kernel=$3 defs=$4 sizes=$5 scalars=$6 extra=()
      shift 6
      expand -D "$defs" args
      expand -a "$scalars" args
      case $tool in
        racecheck) extra=(--racecheck-report hazard) ;;
      esac
      check "$kernel" "$tool ${defs:-default}${1:+ $1}" "$sizes" "$(printf '%s\n' "$defs" | sed -n 's/.*T=\([a-z0-9]*\).*/\1/p')" \
        bash -c "$wrap" "$tool" "$SANITIZER" --tool "$tool" "${extra[@]}" --error-exitcode 1 --print-limit 5 \
        "$TILEC" run "$(case $file in */*) echo "$file" ;; *) echo "lib/$file" ;; esac)" -k "$kernel" "${args[@]}" \
        --size "$sizes" --device=cuda --seed="$SEED" "$@"
    }
    memcheck() { sancheck memcheck "$@"; }
    memcheck gemm.tile gemm T=f16,HAS_BIAS=true,HAS_RESIDUAL=true M=33,N=7,K=100 "$AB"
    memcheck gemm.tile gemm T=f16 M=300,N=516,K=300 "$AB" # unaligned rows, interior tiles (realigned 16-byte loads)
    memcheck gemm.tile gemm T=f32 M=7,N=33,K=1000 "$AB"
    TILE_REPACK=1 memcheck gemm.tile gemm T=f16 M=300,N=516,K=301 "$AB" # repacked A and B
    memcheck gemm.tile bmm T=bf16 BATCH=3,M=33,N=7,K=100 ""
    memcheck gemm.tile gemm T=f16 M=129,N=200,K=72 "$AB"  # TMA ring, warp specialization, ragged edges
    memcheck gemm.tile gemm T=f16 M=520,N=264,K=1032 "$AB" --schedule=persistent=0 # one program per tile
    memcheck linear.tile swiglu T=f16 M=300,N=264,K=520 ""  # two products sharing the X buffer
    memcheck gemm.tile bmm T=f16 BATCH=2,M=129,N=72,K=200 "" # 3-d TMA
    memcheck softmax.tile softmax T=f16 M=7,N=4095 ""
    memcheck rmsnorm.tile rmsnorm T=bf16,BN=512 M=5,N=3001 "eps=1e-5" # row-align: the first chunk starts in front of the row
    memcheck layernorm.tile layernorm T=bf16 M=7,N=1000 "eps=1e-5"
    # the weights read as shifted vectors (schedule shift=1: two aligned blocks per run,
    # PERF.md 115): looped, with the row cache, and the one-tile row shifted
    memcheck layernorm.tile layernorm T=f16,BN=512 M=5,N=3001 "eps=1e-5" --schedule=shift=1
    memcheck layernorm.tile layernorm T=f16,BN=1024,NW=4 M=3,N=20011 "eps=1e-5" --schedule=shift=1
    memcheck layernorm.tile layernorm T=bf16,BN=4096,NW=8 M=3,N=3001 "eps=1e-5" --schedule=shift=1
    memcheck rmsnorm.tile rmsnorm T=f32 M=7,N=33 "eps=1e-5"
    memcheck attention.tile attention T=f16,CAUSAL=true,HAS_LSE=true B=1,H=2,HKV=1,N=33,NK=100 "$SC"
    memcheck attention.tile attention T=f16,D=128,BN=128,BNM=32,NW=8,CAUSAL=true,HAS_LSE=true B=1,H=2,HKV=1,N=333,NK=333 "scale=0.088"
    memcheck attention.tile attention T=bf16,BN=128,NW=8 B=1,H=2,HKV=1,N=333,NK=1000 "$SC" --schedule=overlap=1
    # the language features' kernels: gathers, scatters, masked stores, atomics, fp8, scans
    MO=tests/kernels/memory_ops.tile
    memcheck $MO splitk "" M=33,N=40,K=100 ""
    memcheck $MO rowmask "" M=33,N=32 ""
    memcheck $MO hist "" N=1000,NB=7 ""
    memcheck tests/kernels/fp8.tile dequant_gemm "" M=33,N=65,K=256,KG=4 ""
    memcheck tests/kernels/gather_gemm.tile gather_gemm "" M=40,K=100,N=33,R=70 ""
    memcheck scan.tile cumsum T=f16 M=33,N=1000 ""
    memcheck decode_attention.tile decode_split T=f16 B=3,H=8,HKV=2,NP=40,PAGE=16,MAXP=8,S=4 "scale=0.088"
    memcheck decode_attention.tile decode_split T=f16 B=3,H=8,HKV=2,NP=40,PAGE=16,MAXP=8,S=4 "scale=0.088" --schedule=prefetch=1
    memcheck attention_bwd.tile attention_bwd_dkdv T=f16,CAUSAL=true B=1,H=4,HKV=2,N=100,NK=100 "scale=0.125"
    memcheck attention_bwd.tile attention_bwd_dq T=f16,CAUSAL=true B=1,H=4,HKV=2,N=100,NK=100 "scale=0.125"
    memcheck attention_bwd.tile attention_bwd_fused T=f16 B=1,H=2,HKV=1,N=130,NK=130 "scale=0.125"
    memcheck attention_bwd.tile attention_bwd_fused T=f16 B=1,H=2,HKV=1,N=130,NK=130 "scale=0.125" --schedule=writer=1
    memcheck attention_bwd.tile attention_bwd_fused T=f16 B=1,H=2,HKV=1,N=300,NK=300 "scale=0.125" --schedule=writer=1,regs=24/240
    memcheck examples/embedding_bag.tile embedding_bag T=f16 V=50,B=7,DIM=1000 ""
    # every lib kernel under racecheck and synccheck, in each schedule it is launched with
    # (the warp-specialized TMA ring, the cp.async pipeline, the persistent tile loop)
    for tool in racecheck synccheck; do
      sancheck $tool gemm.tile gemm T=f16,HAS_BIAS=true M=129,N=200,K=136 "$AB"
      sancheck $tool gemm.tile gemm T=f16 M=129,N=200,K=136 "$AB" --schedule=tma=0,wgmma=0
      sancheck $tool gemm.tile gemm T=f32 M=33,N=7,K=100 "$AB"
      sancheck $tool gemm.tile bmm T=bf16 BATCH=2,M=129,N=72,K=200 ""
      sancheck $tool gemm.tile bmm_shared T=f16 BATCH=2,M=129,N=72,K=200 ""
      sancheck $tool linear.tile linear T=f16,ACT=gelu,HAS_BIAS=true M=129,N=200,K=72 ""
      sancheck $tool linear.tile swiglu T=f16 M=129,N=264,K=136 ""
      sancheck $tool softmax.tile softmax T=f16 M=7,N=4095 ""
      sancheck $tool layernorm.tile layernorm T=bf16 M=7,N=1000 "eps=1e-5"
      sancheck $tool rmsnorm.tile rmsnorm T=f32 M=7,N=33 "eps=1e-5"
      sancheck $tool attention.tile attention T=f16,CAUSAL=true B=1,H=2,HKV=1,N=100,NK=100 "$SC"
      sancheck $tool attention.tile attention T=f16,D=128,BN=128,BNM=32,NW=8,CAUSAL=true B=1,H=2,HKV=1,N=300,NK=300 "scale=0.088"
      sancheck $tool attention.tile attention T=f16,BN=128,NW=8 B=1,H=2,HKV=1,N=300,NK=300 "$SC" --schedule=overlap=1
      sancheck $tool tests/kernels/memory_ops.tile splitk "" M=33,N=40,K=100 ""
      sancheck $tool scan.tile cumsum T=f32 M=33,N=1000 ""
      sancheck $tool decode_attention.tile decode_split T=f16 B=3,H=8,HKV=2,NP=40,PAGE=16,MAXP=8,S=4 "scale=0.088"
      sancheck $tool tests/kernels/gather_gemm.tile gather_gemm "" M=40,K=100,N=33,R=70 ""
      sancheck $tool attention_bwd.tile attention_bwd_dkdv T=f16 B=1,H=4,HKV=2,N=100,NK=100 "scale=0.125"
      sancheck $tool attention_bwd.tile attention_bwd_fused T=f16 B=1,H=2,HKV=1,N=130,NK=130 "scale=0.125"
      sancheck $tool attention_bwd.tile attention_bwd_fused T=f16 B=1,H=2,HKV=1,N=130,NK=130 "scale=0.125" --schedule=writer=1
      sancheck $tool attention_bwd.tile attention_bwd_fused T=f16 B=1,H=2,HKV=1,N=300,NK=300 "scale=0.125" --schedule=writer=1,regs=24/240
    done
  else
    check sanitizer compute-sanitizer - - sh -c 'echo "compute-sanitizer not found"; exit 77'
  fi
fi

# ---- 5. compile times and kernel timings ---------------------------------------------------

req=--require-gpu
[ "$DEVICE" = cpu ] && req=""
check bench_compile "gemm + attention" - - "$CARRY/bench_compile" --reps=3 $req

if [ "${BENCH:-1}" != 0 ] && [ "$DEVICE" = cuda ]; then
  bench() { # bench FILE KERNEL DEFINES SIZES SCALARS [tilec args]
    local file=$1 kernel=$2 defs=$3 sizes=$4 scalars=$5 args=()
    shift 5
    expand -D "$defs" args
    expand -a "$scalars" args
    check "$kernel" "bench ${defs}" "$sizes" "$(printf '%s\n' "$defs" | sed -n 's/.*T=\([a-z0-9]*\).*/\1/p')" \
      "$TILEC" run "lib/$file" -k "$kernel" "${args[@]}" --size "$sizes" --device=cuda --bench "$@"
  }
  bench gemm.tile gemm T=f16 M=4096,N=4096,K=4096 "$AB"
  bench gemm.tile gemm T=bf16,ACT=gelu,HAS_BIAS=true M=4096,N=4096,K=4096 "$AB"
  bench gemm.tile bmm T=f16 BATCH=16,M=1024,N=1024,K=1024 ""
  bench attention.tile attention T=f16 B=4,H=16,HKV=16,N=4096,NK=4096 "$SC"
  bench attention.tile attention T=f16,CAUSAL=true B=4,H=16,HKV=16,N=4096,NK=4096 "$SC" \
    "--flops=2*B*H*N*NK*64"
  bench softmax.tile softmax T=f16 M=8192,N=8192 ""
  bench layernorm.tile layernorm T=bf16 M=8192,N=8192 "eps=1e-5"
fi

# ---- 6. the Python package ------------------------------------------------------------------
# The carried wheel installed into a fresh folder with pip (no network: cffi from the carried
# wheels/ when the machine's Python lacks it), then its pytest suite (the interpreter and the
# torch paths: lib kernels against torch, streams, torch.compile without graph breaks) and
# the launch-overhead comparison with Triton.

if [ "${PYTHON_CHECK:-1}" != 0 ] && [ -n "$WHEEL" ] && command -v python3 >/dev/null; then
  PYSITE=$(mktemp -d /tmp/tile_pysite.XXXXXX)
  # shellcheck disable=SC2016
  PIP_CMD='python3 -c "import cffi" 2>/dev/null ||
      python3 -m pip install -q --no-index --find-links "$1/wheels" --target "$2" cffi pycparser || exit 1
    python3 -m pip install -q --no-index --no-deps --target "$2" "$3" || exit 1
    PYTHONPATH="$2" python3 -c "import tile; print(\"installed\", tile.version())"'
  check python "pip install the wheel" - - bash -c "$PIP_CMD" _ "$CARRY" "$PYSITE" "$WHEEL"
  PYENV=(env PYTHONPATH="$PYSITE" TILE_PY_INSTALLED=1 TILE_LIBRARY= TILE_CACHE_DIR=)
  check python "pytest tests/python" - - "${PYENV[@]}" python3 -m pytest -q -p no:cacheprovider tests/python
  [ "$DEVICE" = cuda ] && check python "launch overhead vs triton" - f32 "${PYENV[@]}" python3 tools/bench_python.py
  [ "$DEVICE" = cuda ] && check python "examples vs torch" - - "${PYENV[@]}" python3 tools/bench_examples.py
fi

# ---- 7. profiling: the trace file, NVTX ranges and line information under Nsight Compute -------
# A traced run must write launch and compile events named by kernel and configuration; under
# ncu, the kernel must be renamed by its NVTX range ("softmax [T=f32,...] launch") and the
# source view must show lib/softmax.tile's lines (from the PTX's .loc directives).

if [ "${PROFILE_CHECK:-1}" != 0 ] && [ "$DEVICE" = cuda ]; then
  TRACE_OUT=$LOG_DIR/trace.json
  # shellcheck disable=SC2016
  TRACE_CMD='TILE_TRACE="$1" "$2" run lib/softmax.tile --device=cuda --size M=64,N=4096 >/dev/null &&
    grep -q "\"name\":\"softmax \[[^]]*\] launch\",\"cat\":\"launch\"" "$1" &&
    grep -q "\"cat\":\"pass\"" "$1" && echo "$(grep -c "" "$1") events, launch and passes named by kernel and configuration"'
  check profile "TILE_TRACE file" - f32 bash -c "$TRACE_CMD" _ "$TRACE_OUT" "$TILEC"
  if command -v ncu >/dev/null; then
    # shellcheck disable=SC2016
    NCU_CMD='ncu --clock-control none --nvtx --print-nvtx-rename kernel -c 1 -k regex:softmax \
        --section SourceCounters --page source --print-source cuda --csv \
        "$1" run lib/softmax.tile --device=cuda --size M=64,N=4096 >"$2" 2>&1
      rc=$?; tail -5 "$2"; [ $rc -eq 0 ] || exit 1
      grep -q "softmax \[" "$2" || { echo "no NVTX-named kernel"; exit 1; }
      grep -q "exp2\|LOG2E\|let x" "$2" || { echo "no .tile source lines"; exit 1; }
      echo "ncu: kernel named by its NVTX range; source view shows lib/softmax.tile lines"'
    check profile "ncu: NVTX names and .tile lines" - f32 bash -c "$NCU_CMD" _ "$TILEC" "$LOG_DIR/ncu_source.txt"
  fi
fi

# ---- the table -------------------------------------------------------------------------------

n=${#R_RESULT[@]}
pass=0 fail=0 skip=0
wk=6 wc=6 ws=5 wd=5
for ((i = 0; i < n; i++)); do
  case ${R_RESULT[$i]} in PASS) pass=$((pass + 1)) ;; SKIP) skip=$((skip + 1)) ;; *) fail=$((fail + 1)) ;; esac
  [ ${#R_KERNEL[$i]} -gt "$wk" ] && wk=${#R_KERNEL[$i]}
  [ ${#R_CONFIG[$i]} -gt "$wc" ] && wc=${#R_CONFIG[$i]}
  [ ${#R_SHAPE[$i]} -gt "$ws" ] && ws=${#R_SHAPE[$i]}
  [ ${#R_DTYPE[$i]} -gt "$wd" ] && wd=${#R_DTYPE[$i]}
done
{
  echo
  printf "%-${wk}s  %-${wc}s  %-${ws}s  %-${wd}s  %-7s  %s\n" kernel config shape dtype result error
  for ((i = 0; i < n; i++)); do
    printf "%-${wk}s  %-${wc}s  %-${ws}s  %-${wd}s  %-7s  %s\n" "${R_KERNEL[$i]}" "${R_CONFIG[$i]}" \
      "${R_SHAPE[$i]}" "${R_DTYPE[$i]}" "${R_RESULT[$i]}" "${R_ERROR[$i]}"
  done
  echo
  echo "gpu_check: $n checks: $pass passed, $fail failed, $skip skipped (log: $LOG)"
} | tee "$TABLE" | tee -a "$LOG"

if [ $fail -gt 0 ]; then exit 1; fi
if [ $skip -gt 0 ]; then exit 77; fi
exit 0
