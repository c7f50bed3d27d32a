"""walk_trips.py - the fused backward's causal hd64 rows with the persistent walk and without
(one program per tile), in one process: the data for a walk rule that looks at the
tiles' trip counts (PERF.md 89, 91)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for n in (2048, 3072, 4096):
    c = be.BwdCase(2, 16, 16, n, 64, True, torch.bfloat16)
    for sched in (None, "persistent=0", None, "persistent=0"):
        be.attention_bwd_fused(c, None, sched)
