#!/usr/bin/env bash
# make_input.sh - writes a golden IR test input: a kernel's IR as it stands just before a
# pass, with the pass list of the test on its first line. Inputs are made once and then
# kept as they are (later changes to earlier passes must not change what a test feeds in).
#
#   tests/golden/ir/make_input.sh BUILD OUT.ir "PASSES" BEFORE -- TILEC-ARGS...
#     PASSES: what the test runs (comma-separated, as tilec opt --passes)
#     BEFORE: the pass after which the IR is taken (--dump-after; the last run of it)
# e.g. make_input.sh build tests/golden/ir/pipeline/gemm_ring.ir pipeline smem-stage -- \
#        lib/gemm.tile -k gemm --arch=sm_90a
# Then tests/cli/golden_ir.sh with TILE_UPDATE_GOLDEN=1 writes the expected output next to it.
set -euo pipefail
BUILD=$1 OUTF=$2 PASSES=$3 BEFORE=$4
shift 4
[ "$1" = -- ] && shift
mkdir -p "$(dirname "$OUTF")"
{
  echo "// passes: $PASSES"
  "$BUILD/tilec" "$@" --emit=ptx --dump-after="$BEFORE" -o /dev/null 2>&1 |
    awk '/^\/\/ ----- IR after /{buf=""; keep=1; next} keep{buf=buf $0 "\n"} END{printf "%s", buf}' |
    sed -n '/^kernel/,/^}/p'
} >"$OUTF"
echo "wrote $OUTF ($(wc -l <"$OUTF") lines)"
