"""splitk_bulk.py - examples/splitk_gemm.tile with its atomic_add through TMA's reduce-add
(bulkreduce, the default on sm_90a) against per-element f32 atomics (bulkreduce=0), and
torch.mm, in one process (an experiment, PERF.md 75)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402
import tile  # noqa: E402

for (m, n, k, dt, defs) in ((16, 4096, 8192, torch.float16, dict(BM=16, BN=64, BK=128, SPLIT=8)),
                            (16, 4096, 8192, torch.float16, dict(BM=16, BN=128, BK=64, SPLIT=16)),
                            (64, 8192, 8192, torch.bfloat16, dict(BM=64, BN=128, BK=64, SPLIT=4)),
                            (33, 4095, 4096, torch.float16, dict(BM=64, BN=128, BK=64, SPLIT=8))):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt)
    c = torch.zeros(m, n, device="cuda", dtype=torch.float32)
    ref = a.float() @ b.float()
    for sched in (None, "bulkreduce=0"):
        kern = tile.compile(be.ex("splitk_gemm"), defines=dict(T="f16" if dt == torch.float16 else "bf16", **defs),
                            schedule=sched)
        c.zero_()
        kern(a, b, c)
        err = ((c - ref).abs().max() / ref.abs().max()).item()

        def ours():
            c.zero_()
            kern(a, b, c)
        be.row("splitk_gemm %dx%dx%d %s %s %s" % (m, n, k, str(dt)[6:], ",".join("%s=%s" % kv for kv in defs.items()),
                                                 sched or "bulkreduce=1"),
               be.time_ms(ours), be.time_ms(lambda: torch.mm(a, b)), err, 1e-2, "vs torch.mm; ours includes zeroing C")
