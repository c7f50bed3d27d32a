"""bwd_nolse.py - the fused backward's main kernel against tools/exp/attention_bwd_nolse.tile
(LSE and delta read once per tile instead of once per step; wrong results, timing only), in
one process: what the consumers' per-step global loads of LSE and delta cost (PERF.md 75)."""
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
        for name, path in (("fused", os.path.join(ROOT, "lib", "attention_bwd.tile")),
                           ("nolse", os.path.join(ROOT, "tools", "exp", "attention_bwd_nolse.tile"))):
            k = tile.compile(path, kernel="attention_bwd_" + name, defines=dict(T=c.tname, D=d, CAUSAL=causal))
            t[name] = be.time_ms(lambda: k(*args, scale=c.scale))
        print("%s: fused %.3f ms, LSE/delta hoisted %.3f ms (%.0f%%)" % (c.name, t["fused"], t["nolse"],
                                                                      100 * (t["fused"] / t["nolse"] - 1)))
