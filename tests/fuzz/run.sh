#!/usr/bin/env bash
# run.sh - builds the fuzz targets if needed and runs one for a while on its corpus.
#
#   tests/fuzz/run.sh TARGET SECONDS [LIBFUZZER-ARGS...]
#       TARGET: frontend | ir | pipeline | ir_ptx. Runs one process on one core for SECONDS,
#       reading the repository's corpus (tests/fuzz/corpus, corpus-ir, corpus-pipeline,
#       corpus-ir-ptx; ir_ptx reads corpus-ir too) and writing
#       new inputs to $FUZZ_OUT/corpus-TARGET (not into the repository). Prints the number of
#       executions; exits non-zero on a crash, leak, timeout (a hang), out-of-memory or
#       sanitizer report, whose reproducer is left in $FUZZ_OUT/artifacts/.
#   tests/fuzz/run.sh TARGET merge [DIR...]
#       Adds to the repository's corpus the inputs of DIR... (default: $FUZZ_OUT/corpus-TARGET)
#       that reach new edges (libFuzzer -merge=1 -use_counters=0: edge coverage, not hit
#       counts, keeps the corpus small; nothing already there is removed).
#   tests/fuzz/run.sh TARGET minimize
#       Rewrites the repository's corpus to a minimal subset with the same coverage.
#
# Environment: FUZZ_OUT (default build-fuzz: the build and scratch directory), FUZZ_LOG (a
# file to which one Markdown table row per run is appended, e.g. tests/fuzz/LOG.md),
# FUZZ_REPRODUCIBLE=1 (a run that depends only on seed, corpus, binary and count; see below).
# Reproduce a failure: $FUZZ_OUT/fuzz_TARGET $FUZZ_OUT/artifacts/crash-...
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${1:?usage: run.sh frontend|ir|pipeline|ir_ptx SECONDS|merge|minimize [ARGS...]}
WHAT=${2:?usage: run.sh frontend|ir|pipeline|ir_ptx SECONDS|merge|minimize [ARGS...]}
shift 2
OUT=${FUZZ_OUT:-$ROOT/build-fuzz}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

# per target: corpus, dictionary, the largest input, the per-input time limit (the hang
# criterion, seconds: LLVM's back end compiles the largest legal kernels that fuzz_pipeline's
# cost estimate lets through in seconds, and a loaded CI machine has been 3x slower than a
# developer's, hence 60 for the targets that reach LLVM); SEEDS: another corpus read too (fuzz_ir_ptx starts from fuzz_ir's);
# EXTRA: more options (fuzz_pipeline: one token mutation per input, tile_mutator.h)
SEEDS= EXTRA=
case $TARGET in
frontend) CORPUS=$ROOT/tests/fuzz/corpus DICT=tile.dict MAXLEN=4096 TIMEOUT=10 ;;
ir) CORPUS=$ROOT/tests/fuzz/corpus-ir DICT=ir.dict MAXLEN=12288 TIMEOUT=10 ;;
pipeline) CORPUS=$ROOT/tests/fuzz/corpus-pipeline DICT=tile.dict MAXLEN=3072 TIMEOUT=60 EXTRA=-mutate_depth=1 ;;
ir_ptx) CORPUS=$ROOT/tests/fuzz/corpus-ir-ptx SEEDS=$ROOT/tests/fuzz/corpus-ir DICT=ir.dict MAXLEN=12288 TIMEOUT=60 ;;
*) echo "run.sh: unknown target '$TARGET' (frontend, ir, pipeline, ir_ptx)" >&2; exit 2 ;;
esac
mkdir -p "$CORPUS"
BIN=$OUT/fuzz_$TARGET

mkdir -p "$OUT/corpus-$TARGET" "$OUT/artifacts"
JOBS=${JOBS:-2} sh "$ROOT/tests/fuzz/build.sh" "$OUT" >"$OUT/build.log" 2>&1 ||
  { cat "$OUT/build.log"; echo "run.sh: build failed" >&2; exit 2; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

case $WHAT in
merge)
  [ $# -gt 0 ] || set -- "$OUT/corpus-$TARGET"
  before=$(ls "$CORPUS" | wc -l)
  "$BIN" -merge=1 -use_counters=0 -max_len=$MAXLEN -timeout=$TIMEOUT "$CORPUS" "$@" 2>&1 | grep -E "MERGE-OUTER|ERROR|SUMMARY" || true
  echo "run.sh: $TARGET corpus: $before -> $(ls "$CORPUS" | wc -l) files, $(du -sh "$CORPUS" | cut -f1)"
  exit 0 ;;
minimize)
  tmp=$OUT/minimize-$TARGET
  rm -rf "$tmp" && mkdir -p "$tmp"
  "$BIN" -merge=1 -use_counters=0 -max_len=$MAXLEN -timeout=$TIMEOUT "$tmp" "$CORPUS" 2>&1 | grep -E "MERGE-OUTER|ERROR|SUMMARY" || true
  [ "$(ls "$tmp" | wc -l)" -gt 0 ] || { echo "run.sh: minimize produced nothing" >&2; exit 1; }
  before=$(ls "$CORPUS" | wc -l)
  git -C "$ROOT" rm -q -r --cached --ignore-unmatch "${CORPUS#"$ROOT"/}" >/dev/null 2>&1 || true
  rm -rf "$CORPUS" && mv "$tmp" "$CORPUS"
  echo "run.sh: $TARGET corpus: $before -> $(ls "$CORPUS" | wc -l) files, $(du -sh "$CORPUS" | cut -f1)"
  exit 0 ;;
*[!0-9]*|"") echo "run.sh: SECONDS must be a number, or 'merge' or 'minimize'" >&2; exit 2 ;;
esac

SECONDS_=$WHAT
LOGF=$OUT/fuzz-$TARGET.log
# The repository's corpora are read as a list of files sorted by name (-seed_inputs), not as
# directories, whose order is the file system's. FUZZ_REPRODUCIBLE=1 (tests/fuzz/ci.sh) also
# starts from an empty output corpus and turns off the two things that make two runs with
# one seed differ (measured: fuzz_ir's runs parted after a few thousand executions): the
# periodic reload of the output directory (-reload, a timer) and the dictionary of values
# seen in comparisons (-use_cmp), which holds addresses. Then a run is a function of the
# seed, the corpus, the binary and the count of executions.
WORK=$OUT/corpus-$TARGET REPRO=
if [ "${FUZZ_REPRODUCIBLE:-0}" = 1 ]; then
  WORK=$OUT/repro-corpus-$TARGET REPRO="-reload=0 -use_cmp=0"
  rm -rf "$WORK" && mkdir -p "$WORK"
fi
LIST=$OUT/seeds-$TARGET.txt
find "$CORPUS" $SEEDS -type f | LC_ALL=C sort | paste -sd, - >"$LIST"
SEED_ARG=
[ -s "$LIST" ] && SEED_ARG="-seed_inputs=@$LIST"
echo "run.sh: fuzz_$TARGET for ${SECONDS_}s (log: $LOGF)"
t0=$(date +%s)
"$BIN" -max_total_time="$SECONDS_" -max_len=$MAXLEN -timeout=$TIMEOUT -rss_limit_mb=4096 \
  -dict="$ROOT/tests/fuzz/$DICT" -artifact_prefix="$OUT/artifacts/$TARGET-" -print_final_stats=1 $EXTRA $REPRO ${SEED_ARG:+"$SEED_ARG"} \
  "$@" "$WORK" >"$LOGF" 2>&1
rc=$?
elapsed=$(($(date +%s) - t0))
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$LOGF" | tail -1)
if [ $rc -eq 0 ]; then
  result="ok: no crash, hang, leak or sanitizer report"
else
  # the failure's kind and the reproducer
  kind=$(grep -m1 -oE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [a-z-]+|runtime error: .*|^fuzz_[a-z]+: .*" "$LOGF" || echo "exit status $rc")
  art=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$LOGF" | tail -1)
  result="FAILED ($kind)${art:+, reproducer $art}"
  grep -E -A40 "^==[0-9]+==ERROR|runtime error|^fuzz_[a-z]+:" "$LOGF" | head -60
fi
ptx=$(sed -n 's/^fuzz_[a-z_]*: [0-9]* inputs, \([0-9]*\) compiled to PTX.*/\1/p' "$LOGF" | tail -1)
[ -n "$ptx" ] && execs="${execs:-?} ($ptx compiled to PTX)"
echo "run.sh: fuzz_$TARGET: ${elapsed} s, ${execs:-?} executions, $result"
if [ -n "${FUZZ_LOG:-}" ]; then
  echo "| $(date -u +%Y-%m-%d) | $TARGET | ${elapsed} | ${execs:-?} | $result |" >>"$FUZZ_LOG"
fi
exit $rc
