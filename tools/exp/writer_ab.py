"""writer_ab.py - the producer warp issuing the fused backward's dQ reduce-adds (bulk-writer,
schedule writer=1; PERF.md 116) against the consumers issuing them (the default), interleaved
in one process at issue 17's backward rows (non-causal and causal), gradients checked
against SDPA's. PERF.md 111 bounds the gain: dropping the reduce-adds altogether saved 7-8%."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

rows = [(2, 16, 16, 4096, 64, torch.bfloat16), (2, 16, 4, 4096, 128, torch.bfloat16),
        (1, 16, 16, 2405, 64, torch.float16), (1, 16, 16, 2405, 128, torch.float16)]
for causal in (False, True):
    for b, h, hkv, n, d, dt in rows:
        c = be.BwdCase(b, h, hkv, n, d, causal, dt)
        for sched in (None, "writer=1", None, "writer=1"):
            be.attention_bwd_fused(c, schedule=sched)
