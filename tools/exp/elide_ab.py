"""elide_ab.py - the fused backward with and without the barrier-elide pass (schedule
elide=0) on issue 17's rows, against SDPA in one process (PERF.md 87)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (2, 16, 16, 4096, 64, causal, torch.bfloat16),
                  (2, 16, 4, 4096, 128, causal, torch.bfloat16), (1, 16, 16, 2405, 128, causal, torch.float16)):
        c = be.BwdCase(*shape)
        be.attention_bwd_fused(c, None, "elide=0")
        be.attention_bwd_fused(c, None, None)
