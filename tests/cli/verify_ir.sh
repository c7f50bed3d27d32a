#!/usr/bin/env bash
# verify_ir.sh - the verifier's rules for GPU IR, one broken invariant per file: every
# tests/golden/ir-invalid/*.ir says on its first line what the verifier must report
# (`// expect: text`) or that it is valid (`// expect: valid`); `tilec opt` must refuse each
# broken file with that message, given as FILE:LINE:COL: error: ... (and accept the valid one).
#   bash tests/cli/verify_ir.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
BUILD=${1:?usage: verify_ir.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: verify_ir.sh BUILD_DIR SOURCE_DIR}
TILEC=$BUILD/tilec
[ -x "$TILEC" ] || { echo "FAIL: $TILEC not found"; exit 1; }
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fails=0 n=0
for f in "$SRC"/tests/golden/ir-invalid/*.ir; do
  n=$((n + 1))
  name=${f##*/}
  want=$(sed -n '1s|^// expect: *||p' "$f")
  out=$("$TILEC" opt "$f" -o /dev/null 2>&1)
  rc=$?
  if [ "$want" = valid ]; then
    [ $rc -eq 0 ] || { echo "FAIL: $name: rejected:"; printf '%s\n' "$out" | sed 's/^/  /'; fails=$((fails + 1)); }
  elif [ $rc -eq 0 ]; then
    echo "FAIL: $name: accepted; expected '$want'"
    fails=$((fails + 1))
  elif ! grep -qF -- "$want" <<<"$out"; then # (not printf | grep -q: with pipefail, grep's early exit fails printf)
    echo "FAIL: $name: expected '$want', got:"
    printf '%s\n' "$out" | sed 's/^/  /'
    fails=$((fails + 1))
  elif ! grep -F -- "$want" <<<"$out" | grep -qE "^$f:[0-9]+:[0-9]+: error: "; then
    echo "FAIL: $name: the message does not start with '$f:LINE:COL: error: ':"
    printf '%s\n' "$out" | sed 's/^/  /'
    fails=$((fails + 1))
  fi
done
# The fuzzers' IR-to-PTX reproducers (tests/fuzz/corpus-ir-ptx/regress-*.ir) through the whole
# back end: each compiles or is refused with a diagnostic, never an internal compiler error.
for f in "$SRC"/tests/fuzz/corpus-ir-ptx/regress-*.ir; do
  n=$((n + 1))
  arch=$(sed -n 's/.* target=\(sm_[0-9a]*\).*/\1/p' "$f" | head -1)
  out=$("$TILEC" "$f" --emit=ptx --arch="${arch:-sm_90a}" -o /dev/null 2>&1)
  rc=$?
  if [ $rc -gt 1 ] || grep -q "internal" <<<"$out"; then
    echo "FAIL: ${f##*/}: exit $rc:"
    printf '%s\n' "$out" | sed 's/^/  /' | head -5
    fails=$((fails + 1))
  elif [ "$(sed -n '1s|^// expect: *||p' "$f")" = valid ] && [ $rc -ne 0 ]; then
    echo "FAIL: ${f##*/}: rejected:"
    printf '%s\n' "$out" | sed 's/^/  /' | head -5
    fails=$((fails + 1))
  fi
done
echo "verify_ir: $n cases, $fails failed"
[ "$fails" -eq 0 ]
