# the twenty-fourth session's last device call: attention, decode and backward rows against
# the interpreter, then issue 17's decode and backward rows against PyTorch
source tools/exp/gpu_run1.sh
{
SANITIZE=0 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=150 ONLY='attention|decode' OUT=$OUT/chk bash tools/gpu_check.sh .carry 2>&1 | grep -v "^PASS\|^  *PASS" | tail -4
python3 tools/bench_examples.py decode bwd 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
