# PERF.md 87: barrier-elide, checked (backward rows with compute-sanitizer) and measured
source tools/exp/gpu_run1.sh
{
SANITIZE=1 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=150 ONLY='attention_bwd' OUT=$OUT/chk bash tools/gpu_check.sh .carry 2>&1 | grep -v "^PASS\|^  *PASS" | tail -4
python3 tools/exp/elide_ab.py 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
