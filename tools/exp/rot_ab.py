"""rot_ab.py - the fused backward with each key block's query loop rotated by its key block
(tools/exp/attention_bwd_rot.tile: the programs of a head add into different dQ rows at any
time) against lib/attention_bwd.tile, interleaved in one process (PERF.md 94)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

lib = os.path.join(be.ROOT, "lib", "attention_bwd.tile")
rot = os.path.join(be.ROOT, "tools", "exp", "attention_bwd_rot.tile")
cases = [be.BwdCase(2, 16, 16, 4096, 64, False, torch.bfloat16), be.BwdCase(2, 16, 16, 4096, 64, True, torch.bfloat16),
         be.BwdCase(2, 16, 4, 4096, 128, False, torch.bfloat16), be.BwdCase(1, 16, 16, 2405, 64, False, torch.float16),
         be.BwdCase(1, 16, 16, 2405, 128, False, torch.float16)]
for c in cases:
    for path, label in ((lib, "lib"), (rot, "rot"), (lib, "lib"), (rot, "rot")):
        be.bwd_one_kernel(c, path, "attention_bwd_fused", "attention_bwd_dq_scale", "fused-" + label, None, None)
