"""diag_sweep.py - the causal backward with its mask applied only on the diagonal
(tools/exp/attention_bwd_diag.tile) against lib/attention_bwd.tile (the mask in every
step), both forms, issue 17's causal shapes, against SDPA in one process (PERF.md 82)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

DIAG = os.path.join(be.ROOT, "tools", "exp", "attention_bwd_diag.tile")
for shape in ((1, 16, 16, 2405, 64, True, torch.float16), (2, 16, 16, 4096, 64, True, torch.bfloat16),
              (2, 16, 4, 4096, 128, True, torch.bfloat16), (1, 16, 16, 2405, 128, True, torch.float16)):
    c = be.BwdCase(*shape)
    be.attention_bwd_fused(c)
    be.bwd_one_kernel(c, DIAG, "attention_bwd_fused", "attention_bwd_dq_scale", "fused_diag")
    be.attention_bwd(*shape, case=c)
    be.attention_bwd(*shape, case=c, dkdv_path=DIAG)
