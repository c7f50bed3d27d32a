"""lpt_sweep.py - lib/attention_bwd.tile's causal backward with its programs dealt out
longest first (LPT, the default) against launch order (LPT=false), both forms (three
kernels; fused), issue 17's causal shapes, against SDPA in one process (PERF.md 80)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for shape in ((1, 16, 16, 2405, 64, True, torch.float16), (2, 16, 16, 4096, 64, True, torch.bfloat16),
              (2, 16, 4, 4096, 128, True, torch.bfloat16), (1, 16, 16, 2405, 128, True, torch.float16)):
    c = be.BwdCase(*shape)
    for lpt in (True, False):
        be.attention_bwd(*shape, case=c, dkdv_defs={"LPT": lpt}, dq_defs={"LPT": lpt})
        be.attention_bwd_fused(c, {"LPT": lpt})
