#!/usr/bin/env bash
# hd64_profile.sh - where the fused backward's time goes at hd64 (B=2 H=16 N=4096 bf16, PERF.md
# 88): ncu's stall reasons and per-SASS-instruction samples (run on the GPU with the carry)
set -u
source tools/exp/gpu_run1.sh
export PATH=$PATH:/usr/local/cuda/bin
timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
  --page details -k regex:attention_bwd_fused -c 1 python3 tools/exp/bwd_profile.py 2 16 16 4096 64 three=0 \
  > $OUT/ncu.txt 2>&1
grep -v "^==PROF" $OUT/ncu.txt | grep -E "Duration|Throughput|Warp Cycles|Stall|stall|cycles being|Registers|Occupancy|Block Limit|Shared Memory" | head -40
timeout 200 ncu --clock-control none --section SourceCounters --section WarpStateStats --page source --csv \
  --print-source sass -k regex:attention_bwd_fused -c 1 python3 tools/exp/bwd_profile.py 2 16 16 4096 64 three=0 \
  > $OUT/sass.csv 2>&1
wc -l $OUT/sass.csv
