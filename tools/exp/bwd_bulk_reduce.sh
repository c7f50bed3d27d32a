source tools/exp/gpu_run1.sh
P=tools/exp/decode_profile.py
{
SANITIZE=0 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=90 ONLY='atomic|memory|scatter|attention_bwd' OUT=$OUT bash tools/gpu_check.sh .carry 2>&1 | grep -E "FAIL|gpu_check:" | head -20
python3 tools/bench_examples.py bwd-atomic
python3 - <<'PY'
import sys; sys.argv=['x']; sys.path.insert(0,'tools')
import bench_examples as be, torch
for causal in (False, True):
    be.attention_bwd_atomic(2, 16, 4, 4096, 128, causal, torch.bfloat16, schedule="bulkreduce=0")
    be.attention_bwd(2, 16, 4, 4096, 128, causal, torch.bfloat16)
    be.attention_bwd(1, 16, 16, 2405, 64, causal, torch.float16)
PY
for b in 64 128 256; do TILE_CACHE_DIR=/tmp/c$b TILE_GROW_BYTES=$b python3 $P layout=nhd time=1 | sed "s/^/rb=$b /"; done
TILE_CACHE_DIR=/tmp/c0 python3 $P layout=nhd time=1 schedule=gatherrows=0
for b in 64 128; do TILE_CACHE_DIR=/tmp/d$b TILE_GROW_BYTES=$b python3 $P 64 2048 16 layout=nhd time=1 | sed "s/^/rb=$b /"; done
} 2>&1 | grep -v Warn | tee $OUT/log.txt
