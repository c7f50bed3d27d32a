"""hd64_sweep.py - lib/attention_bwd.tile at head dim 64 (issue 17's hd64 rows): the
persistent walk (the default: light products) against one program per tile (schedule
persistent=0), both forms, causal and not, against SDPA in one process (PERF.md 67, 82)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (2, 16, 16, 4096, 64, causal, torch.bfloat16)):
        c = be.BwdCase(*shape)
        for sched in (None, "persistent=0"):
            be.attention_bwd(*shape, case=c, schedule=sched)
            be.attention_bwd_fused(c, None, sched)
