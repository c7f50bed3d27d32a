# PERF.md 85: the fused backward at hd64 with K in 64-byte panels (dQ on wgmma), one device call
source tools/exp/gpu_run1.sh
{
SANITIZE=1 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=150 ONLY='attention_bwd' OUT=$OUT/chk bash tools/gpu_check.sh .carry 2>&1 | grep -v "^PASS\|^  *PASS" | tail -6
python3 tools/exp/hd64_fused_run.py 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
