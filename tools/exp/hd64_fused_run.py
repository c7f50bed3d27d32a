"""hd64_fused_run.py - issue 17's hd64 backward rows, both forms, against SDPA in one process
(PERF.md 85: the fused kernel's dQ on wgmma, K in 64-byte panels)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (2, 16, 16, 4096, 64, causal, torch.bfloat16)):
        c = be.BwdCase(*shape)
        be.attention_bwd_fused(c, None, None)
        be.attention_bwd(*shape, case=c)
