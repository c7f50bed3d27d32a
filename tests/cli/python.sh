#!/usr/bin/env bash
# python.sh - the Python package's tests (tests/python, pytest) against this build's
# libtile.so: the CPU interpreter path everywhere, the PyTorch path where torch sees a GPU.
# Uses the first of $PYTHON, python3, /usr/bin/python3 that has cffi, numpy and pytest
# (tools/setup.sh installs Debian's python3-cffi, python3-numpy, python3-pytest).
# Skipped (77) without such an interpreter, and for sanitizer builds (a Python process
# cannot load an ASan library without preloading the runtime).
#
#   bash tests/cli/python.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
BUILD=$(cd "${1:?usage: python.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
SRC=$(cd "${2:?usage: python.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
LIB=$BUILD/libtile.so
[ -f "$LIB" ] || { echo "FAIL: $LIB not found"; exit 1; }
if command -v ldd >/dev/null && [[ "$(ldd "$LIB")" =~ libasan|libubsan ]]; then
  echo "SKIP: sanitizer build (libtile.so needs its runtime preloaded)"; exit 77
fi
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import cffi, numpy, pytest" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with cffi, numpy and pytest"; exit 77; }
CACHE=$(mktemp -d)
trap 'rm -rf "$CACHE"' EXIT
FAKE=$BUILD/tests/libfake_libcuda.so
[ -f "$FAKE" ] || FAKE=
cd "$SRC" && TILE_LIBRARY=$LIB TILE_FAKE_LIBCUDA=$FAKE TILE_CACHE_DIR=$CACHE "$PY" -m pytest -q -p no:cacheprovider tests/python
