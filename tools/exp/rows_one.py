"""rows_one.py KIND N SCHEDULE BN NW [M] - one row kernel compiled as given and launched 4
times on fresh f16 input (for ncu: --launch-skip 3 --launch-count 1). SCHEDULE '-' for none."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402
import tile  # noqa: E402

kind, n, sched, bn, nw = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
m = int(sys.argv[6]) if len(sys.argv) > 6 else 4096
x = torch.randn(m, n, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
w = torch.randn(n, device="cuda", dtype=torch.float16)
b = torch.randn(n, device="cuda", dtype=torch.float16)
st = torch.empty(m, device="cuda", dtype=torch.float32)
st2 = torch.empty(m, device="cuda", dtype=torch.float32)
k = tile.compile(os.path.join(be.ROOT, "lib", kind + ".tile"), kernel=kind, defines=dict(T="f16", BN=bn, NW=nw),
                 schedule=None if sched == "-" else sched)
for _ in range(4):
    if kind == "softmax":
        k(x, y)
    elif kind == "layernorm":
        k(x, w, b, y, st, st2, eps=1e-5)
    else:
        k(x, w, y, st, eps=1e-5)
torch.cuda.synchronize()
print(kind, n, sched, bn, nw, "ok")
