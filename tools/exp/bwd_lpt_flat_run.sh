#!/usr/bin/env bash
# bwd_lpt_flat_run.sh - one device call for PERF.md 80-82: the backward's GPU checks, issue
# 17's rows at the defaults (LPT, flat maps), LPT on/off, the diagonal-only mask, hd64 walk on/off, an ncu look at
# the hd64 fused kernel (run on the GPU with the carry; results in $OUT)
set -u
source tools/exp/gpu_run1.sh
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p $OUT
(OUT=$OUT/chk ONLY='attention_bwd' SANITIZE=0 BENCH=0 TIME_BUDGET=100 bash tools/gpu_check.sh .carry 2>&1 | tail -3)
python3 tools/bench_examples.py bwd 2>&1 | tee $OUT/bwd.txt | cut -c1-250
python3 tools/exp/lpt_sweep.py > $OUT/lpt.txt 2>&1
grep "LPT=false" $OUT/lpt.txt | cut -c1-200
python3 tools/exp/diag_sweep.py 2>&1 | tee $OUT/diag.txt | cut -c1-200
timeout 150 python3 tools/exp/hd64_sweep.py 2>&1 | tee $OUT/hd64.txt | cut -c1-230
timeout 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --page details \
  -k regex:attention_bwd_fused -c 1 python3 tools/exp/bwd_profile.py 2 16 16 4096 64 three=0 > $OUT/ncu64.txt 2>&1
grep -v "^==PROF" $OUT/ncu64.txt | grep -E "Duration|Throughput|Stall|stall|Warp Cycles|Issued|Eligible" | head -30
