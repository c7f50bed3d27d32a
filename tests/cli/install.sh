#!/usr/bin/env bash
# install.sh - `cmake --install` into a temporary prefix, then build and run the two example
# consumers (examples/consume/) against that installed tree only:
#  - cmake/: find_package(tile CONFIG REQUIRED) and tile::tile, configured with
#    CMAKE_PREFIX_PATH=PREFIX and the package registries off;
#  - pkgconfig/: a plain cc command with `pkg-config --cflags --libs tile`, first from the
#    prefix and then from a copy of the tree moved elsewhere (tile.pc is relocatable).
# Checks what was installed (header, library, tilec, lib kernels, CMake package and version
# file, tile.pc), that the installed tilec runs, that each consumer prints "ok", and that
# the consumers load libtile.so from the installed tree, never from BUILD_DIR.
#
#   bash tests/cli/install.sh BUILD_DIR SOURCE_DIR      (ctest runs it so)
# Exit 77 (skipped) only when cmake, a C compiler or pkg-config is missing (the pkg-config
# half alone is skipped when only pkg-config is missing; tools/setup.sh installs it).
set -uo pipefail
BUILD=$(cd "${1:?usage: install.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
SRC=$(cd "${2:?usage: install.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
CC=${CC:-cc}
command -v cmake >/dev/null || { echo "SKIP: no cmake"; exit 77; }
command -v "$CC" >/dev/null || { echo "SKIP: no C compiler"; exit 77; }
if command -v ldd >/dev/null && [ -f "$BUILD/libtile.so" ] && [[ "$(ldd "$BUILD/libtile.so")" =~ libasan|libubsan ]]; then
  echo "SKIP: sanitizer build (the consumers would need the sanitizer runtime preloaded)"; exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# nothing from the build tree may leak in through the environment
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH TILE_LIB_DIR
export TILE_CACHE_DIR=""

fails=0 checks=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { checks=$((checks + 1)); }

P=$TMP/prefix
if ! cmake --install "$BUILD" --prefix "$P" >"$TMP/install.log" 2>&1; then
  cat "$TMP/install.log"
  echo "FAIL: cmake --install"
  exit 1
fi
for f in include/tile.h lib/libtile.so bin/tilec share/tile/lib/gemm.tile share/tile/lib/softmax.tile \
  lib/cmake/tile/tileConfig.cmake lib/cmake/tile/tileConfigVersion.cmake lib/cmake/tile/tileTargets.cmake \
  lib/pkgconfig/tile.pc; do
  check
  [ -e "$P/$f" ] || fail "not installed: $f"
done
check
grep -rq "$BUILD\|$SRC" "$P/lib/cmake" "$P/lib/pkgconfig" && fail "the package files name the build or source tree"
check
out=$("$P/bin/tilec" --version 2>&1) || fail "the installed tilec does not run: $out"
check
"$P/bin/tilec" "$P/share/tile/lib/softmax.tile" --emit=ir >/dev/null 2>"$TMP/err" ||
  { fail "the installed tilec cannot compile an installed kernel"; cat "$TMP/err"; }

# A consumer binary must run, print "<name>: ok", and take libtile.so from the prefix.
run_consumer() { # LABEL BINARY PREFIX
  local label=$1 bin=$2 prefix=$3
  check
  if ! out=$("$bin" 2>&1); then
    fail "$label: the consumer failed: $out"
  elif ! grep -q ': ok (' <<<"$out"; then
    fail "$label: unexpected output: $out"
  else
    echo "$label: $out"
  fi
  if command -v ldd >/dev/null; then
    check
    local lib
    lib=$(ldd "$bin" | awk '$1 == "libtile.so" { print $3 }')
    case "$lib" in
    "$prefix"/*) ;;
    *) fail "$label: libtile.so resolves to '$lib', not into $prefix" ;;
    esac
  fi
}

# ---- CMake: find_package(tile) ----
check
if cmake -S "$SRC/examples/consume/cmake" -B "$TMP/cmake-build" -DCMAKE_PREFIX_PATH="$P" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
  -DCMAKE_C_COMPILER="$(command -v "$CC")" >"$TMP/cmake.log" 2>&1 &&
  cmake --build "$TMP/cmake-build" >>"$TMP/cmake.log" 2>&1; then
  grep -q "kernels in $P/share/tile/lib" "$TMP/cmake.log" || fail "cmake: tile_KERNEL_DIR is not the installed one"
  run_consumer cmake "$TMP/cmake-build/consume_softmax" "$P"
else
  fail "cmake: the consumer project does not configure or build"
  cat "$TMP/cmake.log"
fi
check
cmake -S "$SRC/examples/consume/cmake" -B "$TMP/cmake-none" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF >"$TMP/none.log" 2>&1 &&
  ! grep -q "kernels in /usr" "$TMP/none.log" && fail "cmake: found a tile package without CMAKE_PREFIX_PATH"

# ---- pkg-config ----
if ! command -v pkg-config >/dev/null; then
  echo "SKIP (pkg-config half): no pkg-config (tools/setup.sh installs it)"
  [ "$fails" -eq 0 ] && { echo "install: $checks checks passed (pkg-config skipped)"; exit 77; }
else
  pc_build() { # LABEL PREFIX
    local label=$1 prefix=$2
    check
    if PKG_CONFIG_PATH=$prefix/lib/pkgconfig sh "$SRC/examples/consume/pkgconfig/build.sh" "$TMP/$label" \
      >"$TMP/pc.log" 2>&1; then
      run_consumer "$label" "$TMP/$label" "$prefix"
    else
      fail "$label: the consumer does not build"
      cat "$TMP/pc.log"
    fi
  }
  check
  flags=$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs tile 2>&1) || fail "pkg-config tile: $flags"
  check
  got=$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --modversion tile 2>&1)
  want=$(sed -n 's/^project(tile VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
  [ "$got" = "$want" ] || fail "pkg-config --modversion tile: '$got', expected '$want'"
  pc_build pkgconfig "$P"
  # relocated: the same tree under another name still works through ${pcfiledir}
  mv "$P" "$TMP/moved"
  pc_build pkgconfig-moved "$TMP/moved"
  mv "$TMP/moved" "$P"
fi

if [ "$fails" -gt 0 ]; then
  echo "install: $fails of $checks checks failed"
  exit 1
fi
echo "install: $checks checks passed"
