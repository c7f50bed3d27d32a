#!/usr/bin/env bash
# ptxas_sweep.sh - assemble the PTX of every GEMM and attention tile configuration the
# autotuner may pick (the candidates in lib/gemm.tile and lib/attention.tile) with each
# given ptxas, and list the ones it rejects or crashes on. The JIT of a CUDA 12 driver is
# that version's ptxas: a crash there would take the user's process down (ptxas 12.8 and
# 12.9 once segfaulted on 10 of 22 unaligned GEMM shapes, PERF.md entry 11). No GPU needed;
# about 15 minutes on 2 cores.
#
#   tools/ptxas_sweep.sh [PTXAS...]     (default: build/ptxas/ptxas and /usr/local/cuda/bin/ptxas)
#   JOBS=n ARCH=sm_90a TILEC=build/tilec tools/ptxas_sweep.sh ...
#
# Exit status 1 if any configuration failed.
set -uo pipefail
cd "$(dirname "$0")/.."
TILEC=${TILEC:-build/tilec}
ARCH=${ARCH:-sm_90a}
JOBS=${JOBS:-$(nproc)}
PTXASES=("$@")
if [ ${#PTXASES[@]} -eq 0 ]; then
  for p in build/ptxas/ptxas /usr/local/cuda/bin/ptxas; do [ -x "$p" ] && PTXASES+=("$p"); done
fi
[ ${#PTXASES[@]} -gt 0 ] || { echo "ptxas_sweep: no ptxas (run tools/setup.sh, or name one)" >&2; exit 2; }
[ -x "$TILEC" ] || { echo "ptxas_sweep: $TILEC not found" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TILEC ARCH TMP
export PTXAS_LIST="${PTXASES[*]}"

# one FILE KERNEL FLAG DEFINES...: emit, then assemble with every ptxas
one() {
  local file=$1 kernel=$2 flag=$3
  shift 3
  local tag=$TMP/$BASHPID args=()
  for d in "$@"; do args+=(-D "$d"); done
  [ "$flag" = - ] && flag=
  # a configuration the front end refuses (too large for the tile) is not the tuner's either
  "$TILEC" "lib/$file" -k "$kernel" $flag "${args[@]}" --emit=ptx --arch="$ARCH" -o "$tag.ptx" 2>/dev/null || return 0
  for p in $PTXAS_LIST; do
    timeout 600 "$p" -arch="$ARCH" "$tag.ptx" -o "$tag.cubin" >/dev/null 2>&1
    local rc=$?
    [ $rc -ne 0 ] && echo "FAIL rc=$rc $p $kernel $flag $*"
  done
  echo >>"$TMP/count.$BASHPID"
  rm -f "$tag.ptx" "$tag.cubin"
}
export -f one

{
  for u in - --unaligned; do
    for bm in 16 32 64 128 256; do for bn in 32 64 128 256; do for bk in 16 32 64 128; do
      for st in 2 3 4; do for nw in 4 8; do
        echo "gemm.tile gemm $u BM=$bm BN=$bn BK=$bk STAGES=$st NW=$nw"
      done; done
    done; done; done
  done
  for d in 64 128; do for bm in 64 128; do for bn in 16 32 64 128; do for nw in 4 8; do
    for st in 1 2 3; do for c in false true; do for bnm in 16 64; do
      echo "attention.tile attention - D=$d BM=$bm BN=$bn BNM=$bnm NW=$nw STAGES=$st CAUSAL=$c"
    done; done; done
  done; done; done; done
} | xargs -P "$JOBS" -L 1 bash -c 'one "$@"' _ | tee "$TMP/fails"

n=$(cat "$TMP"/count.* 2>/dev/null | wc -l)
f=$(wc -l <"$TMP/fails")
echo "ptxas_sweep: $n configurations assembled with ${#PTXASES[@]} ptxas ($PTXAS_LIST) for $ARCH, $f failures"
[ "$f" -eq 0 ]
