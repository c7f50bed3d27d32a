# PERF.md 83-84: the decode and N = 8 rows again (the liveness fix), the hd64 backward at BM = 128
source tools/exp/gpu_run1.sh
{
SANITIZE=0 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=100 ONLY='decode|narrow' OUT=$OUT/chk bash tools/gpu_check.sh .carry 2>&1 | grep -v "^PASS\|^  *PASS" | tail -4
python3 tools/exp/bm128_sweep.py 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
