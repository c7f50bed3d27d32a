"""flat_probe.py - the fused backward at head dim 64 for N = 2404..2408 (flat tensor maps for
LSE and delta where N is not a multiple of 4), one process per N: ok, or the CUDA error
(PERF.md 81)."""
import os
import subprocess
import sys

if len(sys.argv) > 1:
    import torch
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import bench_examples as be  # noqa: E402
    n, h, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    c = be.BwdCase(1, h, h, n, d, False, torch.float16)
    be.attention_bwd_fused(c, None, sys.argv[4] if len(sys.argv) > 4 else None)
    sys.exit(0)
for n, h, d, sched in ((2405, 16, 64, []), (2405, 16, 64, ["flatrows=1"]), (2406, 16, 64, ["flatrows=1"]),
                       (2405, 16, 128, ["flatrows=1"]), (333, 16, 64, ["flatrows=1"])):
    if True:
        r = subprocess.run([sys.executable, __file__, str(n), str(h), str(d)] + sched, capture_output=True, text=True,
                           timeout=120)
        tail = (r.stdout + r.stderr).strip().splitlines()
        print("N=%d H=%d D=%d %s rc=%d %s" % (n, h, d, sched, r.returncode, tail[-1][:200] if tail else ""))
