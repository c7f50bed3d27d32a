#!/usr/bin/env bash
# examples.sh - the example programs and bench_compile run and pass.
#
#   bash tests/cli/examples.sh BUILD_DIR SOURCE_DIR        (ctest runs it so)
#
# Each BUILD_DIR/example_* must exit 0 (PASS) or 77 (skipped: cuda_interop without a GPU);
# without a GPU the others run on the CPU interpreter. bench_compile --reps=1 must exit 0
# (without a GPU it measures tile_emit only). On the GPU machine, tools/gpu_check.sh runs
# the same programs on the GPU.
set -uo pipefail
BUILD=${1:?usage: examples.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: examples.sh BUILD_DIR SOURCE_DIR}
export TILE_LIB_DIR=$SRC/lib
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

fails=0 ran=0
for ex in "$BUILD"/example_* "$BUILD/bench_compile"; do
  [ -x "$ex" ] || continue
  args=()
  [ "${ex##*/}" = bench_compile ] && args=(--reps=1)
  out=$("$ex" "${args[@]}" 2>&1)
  rc=$?
  ran=$((ran + 1))
  case $rc in
  0) echo "PASS ${ex##*/}" ;;
  77) echo "SKIP ${ex##*/}: $(printf '%s\n' "$out" | tail -1)" ;;
  *)
    echo "FAIL ${ex##*/} (exit status $rc):"
    printf '%s\n' "$out" | sed 's/^/  /'
    fails=$((fails + 1))
    ;;
  esac
done
echo "examples: $ran programs, $fails failed"
[ "$ran" -gt 0 ] && [ "$fails" -eq 0 ]
