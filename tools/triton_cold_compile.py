#!/usr/bin/env python3
"""triton_cold_compile.py - Triton's cold compile of a tiled fp16 matmul, for comparison with
tilec's (tools/gpu_cache_tune.sh runs both in one session).

Prints one line:  triton <version>: cold <ms> ms (first call: JIT compile + load + launch),
warm <ms> ms (second call), for a 128x256x64 block, 8 warps, 3 stages, M=N=K=4096.

The kernel is the textbook blocked matmul (a K loop of tl.dot over pointer blocks, grouped
program ordering), the same work as lib/gemm.tile's default configuration. The Triton cache
goes to a fresh temporary folder, so nothing compiled earlier is reused. Needs torch and
triton; exits 77 when they are missing.
"""
import os
import sys
import tempfile
import time

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")
try:
    import torch
    import triton
    import triton.language as tl
except Exception as e:  # pragma: no cover - depends on the machine
    print(f"triton_cold_compile: skipped ({e})")
    sys.exit(77)


@triton.jit
def matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    nm = tl.cdiv(M, BM)
    nn = tl.cdiv(N, BN)
    per_group = GM * nn
    first = (pid // per_group) * GM
    rows = min(nm - first, GM)
    pm = first + (pid % per_group) % rows
    pn = (pid % per_group) // rows
    om = pm * BM + tl.arange(0, BM)
    on = pn * BN + tl.arange(0, BN)
    ok = tl.arange(0, BK)
    pa = a + om[:, None] * sam + ok[None, :] * sak
    pb = b + ok[:, None] * sbk + on[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        x = tl.load(pa, mask=ok[None, :] < K - k * BK, other=0.0)
        y = tl.load(pb, mask=ok[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(x, y, acc)
        pa += BK * sak
        pb += BK * sbk
    pc = c + om[:, None] * scm + on[None, :] * scn
    tl.store(pc, acc.to(tl.float16), mask=(om[:, None] < M) & (on[None, :] < N))


def call(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
    matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                 c.stride(0), c.stride(1), BM=128, BN=256, BK=64, GM=8, num_warps=8, num_stages=3)


def main():
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    call(a, b, c)
    torch.cuda.synchronize()
    cold = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    call(a, b, c)
    torch.cuda.synchronize()
    warm = (time.perf_counter() - t0) * 1e3
    err = ((c.float() - (a.float() @ b.float())).norm() / (a.float() @ b.float()).norm()).item()
    print(f"triton {triton.__version__}: cold {cold:.0f} ms (first call: JIT compile + load + launch), "
          f"warm {warm:.1f} ms (second call); rel_l2 {err:.1e}")


if __name__ == "__main__":
    main()
