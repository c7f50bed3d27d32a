"""padded_rows.py - the N=2405 backward rows with LSE and delta unpadded (row strides of 9620
bytes: the consumers load them every step) against padded to 2408 (TMA with the stages),
both forms, in one process (PERF.md 86)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

for causal in (False, True):
    for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (1, 16, 16, 2405, 128, causal, torch.float16)):
        for pad in (False, True):
            c = be.BwdCase(*shape, pad_rows=pad)
            be.attention_bwd(*shape, case=c)
            be.attention_bwd_fused(c)
