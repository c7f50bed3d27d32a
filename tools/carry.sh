#!/usr/bin/env bash
# carry.sh - build, here, what the GPU machine needs to run tools/gpu_check.sh, and gather it
# in ./.carry (git-ignored).
#
# The GPU machine has a C compiler and CUDA but no LLVM, flex or bison, so libtile.so (LLVM
# inside) cannot be built there. This script makes a stripped Release build in build-carry/
# and copies into .carry/:
#   libtile.so, tilec, bench_compile, bench_gemm, example_* (they find libtile.so next to themselves:
#   RUNPATH $ORIGIN), cuda_smoke (tools/cuda_smoke.c + runtime/cudrv.c, needs only libdl),
#   and MANIFEST (what was built, from which commit).
# The binaries need glibc 2.36 or newer (the GPU machine has 2.39).
#
#   tools/carry.sh                               build and fill .carry/
#   TILE_CARRY_DIR=dir TILE_CARRY_BUILD=bdir tools/carry.sh    elsewhere
#
# Then run on the GPU machine, from the repository root (the device tool: carry ".carry"):
#   bash tools/gpu_check.sh .carry
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${TILE_CARRY_BUILD:-build-carry}
DEST=${TILE_CARRY_DIR:-.carry}
LIMIT_MB=48 # what travels to the GPU machine is limited to 64 MiB in all

echo "carry: configuring $BUILD (Release, stripped, no tests)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILE_STRIP=ON -DTILE_TESTS=OFF -DTILE_TEST_HOOKS=OFF \
  -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON >/dev/null
targets=(tile tilec bench_compile)
[ -f tools/bench_gemm.c ] && targets+=(bench_gemm) # GEMM vs cuBLASLt (tools/bench_gemm.c)
for f in examples/*.c; do
  n=${f##*/}
  targets+=("example_${n%.c}")
done
ninja -C "$BUILD" "${targets[@]}"

rm -rf "$DEST"
mkdir -p "$DEST"
cp "$BUILD/libtile.so" "$BUILD/tilec" "$BUILD/bench_compile" "$BUILD"/example_* "$DEST/"
if [ -f tools/bench_gemm.c ]; then cp "$BUILD/bench_gemm" "$DEST/"; fi
# cuda_smoke is built by hand: it links only the driver layer, not libtile.so
"${CC:-cc}" -std=c17 -O2 -Wall -Wextra -I runtime -I compiler/util tools/cuda_smoke.c runtime/cudrv.c -ldl -lm \
  -o "$DEST/cuda_smoke"
if command -v strip >/dev/null 2>&1; then
  for f in "$DEST"/*; do strip --strip-unneeded "$f" 2>/dev/null || true; done
fi

# The executables must find libtile.so next to them wherever .carry lands.
for f in "$DEST/tilec" "$DEST/bench_compile" "$DEST"/example_* "$DEST"/bench_gemm; do
  [ -e "$f" ] || continue
  if command -v readelf >/dev/null 2>&1 && ! readelf -d "$f" | grep -q 'R.*PATH.*[$]ORIGIN'; then
    echo "carry: warning: $f has no \$ORIGIN runpath; gpu_check.sh sets LD_LIBRARY_PATH" >&2
  fi
done

# The Python wheel (pyproject.toml): it holds libtile.so, so the carry keeps only the wheel and
# tools/gpu_check.sh unpacks the library from it there (the transfer limit is 64 MiB). cffi for
# the GPU machine's Python goes to wheels/ (that machine cannot download).
version=$(LD_LIBRARY_PATH="$DEST" "$DEST/tilec" --version)
if [ -z "${TILE_CARRY_NO_WHEEL:-}" ] && python3 -m pip --version >/dev/null 2>&1; then
  echo "carry: building the Python wheel (build-wheel/)"
  if python3 -m pip wheel . -w "$DEST" --no-deps -q >"$BUILD/wheel.log" 2>&1; then
    rm -f "$DEST/libtile.so"
    python3 -m pip download -q --only-binary=:all: --python-version "${CARRY_PYTHON_VERSION:-3.12}" \
      --platform manylinux2014_x86_64 --implementation cp -d "$DEST/wheels" cffi pycparser >/dev/null 2>&1 ||
      echo "carry: warning: could not download cffi wheels for Python ${CARRY_PYTHON_VERSION:-3.12}" >&2
  else
    echo "carry: warning: the wheel did not build (see $BUILD/wheel.log); carrying libtile.so" >&2
  fi
fi

{
  echo "built:   $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -m), $(ldd --version 2>/dev/null | head -1)"
  echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "($(git status --porcelain 2>/dev/null | wc -l | tr -d ' ') files changed or new)"
  echo "version: $version"
  echo "files:   $(cd "$DEST" && echo *)"
} >"$DEST/MANIFEST"

kb=$(du -sk "$DEST" | cut -f1)
for f in "$DEST"/* "$DEST"/wheels/*; do [ -f "$f" ] || continue; printf '  %10d  %s\n' "$(wc -c <"$f")" "${f##*/}"; done
cat "$DEST/MANIFEST"
echo "carry: $DEST holds $((kb / 1024)) MiB ($kb KiB)"
if [ "$kb" -gt $((LIMIT_MB * 1024)) ]; then
  echo "carry: $DEST is over $LIMIT_MB MiB: too close to the 64 MiB transfer limit" >&2
  exit 1
fi
