# PERF.md 86: the backward at N=2405 with LSE and delta in padded rows (16-byte strides), one call
source tools/exp/gpu_run1.sh
{
python3 tools/exp/padded_rows.py 2>&1 | grep -v Warning
python3 tools/bench_examples.py bwd 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
