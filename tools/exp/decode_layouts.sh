# PERF.md 74: decode's page layouts and the gather's row layout (one device call)
source tools/exp/gpu_run1.sh
P=tools/exp/decode_profile.py
SANITIZE=0 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=100 ONLY='decode|gather|embedding' OUT=$OUT bash tools/gpu_check.sh .carry 2>&1 | tail -4
python3 -m pytest -q -x tests/python/test_decode_attention.py 2>&1 | tail -2
for lay in nhd hnd sdpa; do
  python3 $P layout=$lay time=1
  python3 $P layout=$lay time=1 schedule=gatherrows=0
done
python3 $P 64 2048 16 layout=nhd time=1
python3 $P 64 2048 16 layout=nhd time=1 schedule=gatherrows=0
python3 $P 64 2048 16 layout=sdpa time=1
python3 $P layout=nhd time=1 splits=16
python3 $P layout=nhd time=1 BN=32
python3 $P layout=nhd time=1 BN=32 splits=16
python3 $P layout=nhd time=1 BN=64 STAGES=2
python3 $P layout=sdpa time=1 BN=32
ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats --section SchedulerStats -k regex:'decode_split' -c 1 python3 $P > $OUT/ncu_rows.txt 2>&1
grep -E 'Duration|DRAM Throughput|Registers Per|Achieved Active|Executed Instructions  |Issue Slots|Warp Cycles Per Issued' $OUT/ncu_rows.txt
