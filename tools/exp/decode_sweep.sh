# PERF.md 75: decode's split kernel at the 128-byte gather rows: key block, stages, warps and
# split count (one device call, after bwd_bulk_reduce.sh's setup)
source tools/exp/gpu_run1.sh
P=tools/exp/decode_profile.py
{
python3 $P layout=nhd time=1
python3 $P layout=nhd time=1 BN=32
python3 $P layout=nhd time=1 BN=32 STAGES=2
python3 $P layout=nhd time=1 BN=16 STAGES=4
python3 $P layout=nhd time=1 splits=16
python3 $P layout=nhd time=1 splits=12
python3 $P layout=nhd time=1 BN=32 NW=2
python3 $P layout=nhd time=1 BN=64 NW=4 STAGES=2
python3 $P layout=sdpa time=1
python3 $P 64 2048 16 layout=nhd time=1
python3 $P 64 2048 16 layout=nhd time=1 BN=32
} 2>&1 | grep -v Warn | tee $OUT/decode.txt
