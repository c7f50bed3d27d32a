"""hd64_knobs.py - the fused backward at hd64 N=4096 (the row below 1.0x SDPA after PERF.md
87) under the schedule's other settings, against SDPA in one process (PERF.md 89)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    c = be.BwdCase(2, 16, 16, 4096, 64, causal, torch.bfloat16)
    for defs, sched in ((None, None), (None, "persistent=0"), (None, "early=0"), (None, "pingpong=0"),
                        (None, "once=0"), (None, "tileturns=1"), ({"BN": 64}, None), ({"BM": 32}, None)):
        try:
            be.attention_bwd_fused(c, defs, sched)
        except Exception as e:  # a configuration the kernel's constraints refuse
            print("fused %s %s %s: %s" % (c.name, defs, sched, str(e).splitlines()[0][:100]))
