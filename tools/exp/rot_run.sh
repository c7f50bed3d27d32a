# one device call: the rotated query loop (PERF.md 94) - its gradients against SDPA's in
# every row, the fused kernel under racecheck, the A/B timing
source tools/exp/gpu_run1.sh
python3 tools/exp/rot_ab.py 2>&1 | grep -v Warning | tee $OUT/log.txt
