#!/usr/bin/env bash
# golden_ir.sh - golden tests of the GPU passes on textual IR: every tests/golden/ir/*/*.ir
# names the passes to run on its first line (`// passes: a,b`); `tilec opt` runs them (with
# the verifier after each) and the printed IR must equal the .out file next to it. The
# output must also print back unchanged after parsing (round trip).
#   bash tests/cli/golden_ir.sh BUILD_DIR SOURCE_DIR         (ctest runs it so)
#   TILE_UPDATE_GOLDEN=1 bash tests/cli/golden_ir.sh ...     rewrites the .out files
set -uo pipefail
BUILD=${1:?usage: golden_ir.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: golden_ir.sh BUILD_DIR SOURCE_DIR}
TILEC=$BUILD/tilec
[ -x "$TILEC" ] || { echo "FAIL: $TILEC not found"; exit 1; }
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0 n=0
for in in "$SRC"/tests/golden/ir/*/*.ir; do
  n=$((n + 1))
  name=${in#"$SRC"/tests/golden/ir/}
  passes=$(sed -n '1s|^// passes: *||p' "$in")
  [ -n "$passes" ] || { echo "FAIL: $name: no '// passes:' line"; fails=$((fails + 1)); continue; }
  want=${in%.ir}.out
  if ! "$TILEC" opt "$in" --passes="$passes" --verify-each -o "$TMP/got" 2>"$TMP/err"; then
    echo "FAIL: $name: tilec opt --passes=$passes failed:"
    sed 's/^/  /' "$TMP/err"
    fails=$((fails + 1))
    continue
  fi
  if [ -n "${TILE_UPDATE_GOLDEN:-}${UPDATE_GOLDEN:-}" ]; then
    cp "$TMP/got" "$want"
    echo "updated $name"
  elif ! diff -u "$want" "$TMP/got" >"$TMP/diff"; then
    echo "FAIL: $name: the IR after $passes differs from ${want#"$SRC"/}:"
    head -40 "$TMP/diff" | sed 's/^/  /'
    fails=$((fails + 1))
    continue
  fi
  # round trip: the output parses and prints back the same
  if ! "$TILEC" opt "$TMP/got" -o "$TMP/again" 2>"$TMP/err" || ! cmp -s "$TMP/got" "$TMP/again"; then
    echo "FAIL: $name: the output does not print back the same after parsing"
    fails=$((fails + 1))
  fi
done
echo "golden_ir: $n cases, $fails failed"
[ "$fails" -eq 0 ] && [ "$n" -gt 0 ]
