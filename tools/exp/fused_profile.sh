#!/usr/bin/env bash
# fused_profile.sh - where lib/attention_bwd.tile's fused backward spends its time at hd128
# (B=2 H=16 HKV=4 N=4096 bf16), at the defaults and with early=0: ncu's stall reasons, and
# per SASS instruction (an experiment's harness; run on the GPU with the carry, results in $OUT).
set -u
source tools/exp/gpu_run1.sh
export PATH=$PATH:/usr/local/cuda/bin
for s in default early=0; do
  n=${s//=/}
  timeout 150 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
    --page details -k regex:attention_bwd_fused -c 1 python3 tools/exp/bwd_profile.py three=0 schedule=$s \
    > $OUT/ncu_$n.txt 2>&1
  grep -v "^==PROF" $OUT/ncu_$n.txt | grep -E "Duration|Throughput|Warp Cycles|Stall|stall|cycles being" | head -30
  timeout 150 ncu --clock-control none --section SourceCounters --section WarpStateStats --page source --csv \
    --print-source sass -k regex:attention_bwd_fused -c 1 python3 tools/exp/bwd_profile.py three=0 schedule=$s \
    > $OUT/sass_$n.csv 2>&1
  wc -l $OUT/sass_$n.csv
done
