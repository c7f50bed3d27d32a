"""pingpong_sweep.py - the backward's kernels with and without the warpgroups' turns
(schedule pingpong=0), each kernel timed alone and the three-kernel total against SDPA, in
one process (PERF.md 78)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (2, 16, 16, 4096, 64, causal, torch.bfloat16),
                  (2, 16, 4, 4096, 128, causal, torch.bfloat16), (1, 16, 16, 2405, 128, causal, torch.float16)):
        c = be.BwdCase(*shape)
        for sk, sq in ((None, None), (None, "pingpong=0"), ("pingpong=0", "pingpong=0")):
            be.attention_bwd(*shape, case=c, schedule=sk, dq_schedule=sq)
        be.attention_bwd_fused(c)
        be.attention_bwd_fused(c, schedule="pingpong=0")
