#!/usr/bin/env bash
# aot.sh - `tilec aot` end to end without a GPU: generates launchers for lib/gemm.tile (gemm
# and bmm, sm_90a and sm_80, with ptxas cubins when ptxas is found) and lib/softmax.tile
# (--unaligned=also), builds tests/cli/aot_host.c against only the generated files with a
# plain cc and -lcuda, where libcuda.so is the fake driver (tests/cli/fake_libcuda.c), and
# checks that
#  - the program links neither libtile nor LLVM, and the generated code compiles cleanly
#    (-Wall -Wextra -Wpedantic -Werror);
#  - each launch passes exactly what the JIT runtime passes for the same shapes (`tilec run
#    --device=cuda` on the same fake driver): the same code, grid, block, shared memory and
#    parameter values (the fake logs them as the PTX declares them, TMA descriptors included);
#  - the variant follows the device: sm_90a on 9.0, the sm_80 code on 8.6 and 10.0, none on
#    7.5 (TILE_AOT_NO_CODE); cubins are loaded where they fit (fake cubins from a stand-in
#    ptxas), the PTX otherwise;
#  - bad arguments are refused with a message naming the argument (shape relations, NULL,
#    misaligned pointers, strides, sizes the aligned code cannot take) and nothing launches;
#  - tilec aot's own usage errors.
#
#   bash tests/cli/aot.sh BUILD_DIR SOURCE_DIR        (ctest runs it so; exit 77: no cc)
set -uo pipefail
BUILD=$(cd "${1:?usage: aot.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
SRC=$(cd "${2:?usage: aot.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
TILEC=$BUILD/tilec
[ -x "$TILEC" ] || { echo "FAIL: $TILEC not found"; exit 1; }
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "SKIP: no C compiler"; exit 77; }
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset FAKE_CUDA_NO_LINK FAKE_CUDA_NO_POOL FAKE_CUDA_POOL_OOM FAKE_CUDA_CAPTURING FAKE_CUDA_CC TILE_REPACK
export TILE_CACHE_DIR=""
export FAKE_CUDA_LOG=$TMP/driver.log

fails=0 checks=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { checks=$((checks + 1)); }

mkdir -p "$TMP/fake" "$TMP/gen"
"$CC" -std=c17 -D_GNU_SOURCE -shared -fPIC -O1 -o "$TMP/fake/libcuda.so" "$SRC/tests/cli/fake_libcuda.c" -lpthread &&
  "$CC" -std=c17 -D_GNU_SOURCE -DFAKE_CUDA_PTXAS_MAIN -O1 -o "$TMP/fake_ptxas" "$SRC/tests/cli/fake_libcuda.c" -lpthread ||
  { echo "FAIL: cannot build the fake driver"; exit 1; }

PTXAS=${PTXAS:-}
[ -z "$PTXAS" ] && [ -x /usr/local/cuda/bin/ptxas ] && PTXAS=/usr/local/cuda/bin/ptxas
[ -z "$PTXAS" ] && PTXAS=$(command -v ptxas || true)
[ -z "$PTXAS" ] && [ -x "$BUILD/ptxas/ptxas" ] && PTXAS=$BUILD/ptxas/ptxas

# generate GEN_DIR [extra tilec aot options]: gemm_aot.{h,c} and softmax_aot.{h,c}
generate() {
  local dir=$1
  shift
  mkdir -p "$dir"
  check
  "$TILEC" aot "$SRC/lib/gemm.tile" -k gemm,bmm --arch=sm_90a,sm_80 -o "$dir/gemm_aot" "$@" 2>"$TMP/gen.err" ||
    { fail "tilec aot gemm $*: $(cat "$TMP/gen.err")"; return 1; }
  "$TILEC" aot "$SRC/lib/softmax.tile" --arch=sm_90a,sm_80 --unaligned=also -o "$dir/softmax_aot" "$@" 2>"$TMP/gen.err" ||
    { fail "tilec aot softmax $*: $(cat "$TMP/gen.err")"; return 1; }
}
# build GEN_DIR: the host program against the generated files only
build_host() {
  check
  "$CC" -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I "$1" -o "$1/aot_host" "$SRC/tests/cli/aot_host.c" \
    "$1/gemm_aot.c" "$1/softmax_aot.c" -L "$TMP/fake" -lcuda -lpthread 2>"$TMP/cc.err" ||
    { fail "the host program does not build against $1: $(head -20 "$TMP/cc.err")"; return 1; }
}
host() { # GEN_DIR ARGS...: runs it on the fake driver, output in $TMP/out
  local dir=$1
  shift
  : >"$FAKE_CUDA_LOG"
  LD_LIBRARY_PATH=$TMP/fake "$dir/aot_host" "$@" >"$TMP/out" 2>&1 || fail "aot_host $*: exit $?: $(cat "$TMP/out")"
}
jit() { # ARGS... for tilec run on the fake driver
  : >"$FAKE_CUDA_LOG"
  TILE_LIBCUDA=$TMP/fake/libcuda.so "$TILEC" run --device=cuda --fixed-config "$@" >"$TMP/jit.out" 2>&1 ||
    fail "tilec run $*: $(cat "$TMP/jit.out")"
}
first_launch() { grep -m1 "^launch $1 " "$FAKE_CUDA_LOG"; }

# ---- generation (real ptxas when there is one) ----
G=$TMP/gen
if [ -n "$PTXAS" ]; then generate "$G" --ptxas="$PTXAS"; else generate "$G"; fi || exit 1
check
if [ -n "$PTXAS" ]; then
  grep -q '_cubin\[' "$G/gemm_aot.c" || fail "ptxas $PTXAS: no cubin embedded"
else
  echo "note: no ptxas: PTX-only generation"
fi
check
grep -q '^int gemm_aot_gemm(void \*stream' "$G/gemm_aot.h" && grep -q '^int gemm_aot_bmm(void \*stream' "$G/gemm_aot.h" &&
  grep -q '^int softmax_aot_softmax(void \*stream' "$G/softmax_aot.h" || fail "launcher prototypes missing from the headers"
build_host "$G" || exit 1
check
if command -v ldd >/dev/null && LD_LIBRARY_PATH=$TMP/fake ldd "$G/aot_host" | grep -Eq 'libtile|libLLVM'; then
  fail "the host program links libtile or LLVM: $(ldd "$G/aot_host")"
fi

# ---- the same launch as the JIT runtime's ----
same_launch() { # LABEL KERNEL "HOST ARGS" TILEC-RUN-ARGS...  (CODE=any: compare all but the code hash)
  local label=$1 kernel=$2 hargs=$3
  shift 3
  check
  # shellcheck disable=SC2086
  host "$G" $hargs
  grep -q ": 0 $" "$TMP/out" || fail "$label: the AOT launch failed: $(cat "$TMP/out")"
  local aot
  aot=$(first_launch "$kernel")
  jit "$@"
  local ref
  ref=$(first_launch "$kernel")
  if [ "${CODE:-}" = any ]; then
    aot=$(sed 's/ code=[^ ]*//' <<<"$aot")
    ref=$(sed 's/ code=[^ ]*//' <<<"$ref")
  fi
  if [ -z "$aot" ] || [ "$aot" != "$ref" ]; then
    fail "$label: AOT and JIT launches differ"
    echo "  aot: $aot"
    echo "  jit: $ref"
  fi
}
same_launch "gemm 256x512x128" gemm "gemm 256 512 128" "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=256,N=512,K=128
same_launch "gemm 4096x4096x4096" gemm "gemm 4096 4096 4096" "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=4096,N=4096,K=4096
same_launch "bmm 16x128x256x64" bmm "bmm 16 128 256 64" "$SRC/lib/gemm.tile" -k bmm --size BATCH=16,M=128,N=256,K=64
# (the JIT's code holds only the one-pass branch of `if N <= BN`, which the launch decides;
# the AOT code holds both)
CODE=any same_launch "softmax 64x1024" softmax "softmax 64 1024" "$SRC/lib/softmax.tile" --size M=64,N=1024

# ---- variants by compute capability ----
variant() { # LABEL CC EXPECT-STATUS GREP-LOG...
  local label=$1 cc=$2 want=$3
  shift 3
  check
  FAKE_CUDA_CC=$cc host "$G" gemm 256 512 128
  grep -q "^gemm: $want" "$TMP/out" || fail "$label: expected status $want: $(cat "$TMP/out")"
  for pattern in "$@"; do
    grep -q -- "$pattern" "$FAKE_CUDA_LOG" || { fail "$label: the driver did not log '$pattern'"; cat "$FAKE_CUDA_LOG"; }
  done
}
variant "cc 8.6 runs the sm_80 code" 8.6 0 "^launch gemm grid=4,1,1 block=256 .*params=19 "
variant "cc 10.0 runs the sm_80 PTX" 10.0 0 "^jit" "block=256"
variant "cc 7.5 has no code" 7.5 2
grep -q "no code for compute capability 7.5 (generated for sm_90a, sm_80)" "$TMP/out" || fail "cc 7.5 message: $(cat "$TMP/out")"

# ---- cubins where they fit: fake ones from the stand-in ptxas ----
F=$TMP/gen-fake-cubin
if generate "$F" --ptxas="$TMP/fake_ptxas" && build_host "$F"; then
  for cc_log in "9.0 load-cubin" "8.6 load-cubin" "10.0 jit"; do
    read -r cc want <<<"$cc_log"
    check
    FAKE_CUDA_CC=$cc host "$F" gemm 256 512 128
    grep -q "^gemm: 0" "$TMP/out" || fail "fake cubins, cc $cc: $(cat "$TMP/out")"
    [ "$(grep -c -E '^(jit|load-cubin)' "$FAKE_CUDA_LOG")" -eq 1 ] && grep -q "^$want" "$FAKE_CUDA_LOG" ||
      { fail "fake cubins, cc $cc: expected one '$want'"; cat "$FAKE_CUDA_LOG"; }
  done
fi

# ---- bad arguments ----
host "$G" errors
expect() { # CASE STATUS [MESSAGE FRAGMENT]
  check
  local line
  line=$(grep "^$1: " "$TMP/out")
  [ "${line#"$1: "}" != "$line" ] && [ "$(cut -d' ' -f2 <<<"$line")" = "$2" ] || { fail "$1: expected status $2, got '$line'"; return; }
  [ -z "${3:-}" ] || grep -qF -- "$3" <<<"$line" || fail "$1: the message lacks '$3': $line"
}
expect ok 0
expect k-mismatch 1 "gemm: argument 1 ('B'): dimension 0 (K) is 80, but argument 0 ('A') has K = 64"
expect null-a 1 "argument 0 ('A'): data pointer is NULL"
expect null-a-struct 1 "argument 0 ('A'): data pointer is NULL"
expect misaligned 1 "argument 0 ('A'): pointer"
expect misaligned 1 "is not 16-byte aligned"
expect last-stride 1 "argument 0 ('A'): the last dimension has stride 2"
expect m-unaligned 1 "the size M = 100 is not a multiple of 16; the code was generated for aligned arguments only"
expect negative 1 "argument 0 ('A'): dimension 0 has size -1"
expect row-stride 1 "argument 0 ('A'): stride 0 (68 elements) is not a multiple of 16 bytes"
expect empty 0
expect softmax-unaligned 0
expect softmax-mismatch 1 "softmax: argument 1 ('Y'): dimension 1 (N) is 999, but argument 0 ('X') has N = 1000"
check
[ "$(grep -c '^launch gemm' "$FAKE_CUDA_LOG")" -eq 1 ] || fail "errors: the rejected GEMM calls launched something"
check
grep -q "^launch softmax grid=100,1,1 block=128 .*params=8 args=p,1001,1,p,1000,1,100,1000$" "$FAKE_CUDA_LOG" ||
  { fail "the unaligned softmax launch"; grep launch "$FAKE_CUDA_LOG"; }
host "$G" nocontext
expect nocontext 3 "no CUDA context is current in this thread"

# ---- tilec aot usage ----
usage() { # LABEL WANT-EXIT FRAGMENT ARGS...
  local label=$1 want=$2 fragment=$3
  shift 3
  check
  "$TILEC" aot "$@" >"$TMP/u.out" 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] && grep -qF -- "$fragment" "$TMP/u.out" ||
    fail "$label: exit $rc (want $want), output: $(head -3 "$TMP/u.out")"
}
usage "no -o" 2 "aot needs -o PREFIX" "$SRC/lib/softmax.tile" --arch=sm_80
usage "no --arch" 2 "aot needs --arch" "$SRC/lib/softmax.tile" -o "$TMP/x"
usage "unknown arch" 2 "unknown target architecture 'sm_70'" "$SRC/lib/softmax.tile" --arch=sm_80,sm_70 -o "$TMP/x"
usage "unknown kernel" 1 "nope" "$SRC/lib/gemm.tile" -k nope --arch=sm_80 -o "$TMP/x"
usage "several kernels, none chosen" 1 "choose one with -k" "$SRC/lib/gemm.tile" --arch=sm_80 -o "$TMP/x"
usage "bad define" 1 "has no compile-time parameter" "$SRC/lib/softmax.tile" -D NOPE=1 --arch=sm_80 -o "$TMP/x"
usage "bad symbol" 2 "is not a C identifier" "$SRC/lib/softmax.tile" --arch=sm_80 --name=9x -o "$TMP/x"
usage "both unaligned options" 2 "exclude each other" "$SRC/lib/softmax.tile" --arch=sm_80 --unaligned --unaligned=also -o "$TMP/x"
check
[ ! -e "$TMP/x.h" ] && [ ! -e "$TMP/x.c" ] || fail "a failed tilec aot left output behind"
check
"$TILEC" aot "$SRC/lib/softmax.tile" --arch=sm_80 --no-cubin -o "$TMP/nc" 2>"$TMP/nc.err" && ! grep -q '_cubin\[' "$TMP/nc.c" ||
  fail "--no-cubin: $(cat "$TMP/nc.err")"

if [ "$fails" -gt 0 ]; then
  echo "aot: $fails of $checks checks failed"
  exit 1
fi
echo "aot: $checks checks passed"
