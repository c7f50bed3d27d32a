#!/usr/bin/env bash
# cache_robust.sh - the on-disk cache through tilec, on the CPU (no GPU needed): a stored
# tuning result is reused by a later process; an entry that is truncated, byte-flipped,
# empty, foreign, of another key, or a directory is ignored, tuned again and rewritten; a
# tilec killed between writing its temporary file and renaming it leaves a cache that still
# works, and `tilec cache clear` removes the stray file; concurrent processes storing the
# same key all succeed; `tilec cache path|list|clear`.
#
#   bash tests/cli/cache_robust.sh BUILD_DIR SOURCE_DIR        (ctest runs it so)
set -uo pipefail
BUILD=$(cd "${1:?usage: cache_robust.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
TILEC=$BUILD/tilec
[ -x "$TILEC" ] || { echo "FAIL: $TILEC not found"; exit 1; }
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TILE_CACHE_DIR=$TMP/cache
unset TILE_CACHE_TEST_DELAY_MS

fails=0 checks=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { checks=$((checks + 1)); }

cat >"$TMP/tiny.tile" <<'TILE'
//! sizes = N=4096
kernel scale<BM: 16 | 32 | 64 = 32, NW: 1 | 2 = 1>
    (X: f32[N], Y: out f32[N])
  grid(cdiv(N, BM))
  warps(NW)
{
  let o = program_id(0) * BM;
  Y[o : +BM] = X[o : +BM] * 2.0;
}
TILE

# tune [ARGS...]: runs tilec tune on tiny.tile; output in out.txt, status in $rc
tune() {
  "$TILEC" tune "$TMP/tiny.tile" --device=cpu --reps=2 "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
  rc=$?
  check
}
expect_tuned() { # $1: what happened before
  [ "$rc" -eq 0 ] || { fail "$1: exit status $rc"; cat "$TMP/err.txt"; return; }
  grep -q "6 timed" "$TMP/out.txt" || { fail "$1: not tuned again"; cat "$TMP/out.txt"; }
}
expect_reused() {
  [ "$rc" -eq 0 ] || { fail "$1: exit status $rc"; cat "$TMP/err.txt"; return; }
  grep -q "stored result" "$TMP/out.txt" || { fail "$1: the stored result was not reused"; cat "$TMP/out.txt"; }
}
entry() { ls "$TILE_CACHE_DIR"/tune-* 2>/dev/null | head -1; }
expect_valid_entry() {
  check
  local n
  n=$("$TILEC" cache list | grep -c INVALID)
  [ "$n" -eq 0 ] || { fail "$1: an invalid entry remains"; "$TILEC" cache list; }
  [ -f "$(entry)" ] || fail "$1: no entry file"
}

tune
expect_tuned "first tuning"
E=$(entry)
[ -n "$E" ] || { fail "no tune entry was stored"; exit 1; }
tune
expect_reused "second process"
cp "$E" "$TMP/good"

# damaged entries: each is ignored (tuned again) and rewritten
damage() { # $1: label; the entry has been damaged
  tune
  expect_tuned "$1"
  expect_valid_entry "$1"
  tune
  expect_reused "after $1"
}
head -c 100 "$TMP/good" >"$E"
damage "truncated entry"
printf '\x55' | dd of="$E" bs=1 seek=130 conv=notrunc 2>/dev/null
damage "flipped byte"
: >"$E"
damage "zero-length entry"
head -c 300 /dev/urandom >"$E"
damage "random bytes"
printf 'TILECACH\001\000\000\000garbage' >"$E"
damage "our magic, garbage after"
rm -f "$E" && mkdir "$E"
damage "a directory in place of the entry"

# another key's (valid) entry under this name
"$TILEC" tune "$TMP/tiny.tile" --device=cpu --reps=2 --size N=100 >/dev/null 2>&1
OTHER=$(ls -t "$TILE_CACHE_DIR"/tune-* | grep -v "$(basename "$E")" | head -1)
cp "$OTHER" "$E"
damage "another key's entry"

# a tilec killed between writing its temporary file and renaming it
TILE_CACHE_TEST_DELAY_MS=20000 "$TILEC" tune "$TMP/tiny.tile" --device=cpu --reps=2 --force >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do
  ls "$TILE_CACHE_DIR"/.tmp-* >/dev/null 2>&1 && break
  sleep 0.05
done
check
ls "$TILE_CACHE_DIR"/.tmp-* >/dev/null 2>&1 || fail "no temporary file appeared"
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
tune
expect_reused "after a killed writer"
check
grep -q '^temp' <<<"$("$TILEC" cache list)" || fail "the stray temporary file is not listed"
check
out=$("$TILEC" cache clear)
case $out in
"removed 3 files from $TILE_CACHE_DIR") ;;
*) fail "cache clear: '$out' (expected 3 files: two entries and the temporary file)" ;;
esac
check
[ -z "$(ls -A "$TILE_CACHE_DIR")" ] || { fail "files left after clear"; ls -la "$TILE_CACHE_DIR"; }

# concurrent writers of the same key
pids=()
for i in 1 2 3 4; do
  TILE_CACHE_TEST_DELAY_MS=200 "$TILEC" tune "$TMP/tiny.tile" --device=cpu --reps=2 --force >"$TMP/c$i.txt" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do
  check
  wait "$p" || fail "a concurrent tuner failed"
done
expect_valid_entry "concurrent writers"
check
[ "$(ls "$TILE_CACHE_DIR" | grep -c '^tune-')" -eq 1 ] || fail "one key, one entry"
check
[ "$(ls -A "$TILE_CACHE_DIR" | grep -c '^\.tmp-')" -eq 0 ] || fail "temporary files left by concurrent writers"
tune
expect_reused "after concurrent writers"

# path and the off switch
check
[ "$("$TILEC" cache path)" = "$TILE_CACHE_DIR" ] || fail "cache path"
check
[ "$(TILE_CACHE_DIR= "$TILEC" cache path)" = "(the on-disk cache is off)" ] || fail "TILE_CACHE_DIR= turns it off"
TILE_CACHE_DIR= "$TILEC" tune "$TMP/tiny.tile" --device=cpu --reps=2 >"$TMP/out.txt" 2>&1
rc=$?
expect_tuned "cache off"
check
[ "$(TILE_CACHE_DIR= "$TILEC" cache clear)" = "removed 0 files from (off)" ] || fail "clear with the cache off"

echo "cache_robust: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
