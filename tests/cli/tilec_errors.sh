#!/usr/bin/env bash
# tilec_errors.sh - how tilec reports errors, and that its IR output parses back.
#
#   bash tests/cli/tilec_errors.sh BUILD_DIR SOURCE_DIR        (ctest runs it so)
#
# Checks that
#  - a malformed .tile program gets "FILE:LINE:COL: error: ..." on stderr, followed by the
#    source line and a caret line whose '^' sits under column COL, and exit status 1;
#  - other failures (a missing file, an unknown kernel or parameter, malformed IR) exit 1
#    with a message, and usage errors exit 2 with the usage text; --help and --version exit 0;
#  - `tilec FILE --emit=ir` of every lib kernel (and a few non-default configurations)
#    re-parses: `tilec x.ir --emit=ir` prints the same text.
# No GPU is needed. Prints one line per failed check; exit status 1 if any failed.
set -uo pipefail
BUILD=$(cd "${1:?usage: tilec_errors.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
SRC=$(cd "${2:?usage: tilec_errors.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
TILEC=$BUILD/tilec
[ -x "$TILEC" ] || { echo "FAIL: $TILEC not found"; exit 1; }
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1

fails=0 checks=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# run_tilec ARGS...: runs tilec, leaving its status in $rc, stdout in out.txt, stderr in err.txt
run_tilec() {
  "$TILEC" "$@" >out.txt 2>err.txt
  rc=$?
  checks=$((checks + 1))
}

# ---- malformed programs --------------------------------------------------------------------

# bad NAME LINE "SOURCE": SOURCE (printf format) has its first error on line LINE.
bad() {
  local name=$1 line=$2
  # shellcheck disable=SC2059 # the source is a printf format on purpose
  printf "$3" >"$name.tile"
  run_tilec "$name.tile"
  if [ "$rc" -ne 1 ]; then
    fail "$name.tile: exit status $rc, expected 1"
    sed 's/^/  /' err.txt
    return
  fi
  # the first diagnostic: FILE:LINE:COL: error: MESSAGE
  local first col
  first=$(grep -m1 -E "^$name\\.tile:[0-9]+:[0-9]+: error: " err.txt)
  if [ -z "$first" ]; then
    fail "$name.tile: no '$name.tile:LINE:COL: error:' line in:"
    sed 's/^/  /' err.txt
    return
  fi
  if [ "$(echo "$first" | cut -d: -f2)" != "$line" ]; then
    fail "$name.tile: error reported on the wrong line (expected $line): $first"
  fi
  col=$(echo "$first" | cut -d: -f3)
  # then the source line, then the caret line: spaces, '^', optional '~'s
  local src caret
  src=$(grep -A2 -m1 -F "$first" err.txt | sed -n 2p)
  caret=$(grep -A2 -m1 -F "$first" err.txt | sed -n 3p)
  if [ "$src" != "$(sed -n "${line}p" "$name.tile")" ]; then
    fail "$name.tile: the line after the diagnostic is not source line $line: '$src'"
  fi
  if ! [[ "$caret" =~ ^\ *\^~*$ ]]; then
    fail "$name.tile: no caret line under the source line: '$caret'"
  else
    local lead=${caret%%^*}
    [ $((${#lead} + 1)) -eq "$col" ] || fail "$name.tile: caret at column $((${#lead} + 1)), diagnostic says $col"
  fi
}

# (a missing token is reported just after the token before it, as C compilers do)
HEAD='kernel k(X: f32[N], Y: out f32[N]) grid(1) warps(4) {\n'
bad missing_semicolon 2 "$HEAD  let x = X[0 : +16]\n  Y[0 : +16] = x;\n}\n"
bad undeclared_name 2 "$HEAD  Y[0 : +16] = undefined_name;\n}\n"
bad stray_character 3 "$HEAD  let a = 1;\n  Y[0 : +16] = X[0 : +16] \$ 2;\n}\n"
bad unterminated_string 2 "$HEAD  let y = \"unterminated;\n}\n"
bad bad_slice_length 2 "$HEAD  Y[0 : +12] = X[0 : +12];\n}\n"
bad unknown_function 2 "$HEAD  Y[0 : +16] = frobnicate(X[0 : +16]);\n}\n"
bad missing_brace 2 "$HEAD  Y[0 : +16] = X[0 : +16];\n\n"

# a kernel with no error must compile (so the cases above fail for the reason intended)
printf '%b  Y[0 : +16] = X[0 : +16];\n}\n' "$HEAD" >good.tile
run_tilec good.tile
[ "$rc" -eq 0 ] || { fail "good.tile: exit status $rc, expected 0"; sed 's/^/  /' err.txt; }

# ---- other failures: exit status 1 and a message ---------------------------------------------

# expect STATUS PATTERN ARGS...: tilec ARGS exits STATUS and stderr (or stdout) matches PATTERN.
expect() {
  local want=$1 pattern=$2
  shift 2
  run_tilec "$@"
  if [ "$rc" -ne "$want" ]; then
    fail "tilec $*: exit status $rc, expected $want"
    sed 's/^/  /' err.txt | head -5
  elif ! grep -qE -- "$pattern" err.txt out.txt; then
    fail "tilec $*: output does not match '$pattern':"
    sed 's/^/  /' err.txt | head -5
  fi
}

expect 1 "cannot read '$TMP/no_such_file.tile'" "$TMP/no_such_file.tile"
expect 1 "no kernel named .nokernel." "$SRC/lib/gemm.tile" -k nokernel
expect 1 "has kernels gemm, bmm" "$SRC/lib/gemm.tile"
expect 1 "has no compile-time parameter .NOPE." "$SRC/lib/softmax.tile" -D NOPE=1
expect 1 "defines no kernel" /dev/null
: >empty.ir # IR text without a function: nothing to generate code for (fuzz_ir_ptx's empty input)
expect 1 "empty\\.ir: error: the IR defines no kernel" empty.ir --emit=ptx --arch=sm_80
printf 'kernel @k(%%X: tensor<f32[%%N]>) warps=4 {\ngrid:\n  %%0 = bogus_op\n}\n' >bad.ir
expect 1 "^bad\\.ir:[0-9]+:[0-9]+: error: " bad.ir --emit=ir
# IR that parses but breaks a verifier rule: the message points at the op, file:line:col
printf 'kernel @k(%%X: tensor<f32[%%N]>) warps=4 {\ngrid:\n  %%0 = const 1 : i32\n  grid %%0, %%0, %%0\nbody:\n  %%1 = const 1.0 : f32\n  %%2 = const 1 : i32\n  %%3 = add %%1, %%2 : f32\n}\n' >unverified.ir
expect 1 "^unverified\\.ir:8:3: error: ir verifier: @k: op [0-9]+ 'add': operand 1 element type i32 differs" unverified.ir --emit=ir
expect 1 "^unverified\\.ir:8:3: error: ir verifier: " opt unverified.ir --passes=cse
# buffers beyond the target's shared memory: refused before code generation (as the launch
# would refuse the kernel), pointing at the pipelined loop: gemm's 4 stages of 128x64 and
# 64x256 f16 tiles take 192 KiB, sm_80 offers 163; sm_90a's 227 fit
expect 1 "gemm\\.tile:[0-9]+:3: error: kernel 'gemm' needs 196608 bytes of shared memory per block for its buffers \\(this loop keeps 4 stages\\); sm_80 allows 166912" \
  "$SRC/lib/gemm.tile" -k gemm -D STAGES=4 --emit=ptx --arch=sm_80
run_tilec "$SRC/lib/gemm.tile" -k gemm -D STAGES=4 --emit=ptx --arch=sm_90a -o /dev/null
[ "$rc" -eq 0 ] || { fail "gemm STAGES=4 for sm_90a: exit status $rc, expected 0"; sed 's/^/  /' err.txt | head -5; }

# ---- usage errors: exit status 2 and the usage text ----------------------------------------

expect 2 "usage: tilec" # no input file
expect 2 "unknown option '--bogus'" good.tile --bogus
expect 2 "unknown --emit value" good.tile --emit=bogus
expect 2 "-D needs NAME=VALUE" good.tile -D NOVALUE
expect 2 "-k needs a kernel name" good.tile -k
expect 2 "more than one input file" good.tile good.tile
expect 2 "unknown device" run good.tile --device=tpu
expect 2 "--size N: bad value '-3'" run good.tile --size N=-3
expect 2 "unknown target architecture" good.tile --emit=ptx --arch=sm_70
expect 0 "usage: tilec" --help
expect 0 "^tile [0-9]" --version

# ---- input that is not a file -----------------------------------------------------------------

mkdir -p a_dir d.ir
expect 1 "cannot read 'a_dir': Is a directory" a_dir
expect 1 "cannot read 'd.ir': Is a directory" d.ir --emit=ir
expect 1 "cannot read 'd.ir': Is a directory" opt d.ir
expect 1 "cannot read 'a_dir': Is a directory" run a_dir --device=cpu

# ---- output that cannot be written: exit status 1, a message, no partial file --------------

expect 1 "^tilec: cannot write '/dev/full': No space left on device$" good.tile --emit=ir -o /dev/full
# standard output: the IR, and what run, cache and --version print
stdout_full() { # stdout_full ARGS...: tilec ARGS >/dev/full must exit 1 and say why
  "$TILEC" "$@" >/dev/full 2>err.txt
  rc=$?
  checks=$((checks + 1))
  if [ "$rc" -ne 1 ]; then
    fail "tilec $* >/dev/full: exit status $rc, expected 1"
  elif ! grep -q "^tilec: cannot write '<stdout>': No space left on device$" err.txt; then
    fail "tilec $* >/dev/full: no 'cannot write' message:"
    sed 's/^/  /' err.txt | head -5
  fi
}
stdout_full good.tile --emit=ir
stdout_full "$SRC/lib/gemm.tile" -k gemm --emit=ir
stdout_full run good.tile --device=cpu --size N=16
stdout_full --version
stdout_full cache path
# a write that fails half-way (the file size limit) leaves the old file as it was and no
# temporary file next to it
printf 'old contents\n' >keep.ir
(ulimit -f 1; trap '' XFSZ; exec "$TILEC" "$SRC/lib/gemm.tile" -k gemm --emit=ir -o keep.ir) >out.txt 2>err.txt
rc=$?
checks=$((checks + 1))
if [ "$rc" -ne 1 ] || ! grep -q "^tilec: cannot write 'keep.ir': File too large$" err.txt; then
  fail "a write over the file size limit: exit status $rc, expected 1 and 'cannot write':"
  sed 's/^/  /' err.txt | head -5
fi
[ "$(cat keep.ir)" = "old contents" ] || fail "a failed write changed keep.ir (now $(wc -c <keep.ir) bytes)"
leftovers=$(find . -maxdepth 1 -name 'keep.ir?*' | head -3)
[ -z "$leftovers" ] || fail "a failed write left files behind: $leftovers"
(ulimit -f 1; trap '' XFSZ; exec "$TILEC" "$SRC/lib/gemm.tile" -k gemm --emit=ir -o new.ir) >out.txt 2>err.txt
[ ! -e new.ir ] || fail "a failed write left a partial new.ir ($(wc -c <new.ir) bytes)"
# a successful -o replaces the file and gives it the usual permissions
run_tilec good.tile --emit=ir -o keep.ir
[ "$rc" -eq 0 ] && grep -q '^kernel @k' keep.ir || fail "-o keep.ir did not replace the file (exit status $rc)"
[ "$(stat -c %a keep.ir)" = "$(umask -S >/dev/null; printf '%o' $((0666 & ~$(umask))))" ] ||
  fail "-o keep.ir: mode $(stat -c %a keep.ir), expected $(printf '%o' $((0666 & ~$(umask))))"

# ---- bad option values: usage errors (exit status 2) naming the option and the value ---------

printf 'kernel s(X: f32[M, N], Y: out f32[M, N], alpha: f32, n: i32, flag: bool) grid(1) warps(4) {\n  Y[0 : +16, 0 : +16] = X[0 : +16, 0 : +16] * alpha;\n}\n' >scal.tile
RUN=(run scal.tile --device=cpu --size M=16,N=16 -a alpha=2 -a n=3 -a flag=true)
expect 0 "^ok$" "${RUN[@]}"
expect 2 "--seed.*'abc'" "${RUN[@]}" --seed=abc
expect 2 "--seed.*'-1'" "${RUN[@]}" --seed=-1
expect 2 "--seed.*'12x'" "${RUN[@]}" --seed=12x
expect 2 "--reps.*'-1'" "${RUN[@]}" --reps=-1
expect 2 "--reps.*'0'" "${RUN[@]}" --reps=0
expect 2 "--reps.*'99999999999999999999'" "${RUN[@]}" --reps=99999999999999999999
expect 2 "--reps.*''" "${RUN[@]}" --reps=
expect 2 "--flops.*'1/0\\+\\('" "${RUN[@]}" --flops='1/0+('
expect 2 "--flops.*'M\\*\\*N'" "${RUN[@]}" --flops='M**N'
expect 1 "--flops.*'2\\*M/\\(N-16\\)'.*division by zero" "${RUN[@]}" --bench --reps=3 --flops='2*M/(N-16)'
expect 1 "--flops.*'2\\*Q'.*unknown name 'Q'" "${RUN[@]}" --bench --reps=3 --flops='2*Q'
expect 1 "--flops.*'1e308\\*1e308'.*not a finite" "${RUN[@]}" --bench --reps=3 --flops='1e308*1e308'
expect 0 "TFLOP/s" "${RUN[@]}" --bench --reps=3 --flops='2*M*N'
expect 2 "-a NOPE=1.*no scalar parameter 'NOPE'.*alpha, n, flag" "${RUN[@]}" -a NOPE=1
expect 2 "-a alpha.*'abc'" "${RUN[@]}" -a alpha=abc
expect 2 "-a n.*'1.5'" "${RUN[@]}" -a n=1.5
expect 2 "-a n.*'4294967296'" "${RUN[@]}" -a n=4294967296
expect 2 "-a flag.*'maybe'" "${RUN[@]}" -a flag=maybe
expect 2 "--size.*'abc'" run scal.tile --device=cpu --size M=abc,N=16
expect 2 "--size.*'16x'" run scal.tile --device=cpu --size M=16x,N=16
expect 2 "--size.*'2147483648'" run scal.tile --device=cpu --size M=2147483648,N=16
expect 2 "--size.*'99999999999999999999'" run scal.tile --device=cpu --size M=99999999999999999999,N=16
# each size fits, their product does not
expect 2 "--size.*'X'.*overflow" run scal.tile --device=cpu --size M=2147483647,N=2147483647 -a alpha=1 -a n=1 -a flag=0
printf 'kernel big(X: f32[A, B, C, D], Y: out f32[A, B, C, D]) grid(1) warps(4) {\n  Y[0, 0, 0, 0 : +16] = X[0, 0, 0, 0 : +16];\n}\n' >big.tile
expect 2 "--size.*'X'.*overflow" run big.tile --device=cpu --size A=65536,B=65536,C=65536,D=65536
expect 2 "--budget.*'-5'" tune scal.tile --device=cpu --size M=16,N=16 --budget=-5
expect 2 "--budget.*'abc'" tune scal.tile --device=cpu --size M=16,N=16 --budget=abc
expect 2 "--budget.*'inf'" tune scal.tile --device=cpu --size M=16,N=16 --budget=inf
expect 2 "--config-budget.*'-1'" tune scal.tile --device=cpu --size M=16,N=16 --config-budget=-1
expect 2 "--top.*'-1'" tune scal.tile --device=cpu --size M=16,N=16 --top=-1
expect 2 "--max-configs.*'-3'" tune scal.tile --device=cpu --size M=16,N=16 --max-configs=-3
expect 2 "--threads.*'x'" tune scal.tile --device=cpu --size M=16,N=16 --threads=x
expect 2 "--reps.*'abc'" cache bench good.tile --reps=abc
expect 2 "dump-after: unknown pass 'nosuchpass' .*canonicalize.*smem-alloc; or all" good.tile --dump-after=nosuchpass
expect 0 "// ----- IR after cse" good.tile --dump-after=cse
expect 0 "// ----- IR after dce" good.tile --dump-after=all

# ---- the IR printer and parser agree -------------------------------------------------------

roundtrip() { # roundtrip FILE KERNEL [-D ...]
  local file=$1 kernel=$2 tag
  shift 2
  tag=$kernel$(printf '_%s' "$@" | tr -c 'A-Za-z0-9_\n' _)
  run_tilec "$SRC/lib/$file" -k "$kernel" "$@" --emit=ir -o "$tag.ir"
  if [ "$rc" -ne 0 ]; then
    fail "tilec $file -k $kernel $* --emit=ir: exit status $rc"
    sed 's/^/  /' err.txt | head -5
    return
  fi
  run_tilec "$tag.ir" --emit=ir -o "$tag.2.ir"
  if [ "$rc" -ne 0 ]; then
    fail "the IR of $kernel $* does not parse back:"
    sed 's/^/  /' err.txt | head -5
  elif ! cmp -s "$tag.ir" "$tag.2.ir"; then
    fail "the IR of $kernel $* prints differently after a round trip:"
    diff "$tag.ir" "$tag.2.ir" | head -10 | sed 's/^/  /'
  fi
}
for f in "$SRC"/lib/*.tile; do
  while read -r k; do
    roundtrip "${f##*/}" "$k"
  done < <(sed -n 's/^[[:space:]]*kernel[[:space:]]\{1,\}\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$f")
done
roundtrip gemm.tile gemm -D T=bf16 -D SCALED=true -D HAS_BIAS=true -D ACT=gelu -D HAS_RESIDUAL=true
roundtrip gemm.tile gemm -D T=f32 -D TF32=true
roundtrip attention.tile attention -D D=128 -D CAUSAL=true -D HAS_LSE=true
roundtrip softmax.tile softmax -D BN=64

# ---- a program the target cannot run (a limit): exit status 1 and file:line:col -----------------
printf 'kernel big(X: f32[N], Y: out f32[N]) grid(1) warps(1) {\n  Y[0 : +65536] = X[0 : +65536] * 2.0;\n}\n' >big.tile
expect 1 "^big\\.tile:2:19: error: a tile of 65536 elements needs 2048 registers" big.tile --emit=ptx --arch=sm_90a

# ---- per-kernel //! metadata: bmm takes `//! bmm.sizes` (BATCH) and `//! bmm.flops` -----------
cat >meta.tile <<'EOF2'
//! sizes = N=64
//! flops = N
//! twice.sizes = N=128
//! twice.flops = 1000000*N
kernel once(X: f32[N], Y: out f32[N]) grid(1) { Y[0 : +64] = X[0 : +64]; }
kernel twice(X: f32[N], Y: out f32[N]) grid(1) { Y[0 : +128] = X[0 : +128] * 2.0; }
EOF2
expect 0 "grid [0-9]+x[0-9]+x8" run "$SRC/lib/gemm.tile" -k bmm --device=cpu
run_tilec run meta.tile -k twice --device=cpu --bench --reps=2
# 1e6*128 operations in microseconds: a non-zero TFLOP/s (below 1 on a slow host, as under
# ASan), not the plain line's 0.00
grep -q "f32\[128\]" out.txt && grep -qE " (0\.0*[1-9]|[1-9])[0-9.]* TFLOP/s" out.txt ||
  { fail "twice: //! twice.sizes/flops not used"; sed 's/^/  /' out.txt | head -5; }
run_tilec run meta.tile -k once --device=cpu
[ "$rc" -eq 0 ] || fail "once: exit status $rc with the plain //! lines"

echo "tilec_errors: $checks tilec runs, $fails failed checks"
[ "$fails" -eq 0 ]
