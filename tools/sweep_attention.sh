#!/bin/bash
# sweep_attention.sh - times lib/attention.tile configurations against cuDNN in one process
# each (bench_attention.py --quick: bf16, B=4 H=32 N=4096, full and causal).
#   bash tools/sweep_attention.sh SCHEDULE D:CFG...   e.g. wgmma=1 128:BM=128,BN=128,NW=8
# Prints per configuration: full TFLOP/s (ours/cuDNN), causal TFLOP/s (ours/cuDNN).
S=$1; shift
LIB=${LIB:-.carry/libtile.so}
for c in "$@"; do
  d=${c%%:*}; cfg=${c#*:}
  r=$(timeout 90 python3 tools/bench_attention.py --lib "$LIB" --quick --no-extra --schedule="$S" \
        --our-d$d "$cfg" 2>&1 | grep "^bf16 .* D=$d " | tail -2 |
      awk '{printf "%s %s (%s)  ", $6, $7, $11}')
  echo "sched=$S D=$d $cfg : ${r:-failed}"
done
