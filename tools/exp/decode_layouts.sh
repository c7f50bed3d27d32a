# PERF.md 74: decode's page layouts and the gather's row layout (one device call)
source tools/exp/gpu_run1.sh
P=tools/exp/decode_profile.py
{
SANITIZE=0 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=60 ONLY='decode|gather|embedding' OUT=$OUT bash tools/gpu_check.sh .carry 2>&1 | tail -3
python3 -m pytest -q -x tests/python/test_decode_attention.py 2>&1 | tail -1
python3 $P layout=nhd time=1
python3 $P layout=nhd time=1 schedule=gatherrows=0
python3 $P layout=sdpa time=1
python3 $P layout=nhd time=1 BN=32
python3 $P layout=hnd time=1
python3 $P layout=sdpa time=1 schedule=gatherrows=0
python3 $P 64 2048 16 layout=nhd time=1
python3 $P 64 2048 16 layout=nhd time=1 schedule=gatherrows=0
python3 $P layout=sdpa time=1 BN=32
} 2>&1 | grep -v Warning | tee $OUT/log.txt
