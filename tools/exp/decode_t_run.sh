# PERF.md 83: decode with the heads as the columns (K Q^T, N = 8) and a table entry per step
# where a page holds whole key blocks; N = 8 products (one device call)
source tools/exp/gpu_run1.sh
{
SANITIZE=1 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=150 ONLY='decode|narrow' OUT=$OUT/chk bash tools/gpu_check.sh .carry 2>&1 | grep -v "^PASS\|^  *PASS" | tail -12
python3 tools/bench_examples.py decode-ab decode 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
