#!/usr/bin/env bash
# setup.sh - installs what the project needs (Debian 12 packages, only those missing) and
# builds it into ./build. Safe to run repeatedly; a second run only rebuilds what changed.
#
#   tools/setup.sh            install + build (RelWithDebInfo)
#   TILE_BUILD_DIR=b tools/setup.sh     build elsewhere
#   TILE_CMAKE_ARGS="-DTILE_SANITIZE=ON" tools/setup.sh   extra CMake options
#   TILE_SKIP_INSTALL=1 tools/setup.sh  do not touch packages (nor fetch ptxas)
#
# Without a CUDA toolkit, NVIDIA's ptxas is fetched from PyPI (the nvidia-cuda-nvcc-cu12
# wheel) into BUILD/ptxas/, so that tests/cli/ptxas.sh can assemble the emitted PTX and
# check it (no GPU needed). A failed download only skips that test.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build gcc g++ make llvm-22-dev flex bison libcriterion-dev
          libzstd-dev zlib1g-dev pkg-config python3-pip python3-cffi python3-numpy python3-pytest)

[ -n "${TILE_SKIP_INSTALL:-}" ] || bash tools/install_packages.sh setup "${PACKAGES[@]}"

# the NVTX v3 headers (header-only, for the library's profiler ranges) from PyPI into
# .deps/nvtx when no CUDA toolkit has them; without them the ranges are compiled out
NVTX_WHEEL=nvidia-nvtx-cu12==12.9.79
if [ -z "${TILE_SKIP_INSTALL:-}" ] && [ ! -f .deps/nvtx/include/nvtx3/nvToolsExt.h ] &&
   [ ! -f /usr/local/cuda/include/nvtx3/nvToolsExt.h ]; then
  tmp=$(mktemp -d)
  if python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$NVTX_WHEEL" >/dev/null 2>&1 &&
     python3 -c 'import glob, os, sys, zipfile
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
pre = "nvidia/nvtx/include/"
for n in z.namelist():
    if n.startswith(pre + "nvtx3/") and not n.endswith("/"):
        dst = os.path.join(sys.argv[2], n[len(pre):])
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "wb").write(z.read(n))' "$tmp" .deps/nvtx/include; then
    echo "setup: NVTX headers from $NVTX_WHEEL in .deps/nvtx"
  else
    echo "setup: could not fetch the NVTX headers ($NVTX_WHEEL); profiler ranges are compiled out"
  fi
  rm -rf "$tmp"
fi

BUILD_DIR=${TILE_BUILD_DIR:-build}
EXTRA=()
if [ -n "${CI:-}" ]; then EXTRA+=(-DTILE_WERROR=ON); fi
# shellcheck disable=SC2206
EXTRA+=(${TILE_CMAKE_ARGS:-})
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${TILE_BUILD_TYPE:-RelWithDebInfo}" "${EXTRA[@]}" >/dev/null
ninja -C "$BUILD_DIR"
echo "setup: built into $BUILD_DIR ($(ls -la "$BUILD_DIR"/libtile.so | awk '{print $5}') bytes libtile.so)"

# ptxas for tests/cli/ptxas.sh
PTXAS_WHEEL=nvidia-cuda-nvcc-cu12==12.9.86
if [ -z "${TILE_SKIP_INSTALL:-}" ] && [ ! -x "$BUILD_DIR/ptxas/ptxas" ] && [ ! -x /usr/local/cuda/bin/ptxas ] &&
   ! command -v ptxas >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  if python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$PTXAS_WHEEL" >/dev/null 2>&1 &&
     mkdir -p "$BUILD_DIR/ptxas" &&
     python3 -c 'import glob, sys, zipfile
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
open(sys.argv[2], "wb").write(z.read("nvidia/cuda_nvcc/bin/ptxas"))' "$tmp" "$BUILD_DIR/ptxas/ptxas.part" &&
     chmod +x "$BUILD_DIR/ptxas/ptxas.part" && mv "$BUILD_DIR/ptxas/ptxas.part" "$BUILD_DIR/ptxas/ptxas"; then
    echo "setup: ptxas from $PTXAS_WHEEL in $BUILD_DIR/ptxas"
  else
    echo "setup: could not fetch ptxas ($PTXAS_WHEEL); tests/cli/ptxas.sh will be skipped"
  fi
  rm -rf "$tmp"
fi
