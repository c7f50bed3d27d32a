"""bwd_bm128_ab.py - the fused backward at 128 queries per step (PERF.md 117), interleaved in one
process at hd64: the form before 117 (tools/exp/attention_bwd_unfolded.tile, 64 queries per
step; labelled "lib" in tools/results/2026-12-12c, when it was lib's) against lib's folded
form at its default BM=128 (labelled "fold" there), with writer=1 and FlashAttention-3's
register split (regs=24/240). Arguments pick rows: 4096 (B=2 H=16 bf16), 2405 (B=1 H=16 f16),
4096c (causal), 2048 (B=4 H=16 f16); QUICK=1 runs only the first two variants, ROUNDS=n.
tools/exp/bwd_bm128_run.sh runs it on the GPU machine from .carry."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

OLD = os.path.join(be.ROOT, "tools", "exp", "attention_bwd_unfolded.tile")
LIB = os.path.join(be.ROOT, "lib", "attention_bwd.tile")
rows = {"4096": (2, 16, 16, 4096, 64, torch.bfloat16), "2405": (1, 16, 16, 2405, 64, torch.float16),
        "4096c": (2, 16, 16, 4096, 64, torch.bfloat16, True), "2048": (4, 16, 16, 2048, 64, torch.float16)}
for key in sys.argv[1:] or ["4096", "2405"]:
    b, h, hkv, n, d, dt = rows[key][:6]
    c = be.BwdCase(b, h, hkv, n, d, len(rows[key]) > 6, dt)
    for rnd in range(int(os.environ.get("ROUNDS", "2"))):
        variants = [(OLD, "unfolded", None), (LIB, "lib", None), (LIB, "lib", "writer=1,regs=24/240"),
                    (LIB, "lib", "regs=24/240")]
        for path, label, sched in variants[:2] if os.environ.get("QUICK") else variants:
            be.bwd_one_kernel(c, path, "attention_bwd_fused", "attention_bwd_dq_scale", "fused-" + label, None, sched)
