"""nodq_ab.py - how much of the fused backward's time its dQ reduce-adds cost (PERF.md 111):
lib/attention_bwd.tile against tools/exp/attention_bwd_nodq.tile (the same kernel adding dQ
only in the last query block of a head: timing only, its dQ is wrong), interleaved in one
process. The difference bounds what a dQ writer warp (FlashAttention-3's) could gain."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

lib = os.path.join(be.ROOT, "lib", "attention_bwd.tile")
nodq = os.path.join(be.ROOT, "tools", "exp", "attention_bwd_nodq.tile")
cases = [be.BwdCase(2, 16, 16, 4096, 64, False, torch.bfloat16), be.BwdCase(2, 16, 4, 4096, 128, False, torch.bfloat16),
         be.BwdCase(1, 16, 16, 2405, 64, False, torch.float16), be.BwdCase(1, 16, 16, 2405, 128, False, torch.float16)]
for c in cases:
    for path, label in ((lib, "lib"), (nodq, "nodq"), (lib, "lib"), (nodq, "nodq")):
        be.bwd_one_kernel(c, path, "attention_bwd_fused", "attention_bwd_dq_scale", "fused-" + label, None, None)
