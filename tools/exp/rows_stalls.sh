#!/usr/bin/env bash
# rows_stalls.sh - where a row kernel's warps wait and what it moves from DRAM and L2 (ncu
# metrics: DRAM bytes, L2 read sectors and hits, issued instructions, the sampled stall
# reasons), one line per nonzero metric. Arguments: "KIND N SCHEDULE BN NW" each (SCHEDULE -
# for none), as tools/exp/rows_ncu.sh takes them (PERF.md 113).
set -u
M=regex:smsp__pcsamp_warps_issue_stalled_.*[^d]$,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum
M=$M,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed.sum,gpu__time_duration.sum
for v in "$@"; do
  echo "=== $v"
  ncu --clock-control none --launch-skip 3 --launch-count 1 --metrics "$M" python3 tools/exp/rows_one.py $v 2>&1 |
    grep -E '^ +(dram|lts|sm__|smsp|gpu__)' | awk '$NF != "0" {print "   ", $1, $(NF-1), $NF}'
done
