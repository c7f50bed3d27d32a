"""ln_ab.py - lib/layernorm.tile's looped form with one pass for both statistics (shifted
sums) against the three-pass form (tools/exp/layernorm_3pass.tile), interleaved in one
process (PERF.md 95)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

old = os.path.join(be.ROOT, "tools", "exp", "layernorm_3pass.tile")
for m, n in ((4096, 50257), (4096, 50264), (8192, 8192)):
    for dt in (torch.float16, torch.bfloat16):
        for path in (None, old, None, old):
            be.rows("layernorm", m, n, dt, path=path)
