#!/bin/bash
# sweep_attention.sh - times lib/attention.tile configurations against cuDNN in one process
# each (bench_attention.py --quick: bf16, B=4 H=32 N=4096, full and causal).
#   bash tools/sweep_attention.sh SCHEDULE D:CFG...   e.g. wgmma=1 128:BM=128,BN=128,NW=8
# Prints per configuration and N: full TFLOP/s (ours/cuDNN), causal TFLOP/s (ours/cuDNN).
# NS=1024,4096 picks the sequence lengths.
S=$1; shift
LIB=${LIB:-.carry/libtile.so}
NS=${NS:-4096}   # sequence lengths (B=4; 16384: B=1)
for c in "$@"; do
  d=${c%%:*}; cfg=${c#*:}
  r=$(timeout 90 python3 tools/bench_attention.py --lib "$LIB" --quick --no-extra --n "$NS" --schedule="$S" \
        --our-d$d "$cfg" 2>&1 | grep "^bf16 .* D=$d " |
      awk '{printf "%s %s %s (%s)  ", $4, $6, $7, $11}')
  echo "sched=$S D=$d $cfg : ${r:-failed}"
done
