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
  elif ! printf '%s' "$out" | grep -qF -- "$want"; then
    echo "FAIL: $name: expected '$want', got:"
    printf '%s\n' "$out" | sed 's/^/  /'
    fails=$((fails + 1))
  elif ! printf '%s\n' "$out" | grep -F -- "$want" | grep -qE "^$f:[0-9]+:[0-9]+: error: "; then
    echo "FAIL: $name: the message does not start with '$f:LINE:COL: error: ':"
    printf '%s\n' "$out" | sed 's/^/  /'
    fails=$((fails + 1))
  fi
done
echo "verify_ir: $n cases, $fails failed"
[ "$fails" -eq 0 ]
