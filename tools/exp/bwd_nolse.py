"""bwd_nolse.py - the fused backward's main kernel at the defaults, with schedule early=0
(its wgmma issued and waited for one by one), and tools/exp/attention_bwd_nolse.tile (LSE
and delta read once per tile; wrong results, timing only), in one process (PERF.md 77)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402
import tile  # noqa: E402

ROOT = be.ROOT
for shape in ((2, 16, 4, 4096, 128), (1, 16, 16, 2405, 64)):
    for causal in (False, True):
        c = be.BwdCase(*shape, causal, torch.bfloat16)
        b, h, n, d = c.qd.shape
        acc = torch.zeros(b, h, n, d, device="cuda", dtype=torch.float32)
        args = (c.qd, c.kd, c.vd, c.do, c.lse, c.delta, c.dk, c.dv, acc)
        t = {}
        lib = os.path.join(ROOT, "lib", "attention_bwd.tile")
        for name, path, kern, sched in (("fused", lib, "fused", None), ("early=0", lib, "fused", "early=0"),
                                        ("nolse", os.path.join(ROOT, "tools", "exp", "attention_bwd_nolse.tile"),
                                         "nolse", None)):
            k = tile.compile(path, kernel="attention_bwd_" + kern, defines=dict(T=c.tname, D=d, CAUSAL=causal),
                             schedule=sched)
            t[name] = be.time_ms(lambda: k(*args, scale=c.scale))
        print("%s: fused %.3f ms, early=0 %.3f ms, LSE/delta hoisted (per-step loads, wrong values) %.3f ms" % (
            c.name, t["fused"], t["early=0"], t["nolse"]))
