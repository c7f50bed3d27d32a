#!/usr/bin/env bash
# rows_ncu.sh - ncu's throughput and warp-state sections for the vocabulary rows' row-cache
# variants (PERF.md 97): the TMA fill against the threads' fill (tma=0) at one configuration.
# Arguments, when given, replace the variants: "KIND N SCHEDULE BN NW" each (SCHEDULE - for none).
set -u
M="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
V=("softmax 50257 rowcache=1 2048 8" "softmax 50257 rowcache=1,tma=0 2048 8" "rmsnorm 50257 rowcache=1 2048 16" "rmsnorm 50257 rowcache=1,tma=0 2048 16")
[ $# -gt 0 ] && V=("$@")
for v in "${V[@]}"; do
  echo "=== $v"
  ncu --clock-control none --launch-skip 3 --launch-count 1 $M python3 tools/exp/rows_one.py $v 2>&1 |
    grep -E 'Duration|DRAM Throughput|Memory Throughput|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|L2 Hit|Registers|Achieved Occupancy|Theoretical Occ|One or More' | head -40
done
