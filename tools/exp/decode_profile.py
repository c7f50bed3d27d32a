#!/usr/bin/env python3
"""decode_profile.py - lib/decode_attention.tile's split and combine kernels against SDPA's
decode on one problem (B=8 H=32 HKV=8 hd128 f16 by default), with the KV cache stored in
either page layout (an experiment's harness, PERF.md 74):

  python3 tools/exp/decode_profile.py [B N PAGE] [layout=nhd|hnd|sdpa] [time=1] [DEFINE=V ...]

  nhd:  pages [NP, PAGE, HKV, D] (a page's tokens, each with all heads), shuffled
  hnd:  pages [NP, HKV, PAGE, D] (a head's tokens of a page together), shuffled; passed to
        the kernel as the [NP, PAGE, HKV, D] view (strides (HKV*PAGE*D, D, PAGE*D, 1))
  sdpa: SDPA's own K and V ([B, HKV, N, D]) as one page per sequence, viewed the same way
time=1 prints GPU times (median of 50) and GB/s; without it each kernel runs twice (for ncu:
  ncu --clock-control none --set full -k regex:'decode|flash|fmha|sdpa' python3 ...).
"""
import os
import statistics
import sys

import torch
import torch.nn.functional as F

import tile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
args = [a for a in sys.argv[1:] if "=" not in a]
defs = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
schedule = defs.pop("schedule", None)
layout = defs.pop("layout", "nhd")
timing = defs.pop("time", "0") == "1"
forced_splits = int(defs.pop("splits", "0"))
bsz, n, page = (int(x) for x in (args or ["8", "8187", "16"]))
h, hkv, d, dt = 32, 8, 128, torch.float16
k = torch.randn(bsz, hkv, n, d, device="cuda", dtype=dt)
v = torch.randn(bsz, hkv, n, d, device="cuda", dtype=dt)
q = torch.randn(bsz, h, d, device="cuda", dtype=dt)
if layout == "sdpa":
    page = n
    kc, vc = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
    table = torch.arange(bsz, device="cuda", dtype=torch.int32).view(bsz, 1).contiguous()
else:
    pages = (n + page - 1) // page
    order = torch.randperm(bsz * pages, device="cuda")
    def to_pages(x):  # [B, HKV, N, D] -> [B * pages, PAGE, HKV, D] (nhd) or [B * pages, HKV, PAGE, D] (hnd)
        x = F.pad(x, (0, 0, 0, pages * page - n)).view(bsz, hkv, pages, page, d)
        x = x.permute(0, 2, 3, 1, 4) if layout == "nhd" else x.permute(0, 2, 1, 3, 4)
        return x.reshape(bsz * pages, *x.shape[2:])
    kc, vc = torch.empty_like(to_pages(k)), torch.empty_like(to_pages(v))
    kc[order], vc[order] = to_pages(k), to_pages(v)
    if layout == "hnd":
        kc, vc = kc.permute(0, 2, 1, 3), vc.permute(0, 2, 1, 3)
    table = order.view(bsz, pages).to(torch.int32).contiguous()
lens = torch.full((bsz,), n, device="cuda", dtype=torch.int32)
lib = os.path.join(ROOT, "lib", "decode_attention.tile")
split = tile.compile(lib, kernel="decode_split", defines=dict(T="f16", D=d, **defs), schedule=schedule)
o1 = torch.empty(bsz, h, 1, d, device="cuda", dtype=torch.float32)
l1 = torch.empty(bsz, h, 1, device="cuda", dtype=torch.float32)
scale = d ** -0.5
split.prepare(q, kc, vc, table, lens, o1, l1, scale=scale)
st = split.stats()
splits = forced_splits or max(1, st["blocks_per_sm"] * st["multiprocessors"] // (bsz * hkv))
opart = torch.empty(bsz, h, splits, d, device="cuda", dtype=torch.float32)
lpart = torch.empty(bsz, h, splits, device="cuda", dtype=torch.float32)
comb = tile.compile(lib, kernel="decode_combine", defines={"T": "f16", "D": d, "BS": max(8, 1 << (splits - 1).bit_length())})
out = torch.empty(bsz, h, d, device="cuda", dtype=dt)


def ours():
    split(q, kc, vc, table, lens, opart, lpart, scale=scale)
    comb(opart, lpart, out)


def sdpa():
    return F.scaled_dot_product_attention(q[:, :, None], k, v, scale=scale, enable_gqa=True)


def time_ms(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1 << 20)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


ours()
err = (out.float() - sdpa()[:, :, 0].float()).abs().max().item()
if timing:
    gb = 2 * k.numel() * k.element_size() / 1e9
    t, tr = time_ms(ours), time_ms(sdpa)
    ts = time_ms(lambda: split(q, kc, vc, table, lens, opart, lpart, scale=scale))
    print("decode %-4s B=%d N=%d page=%d %s%s: ours %.1f us (split %.1f) %.0f GB/s, SDPA %.1f us %.0f GB/s, %.3fx; "
          "%d splits, %d/SM, err %.1e" % (layout, bsz, n, page, split.config(), " " + schedule if schedule else "",
                                          t * 1e3, ts * 1e3, gb / t * 1e3, tr * 1e3, gb / tr * 1e3, tr / t, splits,
                                          st["blocks_per_sm"], err))
else:
    for _ in range(2):
        ours()
        sdpa()
    torch.cuda.synchronize()
    print("err %.1e" % err, split.config(), file=sys.stderr)
