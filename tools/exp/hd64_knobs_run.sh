# PERF.md 89: the hd64 N=4096 fused backward under the schedule's settings (one call)
source tools/exp/gpu_run1.sh
python3 tools/exp/hd64_knobs.py 2>&1 | grep -v Warning | tee $OUT/log.txt
