# one device call: layernorm's one-pass statistics (PERF.md 95) - the layernorm rows against
# the interpreter, the PyTorch layernorm tests, then the A/B timing
source tools/exp/gpu_run1.sh
{
SANITIZE=0 BENCH=0 PYTHON_CHECK=0 PROFILE_CHECK=0 TIME_BUDGET=90 ONLY='layernorm|row_norm' OUT=$OUT/chk bash tools/gpu_check.sh .carry 2>&1 | grep -v "^PASS\|^  *PASS" | tail -4
python3 -m pytest -q -x tests/python/test_torch.py -k 'layer or norm or rows' 2>&1 | tail -3
python3 tools/exp/ln_ab.py 2>&1 | grep -v Warning
} 2>&1 | tee $OUT/log.txt
