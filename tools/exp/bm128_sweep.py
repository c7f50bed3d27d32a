"""bm128_sweep.py - lib/attention_bwd.tile at head dim 64 with 128 query rows per step
(PERF.md 84): at BM = 64 the fused kernel's dQ = dS @ K ([64, 64] over two warpgroups: 32
columns each) cannot read K as an MN-major wgmma operand (whole 64-column panels), so it
runs on mma.sync; at BM = 128 each warpgroup takes 64 rows and all five products are wgmma.
Both forms, causal and not, against SDPA in one process."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (2, 16, 16, 4096, 64, causal, torch.bfloat16)):
        c = be.BwdCase(*shape)
        be.attention_bwd_fused(c, None, None)
        be.attention_bwd_fused(c, {"BM": 128}, None)
        be.attention_bwd(*shape, case=c)
        be.attention_bwd(*shape, case=c, dkdv_defs={"BM": 128})
