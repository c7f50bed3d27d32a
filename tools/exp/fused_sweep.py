"""fused_sweep.py - lib/attention_bwd.tile's fused backward around its defaults on issue
17's shapes: early=1 (each wgmma asynchronous, waited where first read) and tile
configurations, against SDPA in one process (PERF.md 79). `fused_sweep.py early`: the
defaults against early=0."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (2, 16, 16, 4096, 64, causal, torch.bfloat16),
                  (2, 16, 4, 4096, 128, causal, torch.bfloat16), (1, 16, 16, 2405, 128, causal, torch.float16)):
        c = be.BwdCase(*shape)
        variants = ((None, None), (None, "early=1"), ({"BN": 64, "NW": 4}, None), ({"BM": 32}, None),
                    ({"BM": 32}, "early=1"))
        if "early" in sys.argv[1:]:  # PERF.md 79: the defaults (early on) against early=0
            variants = ((None, None), (None, "early=0"))
        for defs, sched in variants:
            try:
                be.attention_bwd_fused(c, defs, sched)
            except Exception as e:  # a configuration the kernel's constraints refuse
                print("fused %s %s %s: %s" % (c.name, defs, sched, str(e).splitlines()[0][:100]))
