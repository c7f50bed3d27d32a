# one device call: the long_tiles rule (PERF.md 91) - the attention rows against the
# interpreter, the forward hd128 causal rows at 8 / 16 / 32 key blocks per tile (default,
# plain grid, walk), and issue 17's backward rows
source tools/exp/gpu_run1.sh
{
SANITIZE=0 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=120 ONLY='attention' OUT=$OUT/chk bash tools/gpu_check.sh .carry 2>&1 | grep -v "^PASS\|^  *PASS" | tail -4
for nb in "1024 4" "2048 2" "4096 1"; do
  set -- $nb
  python3 tools/ab_attention.py --lib .carry/libtile.so --d 128 --n $1 --batch $2 --heads 32 --causal 1 --rounds 3 \
    --variant default=@ --variant plain=persistent=0@ --variant walk=persistent=1@ 2>&1 | grep -v Warn
done
python3 tools/bench_examples.py bwd 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
