#!/usr/bin/env bash
# bwd_run2.sh - the second device call of PERF.md 80-82 (flat maps off by default): issue 17's
# backward rows at the defaults, LPT on/off, the diagonal-only mask, then the flat-map probe
set -u
source tools/exp/gpu_run1.sh
mkdir -p $OUT
python3 tools/bench_examples.py bwd 2>&1 | tee $OUT/bwd.txt | cut -c1-250
python3 tools/exp/lpt_sweep.py > $OUT/lpt.txt 2>&1
grep "LPT=false" $OUT/lpt.txt | cut -c1-200
python3 tools/exp/diag_sweep.py 2>&1 | tee $OUT/diag.txt | grep "diag" | cut -c1-200
timeout 100 python3 tools/exp/flat_probe.py 2>&1 | tee $OUT/probe.txt
