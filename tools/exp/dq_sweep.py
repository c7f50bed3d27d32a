"""dq_sweep.py - lib/attention_bwd.tile's attention_bwd_dq alone over tile configurations and
schedules, hd128 GQA and hd64, in one process (PERF.md 77)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402
import tile  # noqa: E402

lib = os.path.join(be.ROOT, "lib", "attention_bwd.tile")
for shape, causal in (((2, 16, 4, 4096, 128), False), ((2, 16, 4, 4096, 128), True), ((1, 16, 16, 2405, 64), False)):
    c = be.BwdCase(*shape, causal, torch.bfloat16)
    d = shape[4]
    args = (c.qd, c.kd, c.vd, c.do, c.lse, c.delta)
    c.pre(c.o, c.do, c.delta)
    ref = None
    k = tile.compile(os.path.join(be.ROOT, "tools", "exp", "attention_bwd_dq_order.tile"), kernel="attention_bwd_dq_order",
                     defines=dict(T=c.tname, D=d, CAUSAL=causal))
    k(*args, c.dq, scale=c.scale)
    err = ((c.dq.float() - c.ref[0].float()).abs().max() / c.ref[0].float().abs().max()).item()
    print("dq_order %s [%s]: %.3f ms, err %.1e" % (c.name, k.config(), be.time_ms(lambda: k(*args, c.dq, scale=c.scale)), err))
    for defs, sched in ((None, None), ({"BM": 64, "BN": 128}, None), ({"BM": 64, "BN": 64}, None),
                        ({"BM": 128, "BN": 64, "NW": 8}, "pingpong=0"), ({"BM": 128, "BN": 32}, None),
                        ({"BM": 64, "BN": 128, "NW": 4}, None)):
        try:
            k = tile.compile(lib, kernel="attention_bwd_dq", defines=dict(T=c.tname, D=d, CAUSAL=causal, **(defs or {})),
                             schedule=sched)
            k(*args, c.dq, scale=c.scale)
            err = ((c.dq.float() - c.ref[0].float()).abs().max() / c.ref[0].float().abs().max()).item()
            t = be.time_ms(lambda: k(*args, c.dq, scale=c.scale))
            print("dq %s [%s%s]: %.3f ms, err %.1e" % (c.name, k.config(), " " + sched if sched else "", t, err))
        except Exception as e:  # a configuration the kernel's constraints refuse
            print("dq %s %s: %s" % (c.name, defs, str(e).splitlines()[0][:120]))
