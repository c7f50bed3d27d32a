#!/bin/sh
# Builds the front-end fuzzer with clang's libFuzzer, AddressSanitizer and UBSan:
#   tests/fuzz/build.sh [OUTDIR]        (default OUTDIR: build-fuzz in the repository root)
# then run it, e.g. for five minutes on the seed corpus (new inputs go to OUTDIR/corpus):
#   OUTDIR/fuzz_frontend -max_total_time=300 -max_len=4096 OUTDIR/corpus tests/fuzz/corpus
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-fuzz}
CC=${CC:-clang}
mkdir -p "$OUT/corpus"
bison -Wall -o "$OUT/parser.c" --header="$OUT/parser.h" "$ROOT/lang/parser.y"
flex -o "$OUT/lexer.c" "$ROOT/lang/lexer.l"
$CC -std=c17 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$ROOT/compiler/util" -I"$ROOT/compiler/target" -I"$ROOT/compiler/ir" -I"$ROOT/lang" -I"$OUT" \
  "$ROOT/compiler/util/util.c" "$ROOT/compiler/target/target.c" "$ROOT/compiler/ir/ir.c" "$ROOT/compiler/ir/print.c" \
  "$ROOT/compiler/ir/verify.c" "$ROOT"/lang/*.c "$OUT/parser.c" "$OUT/lexer.c" \
  "$ROOT/tests/fuzz/fuzz_frontend.c" -lm -o "$OUT/fuzz_frontend"
echo "built $OUT/fuzz_frontend"
