#!/usr/bin/env bash
# api_internal.sh - structural rules of the library's sources (issue 19):
#  - no code inside the library calls a public entry point (a TILE_API function of tile.h):
#    internal callers use the rt_* functions, so that a nested call never resets the
#    caller's error message or diagnostics; only the TILE_API wrappers themselves do;
#  - the compiler (compiler/, lang/) reads no environment variable;
#  - the tuner never looks inside an error message's text (it tests tile_errcode codes).
#
#   bash tests/cli/api_internal.sh BUILD_DIR SOURCE_DIR      (ctest runs it so)
set -uo pipefail
SRC=$(cd "${2:?usage: api_internal.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
cd "$SRC" || exit 1
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# the entry points: every TILE_API function declared in tile.h
mapfile -t api < <(grep -o 'TILE_API[^(]*\btile_[a-z0-9_]*(' runtime/include/tile.h | grep -o 'tile_[a-z0-9_]*(' | tr -d '(' | sort -u)
[ "${#api[@]}" -gt 20 ] || fail "found only ${#api[@]} entry points in tile.h"
pattern="\\b($(IFS='|'; echo "${api[*]}"))\\("
# a call: the name followed by '(' on a line that is not a definition (TILE_API ...) nor a comment
while IFS= read -r hit; do
  line=${hit#*:*:}
  case "$line" in
    TILE_API*) continue ;;
    \ \*\ * | \ \** | /\** | //*) continue ;;
  esac
  fail "an entry point called from inside the library: $hit"
done < <(grep -rnE "$pattern" runtime/*.c compiler lang --include='*.c' --include='*.h' --include='*.y' --include='*.l' 2>/dev/null |
         grep -v '^runtime/include/')

if grep -rn 'getenv' compiler lang --include='*.c' --include='*.h' --include='*.y' --include='*.l'; then
  fail "getenv in the compiler (compile options and flags are the only switches)"
fi

if grep -nE 'str(n?cmp|str|ncasecmp)\([^)]*(errmsg|msg|tile_errmsg)' runtime/tune.c; then
  fail "the tuner matches message text (use tile_errcode codes)"
fi

echo "api_internal: ${#api[@]} entry points, $fails failure(s)"
[ "$fails" -eq 0 ]
