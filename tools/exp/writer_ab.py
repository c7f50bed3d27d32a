"""writer_ab.py - lib's fused backward against its alternatives, interleaved in one process at
issue 17's backward rows (non-causal and causal), gradients checked against SDPA's:
  - tools/exp/attention_bwd_unfolded.tile: the form before PERF.md 117 (LSE and delta
    subtracted per element, 64 queries per step at hd64): what 117 gained, and whether the
    folded form also holds at hd128, where both take 64;
  - writer=1: the producer warp issues dQ's reduce-adds (bulk-writer, PERF.md 116: 4% slower
    at hd64 N=4096 on the H100 with 64 queries per step).
Each row prints the whole backward against SDPA and the main kernel's time in brackets.
Arguments: labels to run (lib, unfolded, writer); all by default."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

LIB = os.path.join(be.ROOT, "lib", "attention_bwd.tile")
OLD = os.path.join(be.ROOT, "tools", "exp", "attention_bwd_unfolded.tile")
rows = [(2, 16, 16, 4096, 64, torch.bfloat16), (2, 16, 4, 4096, 128, torch.bfloat16),
        (1, 16, 16, 2405, 64, torch.float16), (1, 16, 16, 2405, 128, torch.float16)]
only = set(sys.argv[1:])
variants = [(LIB, "lib", None), (OLD, "unfolded", None), (LIB, "writer", "writer=1")]
for causal in (False, True):
    for b, h, hkv, n, d, dt in rows:
        c = be.BwdCase(b, h, hkv, n, d, causal, dt)
        for rnd in range(2):
            for path, label, sched in variants:
                if only and label not in only:
                    continue
                be.bwd_one_kernel(c, path, "attention_bwd_fused", "attention_bwd_dq_scale", "fused-" + label, None, sched)
