"""writer_ab.py - the fused backward's candidates against lib's default, interleaved in one
process at issue 17's backward rows (non-causal and causal), gradients checked against
SDPA's:
  - writer=1: the producer warp issues dQ's reduce-adds (bulk-writer, PERF.md 116; entry 111
    bounds the gain: dropping the reduce-adds altogether saved 7-8%);
  - tools/exp/attention_bwd_fold.tile (PERF.md 117): LSE and delta folded into the products'
    accumulators, at lib's BM=64 and, for hd64, at BM=128 (FlashAttention-3's 128 x 128 step)
    with writer=1 and the producer's registers cut to 32 (regs=32/240).
Each row prints the whole backward against SDPA and the main kernel's time in brackets."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

LIB = os.path.join(be.ROOT, "lib", "attention_bwd.tile")
FOLD = os.path.join(be.ROOT, "tools", "exp", "attention_bwd_fold.tile")
rows = [(2, 16, 16, 4096, 64, torch.bfloat16), (2, 16, 4, 4096, 128, torch.bfloat16),
        (1, 16, 16, 2405, 64, torch.float16), (1, 16, 16, 2405, 128, torch.float16)]
only = set(sys.argv[1:])
for causal in (False, True):
    for b, h, hkv, n, d, dt in rows:
        c = be.BwdCase(b, h, hkv, n, d, causal, dt)
        variants = [(LIB, "lib", None, None), (LIB, "lib", None, "writer=1"), (FOLD, "fold", None, "writer=1")]
        if d == 64:
            variants += [(FOLD, "fold", {"BM": 128}, "writer=1,regs=32/240"), (FOLD, "fold", {"BM": 128}, "writer=1")]
        for rnd in range(2):
            for path, label, defs, sched in variants:
                if only and label not in only:
                    continue
                be.bwd_one_kernel(c, path, "attention_bwd_fused", "attention_bwd_dq_scale", "fused-" + label, defs, sched)
