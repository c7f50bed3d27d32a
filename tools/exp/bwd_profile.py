"""bwd_profile.py - lib/attention_bwd.tile's fused backward (and the three-kernel form) on
one problem, each kernel run twice, for ncu (an experiment's harness, PERF.md 75):

  ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
      -k regex:attention_bwd python3 tools/exp/bwd_profile.py [B H HKV N D] [causal=1]
      [schedule=early=1] [three=0]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

args = [int(a) for a in sys.argv[1:] if "=" not in a] or [2, 16, 4, 4096, 128]
defs = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
c = be.BwdCase(*args, defs.get("causal", "0") == "1", torch.bfloat16)
be.attention_bwd_fused(c, schedule=None if defs.get("schedule", "default") == "default" else defs["schedule"])
if defs.get("three", "1") == "1":
    be.attention_bwd(*args, defs.get("causal", "0") == "1", torch.bfloat16, case=c)
