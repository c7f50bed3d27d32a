#!/bin/sh
# Builds the libFuzzer targets (fuzz_frontend, fuzz_ir, fuzz_pipeline) with clang, ASan and
# UBSan, from the CMake project next to this file, into their own build directory:
#   tests/fuzz/build.sh [OUTDIR]        (default OUTDIR: build-fuzz in the repository root)
# A second run only rebuilds what changed. JOBS (default 2) sets the build's parallelism;
# CC and CXX (default clang, clang++) the compilers: Debian 12's clang 14 is what CI uses.
# Then run one, e.g. tests/fuzz/run.sh ir 60 (see README.md next to this file).
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-fuzz}
CC=${CC:-clang}
CXX=${CXX:-clang++}
case "$CC" in *clang*) ;; *) CC=clang CXX=clang++ ;; esac # a gcc CC from the environment cannot link libFuzzer
if [ ! -f "$OUT/build.ninja" ]; then
  cmake -S "$ROOT/tests/fuzz" -B "$OUT" -G Ninja -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" >/dev/null
fi
cmake --build "$OUT" -j "${JOBS:-2}"
echo "built $OUT/fuzz_frontend $OUT/fuzz_ir $OUT/fuzz_pipeline"
