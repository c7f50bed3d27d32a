#!/usr/bin/env bash
# fused_profile.sh - where lib/attention_bwd.tile's fused backward spends its time at hd128
# (B=2 H=16 HKV=4 N=4096 bf16): ncu's stall reasons per SASS instruction, and the SASS with
# its register use (an experiment's harness; run on the GPU with the carry, results in $OUT).
set -u
source tools/exp/gpu_run1.sh
export PATH=$PATH:/usr/local/cuda/bin
./.carry/tilec lib/attention_bwd.tile -k attention_bwd_fused -D T=bf16 -D D=128 --arch=sm_90a --emit=ptx -o $OUT/fused.ptx
ptxas -arch=sm_90a -v $OUT/fused.ptx -o $OUT/fused.cubin 2>&1 | tail -2
cuobjdump -sass $OUT/fused.cubin > $OUT/fused.sass 2>&1 || nvdisasm $OUT/fused.cubin > $OUT/fused.sass 2>&1
grep -o "R[0-9]*" $OUT/fused.sass | sort -t R -k1.2 -n | uniq | tail -1
timeout 300 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section InstructionStats \
  --section SourceCounters -k regex:attention_bwd_fused -c 1 python3 tools/exp/bwd_profile.py > $OUT/ncu_fused.txt 2>&1
grep -v "^==PROF" $OUT/ncu_fused.txt | grep -A40 "Warp State Statistics" | head -60
timeout 200 ncu --clock-control none --section SourceCounters --section WarpStateStats --page source --csv --print-source sass -k regex:attention_bwd_fused -c 1 \
  python3 tools/exp/bwd_profile.py > $OUT/ncu_fused_sass.csv 2>&1
wc -l $OUT/ncu_fused_sass.csv
