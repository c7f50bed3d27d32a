#!/usr/bin/env python3
"""ab_attention.py - A/B timing of lib/attention.tile variants against cuDNN in one process.

Variants differ by schedule options and tile configuration; each shape's variants and cuDNN
are timed in interleaved rounds (triton.testing.do_bench, cold L2), so that clock and
machine drift between processes does not decide a comparison. Prints, per shape, each
variant's median TFLOP/s and its ratio to cuDNN's median.

  python3 tools/ab_attention.py --lib .carry/libtile.so \\
      --variant base=@BM=128,BN=128,BNM=64,NW=8 --variant pp=pingpong=1@BM=128,BN=128,BNM=64,NW=8 \\
      [--d 64,128] [--n 1024,4096] [--rounds 3] [--dtype bf16]

A variant may name its own kernel file (NAME=SCHEDULE@CFG@FILE, default lib/attention.tile),
for an experiment on the kernel's source itself.
"""
import argparse
import math
import os
import statistics
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_attention as ba  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default="build/libtile.so")
    p.add_argument("--variant", action="append", required=True, help="NAME=SCHEDULE@CFG")
    p.add_argument("--d", default="64,128")
    p.add_argument("--n", default="1024,4096")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dtype", default="bf16", choices=("f16", "bf16"))
    p.add_argument("--causal", default="0,1")
    p.add_argument("--batch", type=int, default=0, help="B (default: bench_attention's perf_batch)")
    p.add_argument("--heads", type=int, default=0, help="H (default: bench_attention's PERF_HEADS)")
    args = p.parse_args()
    import torch
    import torch.nn.functional as F
    import triton.testing
    from torch.nn.attention import SDPBackend, sdpa_kernel
    tile = ba.Tile(args.lib)
    here = os.path.dirname(os.path.abspath(__file__))
    kfile = os.path.join(here, "..", "lib", "attention.tile")
    variants = []
    for v in args.variant:
        name, rest = v.split("=", 1)
        sched, cfg, *path = rest.split("@")
        variants.append((name, sched or None, ba.parse_cfg(cfg), path[0] if path else kfile))
    tdt = {"f16": (torch.float16, ba.TILE_F16), "bf16": (torch.bfloat16, ba.TILE_BF16)}[args.dtype]
    stream = ba.TileLaunchOptions(ba.c_void_p(torch.cuda.current_stream().cuda_stream))
    bench = lambda fn: float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))
    print("%-28s %s %8s" % ("shape", " ".join("%14s" % v[0] for v in variants), "cudnn"))
    for D in (int(x) for x in args.d.split(",")):
        for N in (int(x) for x in args.n.split(",")):
            for causal in (c == "1" for c in args.causal.split(",")):
                B, H = args.batch or ba.perf_batch(N), args.heads or ba.PERF_HEADS
                g = torch.Generator(device="cuda").manual_seed(N * 31 + D)
                q, k, v = (torch.randn((B, H, N, D), dtype=tdt[0], device="cuda", generator=g) for _ in range(3))
                o = torch.empty_like(q)
                scale = 1.0 / math.sqrt(D)
                flops = 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
                runs, notes = [], []
                for name, sched, cfg, path in variants:
                    defines = dict(T=args.dtype, D=D, CAUSAL="true" if causal else "false", HAS_LSE="false", **cfg)
                    kern = tile.compile(path, defines, ba.TILE_DEVICE_CUDA, schedule=sched)
                    a = ba.attention_args(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), None, tdt[1],
                                          B, H, H, N, N, D, scale)
                    o.fill_(float("nan"))
                    tile.launch(kern, a, stream)
                    torch.cuda.synchronize()
                    err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
                    if not err < 2e-2:
                        notes.append("%s: rel err %.2e" % (name, err))
                    runs.append((kern, a))
                times = [[] for _ in variants] + [[]]
                for _ in range(args.rounds):
                    for i, (kern, a) in enumerate(runs):
                        times[i].append(bench(lambda: tile.launch(kern, a, stream)))
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        times[-1].append(bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                                      scale=scale)))
                tf = [flops / (statistics.median(t) * 1e-3) / 1e12 for t in times]
                shape = "D=%d N=%d %s" % (D, N, "causal" if causal else "full")
                print("%-28s %s %8.1f %s" % (shape, " ".join("%7.1f (%.3f)" % (x, x / tf[-1]) for x in tf[:-1]),
                                            tf[-1], "; ".join(notes)), flush=True)


if __name__ == "__main__":
    main()
