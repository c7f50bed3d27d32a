#!/usr/bin/env python3
"""bench_python.py - the Python cost of launching a cached kernel: tile against Triton, for
kernels with the same signature (two input vectors, one output, the length), in the same
process, on torch tensors and torch's current stream.

Each call is timed on the host over many back-to-back launches of a tiny problem (N = 4096:
the GPU finishes each kernel faster than the host can issue the next), so the figure is the
host time per launch: argument binding, the library's checks and cuLaunchKernel. The median
of 7 rounds of 2000 calls is reported, with torch's own `x + y` (one ATen op) for scale.

    python3 tools/bench_python.py            (needs torch with CUDA; Triton optional)
"""
import statistics
import sys
import time

import torch

import tile

SRC = """
kernel add<BN: 1024 = 1024>(X: f32[N], Y: f32[N], Z: out f32[N]) grid(cdiv(N, BN)) warps(4) {
  let i = program_id(0) * BN;
  Z[i : +BN] = X[i : +BN] + Y[i : +BN];
}
"""


def per_call_us(fn, calls=2000, rounds=7):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append((t1 - t0) / calls * 1e6)
    return statistics.median(times)


def main():
    n = 4096
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    z = torch.empty_like(x)
    k = tile.compile(source=SRC, name="add.tile")
    k(x, y, z)
    torch.cuda.synchronize()
    assert torch.equal(z, x + y), "tile add is wrong"
    rows = [("tile", per_call_us(lambda: k(x, y, z)))]
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def add_kernel(x_ptr, y_ptr, z_ptr, n_elements, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n_elements
            tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

        grid = (triton.cdiv(n, 1024),)
        z.zero_()
        add_kernel[grid](x, y, z, n, BLOCK=1024)
        torch.cuda.synchronize()
        assert torch.equal(z, x + y), "triton add is wrong"
        rows.append(("triton %s" % triton.__version__, per_call_us(lambda: add_kernel[grid](x, y, z, n, BLOCK=1024))))
    except ImportError:
        rows.append(("triton", float("nan")))
    rows.append(("torch x + y (ATen)", per_call_us(lambda: torch.add(x, y, out=z))))
    print("%-22s %12s" % ("launch", "us per call"))
    for name, us in rows:
        print("%-22s %12.2f" % (name, us))
    tri = rows[1][1]
    if tri == tri:
        print("tile / triton host time per launch: %.2fx (at most 1.0 is the goal)" % (rows[0][1] / tri))
    return 0


if __name__ == "__main__":
    sys.exit(main())
