# PERF.md 74: decode's page layouts and the gather's row layout (one device call)
source tools/exp/gpu_run1.sh
P=tools/exp/decode_profile.py
for lay in nhd hnd sdpa; do
  python3 $P layout=$lay time=1
  python3 $P layout=$lay time=1 schedule=gatherrows=0
done
for lay in nhd sdpa; do python3 $P 64 2048 16 layout=$lay time=1; done
python3 $P 64 2048 16 layout=nhd time=1 schedule=gatherrows=0
for st in 2 3 4; do python3 $P layout=nhd time=1 splits=16 STAGES=$st; done
python3 $P layout=nhd time=1 STAGES=4
python3 $P layout=nhd time=1 BN=32
python3 $P layout=nhd time=1 BN=32 STAGES=2
python3 $P 8 8187 8 layout=nhd time=1
python3 $P 8 8187 64 layout=nhd time=1
ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats --section SchedulerStats -k regex:'decode_split' -c 1 python3 $P > $OUT/ncu_rows.txt 2>&1
grep -E 'Duration|DRAM Throughput|Registers Per|Achieved Active|Executed Instructions  |Issue Slots|Warp Cycles Per Issued' $OUT/ncu_rows.txt
