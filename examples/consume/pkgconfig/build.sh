#!/bin/sh
# build.sh - builds main.c against an installed tile with nothing but a C compiler and
# pkg-config (tile.pc). Point PKG_CONFIG_PATH at the installation's lib/pkgconfig:
#
#   PKG_CONFIG_PATH=/where/tile/is/installed/lib/pkgconfig sh examples/consume/pkgconfig/build.sh OUT
#   ./OUT
#
# The run path is set to the library directory, so OUT runs without LD_LIBRARY_PATH; the
# installed kernel directory (pkg-config --variable=kerneldir tile) is compiled in.
set -eu
out=${1:-consume_gemm}
here=$(dirname "$0")
libdir=$(pkg-config --variable=libdir tile)
kerneldir=$(pkg-config --variable=kerneldir tile)
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
${CC:-cc} -std=c17 -O2 -Wall -Wextra -o "$out" "$here/main.c" -DTILE_KERNEL_DIR="\"$kerneldir\"" \
  $(pkg-config --cflags --libs tile) -Wl,-rpath,"$libdir" -lm
