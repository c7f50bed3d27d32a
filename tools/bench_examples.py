#!/usr/bin/env python3
"""bench_examples.py - the issue-16 example kernels on the GPU against their PyTorch
equivalents, in one process, on torch tensors: each result is checked against PyTorch
first (stated tolerances), then both are timed with CUDA events (median of 50 launches
after warm-up; GPU time: each call waits behind a short GPU sleep so that neither side's
host launch cost counts, TILE_BENCH_HOST=1 to count it). One line per case and a ratio
(PyTorch time / ours: above 1 is faster).

  examples/splitk_gemm.tile       vs torch.mm (cuBLAS), 16 x 4096 x 8192 and 64 x 8192 x 8192
  examples/embedding_bag.tile     vs F.embedding_bag(mode="sum", per_sample_weights)
  examples/varlen_attention.tile  vs scaled_dot_product_attention on jagged nested tensors
                                  (FlashAttention's varlen kernel), else per sequence
  lib/attention_bwd.tile          dQ, dK, dV (three kernels, from the forward's LSE) vs SDPA's
                                  backward (its best backend), gradients checked against it
  lib/decode_attention.tile       paged (16-token pages, shuffled) and contiguous (one page
                                  per sequence) vs SDPA on the contiguous cache (GQA), with
                                  the KV bytes read per second; pages stored token-major
                                  (nhd) and head-major (hnd: contiguous is SDPA's own K, V)

  lib/softmax.tile, layernorm.tile, rmsnorm.tile
                                  vs F.softmax, F.layer_norm, F.rms_norm at 8192 x 8192 and
                                  4096 x 50257, f16 and bf16: GB/s (bytes read + written) and
                                  the percentage of a device-to-device copy's GB/s measured
                                  in the same run; the default configuration and a
                                  single-pass one (BN >= N)
  lib/gemm.tile                   without defines or tuning (the configuration chosen per
                                  shape, TILE_AUTOCONFIG) and at its fixed defaults, vs
                                  torch.mm (cuBLAS) on skinny shapes: 1, 16, 64 x 8192 x 8192
                                  and 128 x 4096 x 4096

    python3 tools/bench_examples.py          (needs torch with CUDA)
    python3 tools/bench_examples.py rows gemm decode bwd   (only those sections; also sweep, sweep-decode,
                                                           sweep-rows, sweep-bwd: configurations around
                                                           the defaults)
"""
import os
import re
import statistics
import sys

import torch
import torch.nn.functional as F

import tile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def ex(name):
    return os.path.join(ROOT, "examples", name + ".tile")


def time_ms(fn, reps=50):
    """The GPU time of one call (median of reps): each call is enqueued behind a short GPU
    sleep, so that the host's launch cost (Python, argument binding: ours and PyTorch's
    alike) overlaps GPU work instead of counting as idle GPU time between the two events.
    TILE_BENCH_HOST=1 leaves the sleep out (the GPU idles while the host launches: host
    and GPU time together, what a single synchronous call costs)."""
    host = os.environ.get("TILE_BENCH_HOST") == "1"
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if not host:
            torch.cuda._sleep(1 << 20)  # about 0.5 ms: longer than any launch path here
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


ROWS = []


def row(case, ours, ref, err, tol, what):
    ok = err <= tol
    ROWS.append(ok)
    print("%-44s %9.3f %9.3f %7.2fx  err %.2e (tol %.0e) %s  [%s]" % (case, ours, ref, ref / ours, err, tol,
                                                                        "ok" if ok else "FAIL", what))


def splitk(m, n, k, dt, **defs):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt)
    c = torch.zeros(m, n, device="cuda", dtype=torch.float32)
    kern = tile.compile(ex("splitk_gemm"), defines=dict(T="f16" if dt == torch.float16 else "bf16", **defs))
    kern(a, b, c)
    ref = a.float() @ b.float()
    err = ((c - ref).abs().max() / ref.abs().max()).item()

    def ours():
        c.zero_()
        kern(a, b, c)

    row("splitk_gemm %dx%dx%d %s %s" % (m, n, k, str(dt)[6:], ",".join("%s=%s" % kv for kv in defs.items())),
        time_ms(ours), time_ms(lambda: torch.mm(a, b)), err, 1e-2, "vs torch.mm; ours includes zeroing C")


def embedding_bag(v, bags, l, dim, dt):
    e = torch.randn(v, dim, device="cuda", dtype=dt)
    ids = torch.randint(0, v, (bags, l), device="cuda", dtype=torch.int32)
    w = torch.randn(bags, l, device="cuda", dtype=torch.float32)
    out = torch.empty(bags, dim, device="cuda", dtype=dt)
    kern = tile.compile(ex("embedding_bag"), defines={"T": {torch.float32: "f32", torch.float16: "f16"}[dt], "L": l})
    kern(e, ids, w, out)
    ids64 = ids.long()
    wt = w.to(dt)
    ref = F.embedding_bag(ids64, e, per_sample_weights=wt, mode="sum")
    err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    row("embedding_bag V=%d bags=%d L=%d D=%d %s" % (v, bags, l, dim, str(dt)[6:]), time_ms(lambda: kern(e, ids, w, out)),
        time_ms(lambda: F.embedding_bag(ids64, e, per_sample_weights=wt, mode="sum")), err,
        1e-5 if dt == torch.float32 else 2e-3, "vs F.embedding_bag")


def varlen(lens, h, d, dt):
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
    total = int(cu[-1])
    q, k, v = (torch.randn(total, h, d, device="cuda", dtype=dt) for _ in range(3))
    o = torch.empty_like(q)
    scale = d ** -0.5
    kern = tile.compile(ex("varlen_attention"), defines={"T": "f16" if dt == torch.float16 else "bf16", "D": d,
                                                           "BM": 128, "BN": 64, "NW": 8})
    kern(q, k, v, cu, o, scale=scale, max_len=max(lens))

    def per_sequence():
        outs = []
        for s in range(len(lens)):
            a, b = int(cu[s]), int(cu[s + 1])
            outs.append(F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1)[None] for t in (q, k, v)),
                                                       scale=scale)[0].transpose(0, 1))
        return torch.cat(outs)

    ref_fn, what = per_sequence, "vs SDPA per sequence"
    try:
        offs = cu.long()
        nq, nk, nv = (torch.nested.nested_tensor_from_jagged(t, offs).transpose(1, 2) for t in (q, k, v))

        def jagged():
            return F.scaled_dot_product_attention(nq, nk, nv, scale=scale).transpose(1, 2).values()

        jagged()
        ref_fn, what = jagged, "vs SDPA on jagged nested tensors"
    except Exception as exc:  # older torch: the per-sequence loop
        what += " (jagged SDPA unavailable: %s)" % type(exc).__name__
    ref = per_sequence()
    err = (o.float() - ref.float()).abs().max().item()
    flops = sum(4 * n * n * h * d for n in lens)
    t_ours, t_ref = time_ms(lambda: kern(q, k, v, cu, o, scale=scale, max_len=max(lens))), time_ms(ref_fn)
    row("varlen_attention %d seqs (%d..%d) H=%d D=%d %s" % (len(lens), min(lens), max(lens), h, d, str(dt)[6:]),
        t_ours, t_ref, err, 2e-2, "%s; ours %.0f TFLOP/s" % (what, flops / t_ours / 1e9))


def decode(bsz, h, hkv, n, d, page, dt, contiguous=False, schedule=None, layout="nhd", lib_path=None, **defs):
    """layout: how the cache stores a page: "nhd" [pages, PAGE, HKV, D] (a token's heads
    together: vLLM's), "hnd" [pages, HKV, PAGE, D] (a head's tokens together: FlashInfer's
    HND); either is passed as the kernel's [pages, PAGE, HKV, D] (hnd as a strided view).
    contiguous: one page per sequence; with hnd that is SDPA's own K and V ([B, HKV, N, D])."""
    k = torch.randn(bsz, hkv, n, d, device="cuda", dtype=dt)
    v = torch.randn(bsz, hkv, n, d, device="cuda", dtype=dt)
    q = torch.randn(bsz, h, d, device="cuda", dtype=dt)
    scale = d ** -0.5
    if contiguous:
        page = n
    pages = (n + page - 1) // page
    pad = pages * page - n
    def to_pages(x):  # [B, HKV, N, D] -> [B * pages, PAGE, HKV, D] (nhd) or [B * pages, HKV, PAGE, D] (hnd)
        x = torch.nn.functional.pad(x, (0, 0, 0, pad)).view(bsz, hkv, pages, page, d)
        x = x.permute(0, 2, 3, 1, 4) if layout == "nhd" else x.permute(0, 2, 1, 3, 4)
        return x.reshape(bsz * pages, *x.shape[2:])
    order = torch.arange(bsz * pages, device="cuda") if contiguous else torch.randperm(bsz * pages, device="cuda")
    if contiguous and layout == "hnd":
        kc, vc = k, v  # SDPA's tensors themselves
    else:
        kc, vc = torch.empty_like(to_pages(k)), torch.empty_like(to_pages(v))
        kc[order], vc[order] = to_pages(k), to_pages(v)
    if layout == "hnd":
        kc, vc = kc.permute(0, 2, 1, 3), vc.permute(0, 2, 1, 3)
    table = order.view(bsz, pages).to(torch.int32).contiguous()
    lens = torch.full((bsz,), n, device="cuda", dtype=torch.int32)
    out = torch.empty(bsz, h, d, device="cuda", dtype=dt)
    tname = "f16" if dt == torch.float16 else "bf16"
    lib = lib_path or os.path.join(ROOT, "lib", "decode_attention.tile")
    split = tile.compile(lib, kernel="decode_split", defines=dict(T=tname, D=d, **defs), schedule=schedule)
    # one wave of programs: as many splits as fit at once (lib/decode_attention.tile), from the
    # specialization's occupancy (prepared with one split: the same code for every S)
    opart = torch.empty(bsz, h, 1, d, device="cuda", dtype=torch.float32)
    lpart = torch.empty(bsz, h, 1, device="cuda", dtype=torch.float32)
    split.prepare(q, kc, vc, table, lens, opart, lpart, scale=scale)
    st = split.stats()
    slots = max(1, st["blocks_per_sm"]) * max(1, st["multiprocessors"])
    m = re.search(r"BG=(\d+)", split.config())
    bg = int(m.group(1)) if m else 16
    splits = max(1, slots // (bsz * hkv * -(-(h // hkv) // bg)))  # programs per split: B * HKV * cdiv(G, BG)
    opart = torch.empty(bsz, h, splits, d, device="cuda", dtype=torch.float32)
    lpart = torch.empty(bsz, h, splits, device="cuda", dtype=torch.float32)
    comb = tile.compile(lib, kernel="decode_combine", defines={"T": tname, "D": d, "BS": max(8, 1 << (splits - 1).bit_length())},
                        schedule=schedule)

    def ours():
        split(q, kc, vc, table, lens, opart, lpart, scale=scale)
        comb(opart, lpart, out)

    ours()
    ref = F.scaled_dot_product_attention(q[:, :, None], k, v, scale=scale, enable_gqa=True)[:, :, 0]
    err = (out.float() - ref.float()).abs().max().item()
    t_ours = time_ms(ours)
    t_ref = time_ms(lambda: F.scaled_dot_product_attention(q[:, :, None], k, v, scale=scale, enable_gqa=True))
    t_split = time_ms(lambda: split(q, kc, vc, table, lens, opart, lpart, scale=scale))
    t_comb = time_ms(lambda: comb(opart, lpart, out))
    gb = 2 * k.numel() * k.element_size() / 1e9
    row("decode %s%s B=%d H=%d HKV=%d N=%d D=%d %s%s" % ("contiguous" if contiguous else "page=%d" % page,
                                                    "" if layout == "nhd" else " " + layout, bsz, h, hkv, n,
                                                    d, str(dt)[6:], " [%s]" % ",".join(
                                                        ([schedule] if schedule else []) +
                                                        ["%s=%s" % kv for kv in defs.items()]) if schedule or defs else ""),
        t_ours, t_ref, err, 2e-2,
        "vs SDPA contiguous; ours %.0f GB/s, SDPA %.0f GB/s, %d splits, %d programs/SM; split %.1f us, combine %.1f us; %s" % (
            gb / t_ours * 1e3, gb / t_ref * 1e3, splits, st["blocks_per_sm"], t_split * 1e3, t_comb * 1e3, split.config()))


class BwdCase:
    """One attention backward problem: random inputs, SDPA's gradients (the reference), our
    forward's O and LSE, our `attention_bwd_pre` delta, and buffers for the gradients."""

    def __init__(self, b, h, hkv, n, d, causal, dt, pad_rows=True):
        """pad_rows: LSE and delta as views [:, :, :N] of rows padded to 4 elements (16-byte
        row strides, as FlashAttention pads its softmax sums), so their per-step rows can
        travel with the TMA stages (lib/attention_bwd.tile; PERF.md 86)."""
        self.q = torch.randn(b, h, n, d, device="cuda", dtype=dt, requires_grad=True)
        self.k = torch.randn(b, hkv, n, d, device="cuda", dtype=dt, requires_grad=True)
        self.v = torch.randn(b, hkv, n, d, device="cuda", dtype=dt, requires_grad=True)
        self.do = torch.randn(b, h, n, d, device="cuda", dtype=dt)
        self.scale = d ** -0.5
        self.out = F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=causal, scale=self.scale,
                                                  enable_gqa=hkv != h)
        self.ref = torch.autograd.grad(self.out, (self.q, self.k, self.v), self.do, retain_graph=True)
        self.tname = "f16" if dt == torch.float16 else "bf16"
        self.causal = causal
        self.name = "B=%d H=%d HKV=%d N=%d D=%d%s %s%s" % (b, h, hkv, n, d, " causal" if causal else "", str(dt)[6:],
                                                         "" if pad_rows or n % 4 == 0 else " unpadded")
        self.flops = 2.5 * 4 * b * h * n * n * d / (2 if causal else 1)
        fwd = tile.compile(os.path.join(ROOT, "lib", "attention.tile"), kernel="attention",
                           defines={"T": self.tname, "D": d, "CAUSAL": causal, "HAS_LSE": True})
        self.pre = tile.compile(os.path.join(ROOT, "lib", "attention_bwd.tile"), kernel="attention_bwd_pre",
                                defines={"T": self.tname, "D": d})
        self.qd, self.kd, self.vd = self.q.detach(), self.k.detach(), self.v.detach()
        self.o = torch.empty_like(self.qd)
        npad = (n + 3) // 4 * 4 if pad_rows else n
        self.lse = torch.empty(b, h, npad, device="cuda", dtype=torch.float32)[:, :, :n]
        fwd(self.qd, self.kd, self.vd, self.o, self.lse, scale=self.scale)
        self.delta = torch.empty(b, h, npad, device="cuda", dtype=torch.float32)[:, :, :n]
        self.dq, self.dk, self.dv = torch.empty_like(self.qd), torch.empty_like(self.kd), torch.empty_like(self.vd)

    def error(self):
        return max(((x.float() - r.float()).abs().max() / r.float().abs().max()).item()
                   for x, r in zip((self.dq, self.dk, self.dv), self.ref))

    def t_ref(self):
        return time_ms(lambda: torch.autograd.grad(self.out, (self.q, self.k, self.v), self.do, retain_graph=True))


def attention_bwd(b, h, hkv, n, d, causal, dt, dkdv_defs=None, dq_defs=None, schedule=None, dkdv_path=None, case=None,
                  dq_schedule=None):
    c = case or BwdCase(b, h, hkv, n, d, causal, dt)
    lib = os.path.join(ROOT, "lib", "attention_bwd.tile")
    defs = {"T": c.tname, "D": d, "CAUSAL": causal}
    dkdv = tile.compile(dkdv_path or lib, kernel="attention_bwd_dkdv", defines=dict(defs, **(dkdv_defs or {})),
                        schedule=schedule)
    dqk = tile.compile(lib, kernel="attention_bwd_dq", defines=dict(defs, **(dq_defs or {})),
                       schedule=dq_schedule or ("pdl=0" if schedule and "pdl=0" in schedule else None))
    args = (c.qd, c.kd, c.vd, c.do, c.lse, c.delta)

    def ours():
        c.pre(c.o, c.do, c.delta)
        dkdv(*args, c.dk, c.dv, scale=c.scale)
        dqk(*args, c.dq, scale=c.scale)

    ours()
    err = c.error()
    t_ours = time_ms(ours)
    t_ref = c.t_ref()
    t_dkdv = time_ms(lambda: dkdv(*args, c.dk, c.dv, scale=c.scale))
    t_dq = time_ms(lambda: dqk(*args, c.dq, scale=c.scale))
    what = dkdv.config() + (" " + schedule if schedule else "") + (" " + os.path.basename(dkdv_path) if dkdv_path else "")
    row("attention_bwd " + c.name, t_ours, t_ref, err, 2e-2,
        "vs SDPA backward; ours %.0f, torch %.0f TFLOP/s; dkdv %.3f ms [%s], dq %.3f ms [%s]" % (
            c.flops / t_ours / 1e9, c.flops / t_ref / 1e9, t_dkdv, what, t_dq,
            dqk.config() + (" " + dq_schedule if dq_schedule else "")))


def bwd_one_kernel(c, path, kernel, cast_kernel, label, defs=None, schedule=None):
    """A one-kernel backward on BwdCase c: `kernel` computes dK, dV and dQ's partial sums by
    atomic_add into a zeroed f32 buffer, `cast_kernel` scales them into dQ; against SDPA's
    backward."""
    b, h, n, d = c.qd.shape
    main = tile.compile(path, kernel=kernel, defines=dict(T=c.tname, D=d, CAUSAL=c.causal, **(defs or {})),
                        schedule=schedule)
    cast = tile.compile(path, kernel=cast_kernel, defines=dict(T=c.tname, D=d))
    acc = torch.empty(b, h, n, d, device="cuda", dtype=torch.float32)
    args = (c.qd, c.kd, c.vd, c.do, c.lse, c.delta, c.dk, c.dv, acc)

    def ours():
        acc.zero_()
        c.pre(c.o, c.do, c.delta)
        main(*args, scale=c.scale)
        cast(acc, c.dq, scale=c.scale)

    for x in (c.dq, c.dk, c.dv):
        x.fill_(float("nan"))
    ours()
    err = c.error()
    t_ours = time_ms(ours)
    t_ref = c.t_ref()
    t_main = time_ms(lambda: main(*args, scale=c.scale))
    row(label + " " + c.name, t_ours, t_ref, err, 2e-2, "vs SDPA backward; ours %.0f, torch %.0f TFLOP/s; main %.3f ms [%s]" % (
        c.flops / t_ours / 1e9, c.flops / t_ref / 1e9, t_main, main.config() + (" " + schedule if schedule else "")))


def attention_bwd_fused(c, defs=None, schedule=None):
    """lib/attention_bwd.tile's fused form on BwdCase c: attention_bwd_fused (TMA reduce-adds
    of dQ's partial sums on sm_90a), then attention_bwd_dq_scale."""
    bwd_one_kernel(c, os.path.join(ROOT, "lib", "attention_bwd.tile"), "attention_bwd_fused", "attention_bwd_dq_scale",
                   "attention_bwd_fused", defs, schedule)


def attention_bwd_atomic(b, h, hkv, n, d, causal, dt, defs=None, schedule=None):
    """tools/exp/attention_bwd_atomic.tile: an earlier one-kernel backward (PERF.md 65), the
    experiment lib's fused form came from."""
    bwd_one_kernel(BwdCase(b, h, hkv, n, d, causal, dt), os.path.join(ROOT, "tools", "exp", "attention_bwd_atomic.tile"),
                   "attention_bwd_atomic", "attention_bwd_dq_cast", "attention_bwd_atomic", defs, schedule)


def main_bwd_atomic():
    for causal in (False, True):
        attention_bwd_atomic(1, 16, 16, 2405, 64, causal, torch.float16)
        attention_bwd_atomic(2, 16, 4, 4096, 128, causal, torch.bfloat16)


COPY_GBS = {}


def copy_gbs(nbytes):
    """A device-to-device copy's GB/s (bytes read + written) for a buffer of nbytes."""
    if nbytes not in COPY_GBS:
        x = torch.empty(nbytes // 2, device="cuda", dtype=torch.float16).normal_()
        y = torch.empty_like(x)
        COPY_GBS[nbytes] = 2 * nbytes / time_ms(lambda: y.copy_(x)) / 1e6
    return COPY_GBS[nbytes]


def rows(kind, m, n, dt, schedule=None, path=None, **defs):
    """A row-wise kernel against its PyTorch equivalent; GB/s counts X read and Y written."""
    x = torch.randn(m, n, device="cuda", dtype=dt)
    y = torch.empty_like(x)
    w = torch.randn(n, device="cuda", dtype=dt)
    bias = torch.randn(n, device="cuda", dtype=dt)
    stats = torch.empty(m, device="cuda", dtype=torch.float32)
    stats2 = torch.empty(m, device="cuda", dtype=torch.float32)
    tname = "f16" if dt == torch.float16 else "bf16"
    k = tile.compile(path or os.path.join(ROOT, "lib", kind + ".tile"), kernel=kind, defines=dict(T=tname, **defs),
                     schedule=schedule)
    if kind == "softmax":
        ours, ref = (lambda: k(x, y)), (lambda: F.softmax(x, dim=-1))
    elif kind == "layernorm":
        ours = lambda: k(x, w, bias, y, stats, stats2, eps=1e-5)  # noqa: E731
        ref = lambda: F.layer_norm(x, (n,), w, bias, eps=1e-5)  # noqa: E731
    else:
        ours = lambda: k(x, w, y, stats, eps=1e-5)  # noqa: E731
        ref = lambda: F.rms_norm(x, (n,), w, eps=1e-5)  # noqa: E731
    ours()
    want = ref()
    err = ((y.float() - want.float()).abs().max() / want.float().abs().max()).item()
    t_ours, t_ref = time_ms(ours), time_ms(ref)
    nbytes = 2 * x.numel() * x.element_size()
    cp = copy_gbs(x.numel() * x.element_size())
    g_ours, g_ref = nbytes / t_ours / 1e6, nbytes / t_ref / 1e6
    cfg = ",".join(["%s=%s" % kv for kv in defs.items()] + ([schedule] if schedule else [])) or "default"
    row("%s%s %dx%d %s %s" % (kind, " (%s)" % os.path.basename(os.path.dirname(path)) if path else "", m, n,
                              str(dt)[6:], cfg), t_ours, t_ref, err, 1e-2 if dt == torch.float16 else 2e-2,
        "ours %.0f GB/s = %.0f%% of copy (%.0f), torch %.0f GB/s = %.0f%%; %s" % (
            g_ours, 100 * g_ours / cp, cp, g_ref, 100 * g_ref / cp, k.config()))


def gemm_default(m, n, k, dt, fixed=False):
    """lib/gemm.tile without defines (what a user gets before tuning): the configuration
    TILE_AUTOCONFIG chooses for the shape; fixed: the kernel's own defaults at every shape
    (autoconfig=False, TILE_FIXED_CONFIG)."""
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt)
    c = torch.empty(m, n, device="cuda", dtype=dt)
    g = tile.compile(os.path.join(ROOT, "lib", "gemm.tile"), kernel="gemm",
                     defines={"T": "f16" if dt == torch.float16 else "bf16"}, autoconfig=False if fixed else None)
    ours = lambda: g(a, b, c)  # noqa: E731  (bias, R unused; alpha 1, beta 0 by default)
    ours()
    want = torch.mm(a, b)
    err = ((c.float() - want.float()).abs().max() / want.float().abs().max()).item()
    t_ours, t_ref = time_ms(ours), time_ms(lambda: torch.mm(a, b))
    fl = 2.0 * m * n * k
    row("gemm %s %dx%dx%d %s" % ("fixed" if fixed else "default", m, n, k, str(dt)[6:]), t_ours, t_ref,
        err, 1e-2,
        "vs torch.mm; ours %.1f, cuBLAS %.1f TFLOP/s; config %s" % (fl / t_ours / 1e9, fl / t_ref / 1e9,
                                                                   g.config()))


def main():
    torch.manual_seed(0)
    only = set(sys.argv[1:])
    print("%-44s %9s %9s %8s" % ("case", "ours ms", "torch ms", "ratio"))
    if only:
        sections = {"rows": main_rows, "gemm": main_gemm, "decode": main_decode, "decode-ab": main_decode_ab, "bwd": main_bwd,
                    "sweep": main_sweep, "sweep-decode": main_sweep_decode, "sweep-rows": main_sweep_rows,
                    "sweep-bwd": main_sweep_bwd, "bwd-atomic": main_bwd_atomic, "rowcache": main_rowcache,
                    "rowwalk": main_rowwalk, "rows-even": main_rows_even,
                    "rows-bm": main_rows_bm,
                    "softmax3": main_softmax3, "pdl": main_pdl,
                    "rows-inside": main_rows_inside, "sweep-norm": main_sweep_norm,
                    "decode-stages": main_decode_stages, "occupancy": main_occupancy}
        for name in only - set(sections):
            print("bench_examples: unknown section '%s' (the sections: %s)" % (name, ", ".join(sections)))
            return 2
        for name, fn in sections.items():
            if name in only:
                fn()
        bad = ROWS.count(False)
        print("bench_examples: %d cases, %d wrong" % (len(ROWS), bad))
        return 1 if bad else 0
    splitk(16, 4096, 8192, torch.float16, BM=16, BN=64, BK=128, SPLIT=8)
    splitk(16, 4096, 8192, torch.float16, BM=16, BN=128, BK=64, SPLIT=16)
    splitk(64, 8192, 8192, torch.bfloat16, BM=64, BN=128, BK=64, SPLIT=4)
    embedding_bag(100000, 4096, 8, 512, torch.float32)
    embedding_bag(100000, 4096, 32, 256, torch.float16)
    gen = torch.Generator().manual_seed(1)
    lens = torch.randint(256, 4096, (16,), generator=gen).tolist()
    varlen(lens, 16, 128, torch.float16)
    varlen(lens, 16, 128, torch.bfloat16)
    varlen(torch.randint(1, 1024, (64,), generator=gen).tolist(), 16, 64, torch.float16)
    main_bwd()
    main_decode()
    main_rows()
    main_gemm()
    bad = ROWS.count(False)
    print("bench_examples: %d cases, %d wrong" % (len(ROWS), bad))
    return 1 if bad else 0


def main_decode():
    decode(8, 32, 8, 8187, 128, 16, torch.float16)
    decode(8, 32, 8, 8187, 128, 16, torch.float16, contiguous=True)
    decode(8, 32, 8, 8187, 128, 16, torch.float16, layout="hnd")
    decode(8, 32, 8, 8187, 128, 16, torch.float16, contiguous=True, layout="hnd")  # SDPA's own K, V
    decode(8, 32, 8, 8187, 128, 16, torch.float16, schedule="prefetch=1")  # block table one iteration ahead
    decode(8, 32, 8, 8187, 128, 8, torch.bfloat16)
    decode(64, 32, 8, 2048, 128, 64, torch.float16)


def main_sweep():
    """Configurations around the defaults of the memory-bound kernels (decode, rows)."""
    main_sweep_decode()
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16):
            for bn, nw in ((1024, 4), (8192, 4), (8192, 8), (8192, 16)):
                rows(kind, 8192, 8192, dt, BN=bn, NW=nw)
        for bn, nw in ((1024, 4), (4096, 8), (8192, 8), (16384, 16)):
            rows(kind, 4096, 50257, torch.float16, BN=bn, NW=nw)


def main_sweep_rows():
    """The row kernels' one-pass widths at 8192 (warps), and the looped form at 4096 x 50257:
    chunk widths and warps (fewer rows in flight, so that the second pass's re-read of a
    row can hit L2) with and without register prefetch."""
    for kind in ("layernorm", "rmsnorm"):
        for nw in (8, 16):
            rows(kind, 8192, 8192, torch.float16, BN=8192, NW=nw)
    for kind in ("softmax", "rmsnorm", "layernorm"):
        rows(kind, 4096, 50257, torch.float16)
        for bn, nw in ((16384, 16), (8192, 16), (8192, 8), (4096, 8), (4096, 4), (2048, 4)):
            rows(kind, 4096, 50257, torch.float16, schedule="prefetch=1", BN=bn, NW=nw)
        rows(kind, 4096, 50257, torch.float16, BN=8192, NW=16)


def main_bwd():
    """Issue 17's rows: f16 and bf16, hd64 and hd128, causal and not, N >= 2048; the three-
    kernel form and the fused one on the same inputs."""
    for causal in (False, True):
        for shape in ((1, 16, 16, 2405, 64, causal, torch.float16), (2, 16, 16, 4096, 64, causal, torch.bfloat16),
                      (2, 16, 4, 4096, 128, causal, torch.bfloat16), (1, 16, 16, 2405, 128, causal, torch.float16)):
            c = BwdCase(*shape)
            attention_bwd(*shape, case=c)
            attention_bwd_fused(c)


def main_sweep_bwd():
    """The backward around its defaults: the persistent walk against one program per tile
    (schedule persistent=0) at hd64 (light products: walked at every grid size) and hd128."""
    for causal in (False, True):
        attention_bwd(1, 16, 16, 2405, 64, causal, torch.float16)
        attention_bwd(1, 16, 16, 2405, 64, causal, torch.float16, schedule="persistent=0")
        attention_bwd(1, 16, 16, 2405, 64, causal, torch.float16, schedule="once=0")
        attention_bwd(2, 16, 16, 4096, 64, causal, torch.bfloat16)
        attention_bwd(2, 16, 16, 4096, 64, causal, torch.bfloat16, schedule="persistent=0")
        attention_bwd(2, 16, 4, 4096, 128, causal, torch.bfloat16)
        attention_bwd(2, 16, 4, 4096, 128, causal, torch.bfloat16, schedule="persistent=0")
        attention_bwd(2, 16, 4, 4096, 128, causal, torch.bfloat16,
                      dkdv_path=os.path.join(ROOT, "tools", "exp", "attention_bwd_s3.tile"))


def main_decode_ab():
    """lib/decode_attention.tile against its previous form (tools/exp/decode_attention_g16.tile:
    heads as the rows of a 16-row tile, a gather per key row) in one process (PERF.md 83)."""
    old = os.path.join(ROOT, "tools", "exp", "decode_attention_g16.tile")
    for args, kw in (((8, 32, 8, 8187, 128, 16, torch.float16), {}),
                     ((8, 32, 8, 8187, 128, 16, torch.float16), {"contiguous": True, "layout": "hnd"}),
                     ((8, 32, 8, 8187, 128, 8, torch.bfloat16), {}),
                     ((64, 32, 8, 2048, 128, 64, torch.float16), {})):
        decode(*args, lib_path=old, **kw)
        decode(*args, **kw)
    for st in (2, 4):
        decode(8, 32, 8, 8187, 128, 16, torch.float16, STAGES=st)
    decode(8, 32, 8, 8187, 128, 16, torch.float16, BN=32, STAGES=2)
    decode(8, 32, 8, 8187, 128, 32, torch.float16, BN=32, STAGES=2)
    decode(8, 64, 4, 8187, 128, 16, torch.float16)  # G = 16: two programs per group at BG = 8
    decode(8, 64, 4, 8187, 128, 16, torch.float16, BG=16)


def main_sweep_decode():
    for bn, nw, st in ((32, 4, 3), (32, 2, 4), (32, 1, 4), (16, 1, 6), (16, 2, 6),
                       (16, 1, 3), (16, 1, 4), (32, 1, 3), (16, 1, 2), (32, 1, 2), (64, 1, 2)):
        decode(8, 32, 8, 8187, 128, 16, torch.float16, BN=bn, NW=nw, STAGES=st)


def main_rows():
    """Issue 17's rows (8192 x 8192 and 4096 x 50257, f16 and bf16) at the defaults, and the
    vocabulary row without the row cache (rowcache=0: the loops read the row twice)."""
    for kind in ("softmax", "layernorm", "rmsnorm"):
        for dt in (torch.float16, torch.bfloat16):
            rows(kind, 8192, 8192, dt)
            rows(kind, 4096, 50257, dt)
        rows(kind, 4096, 50257, torch.float16, schedule="rowcache=0")
        rows(kind, 8192, 16385, torch.float16)
        rows(kind, 2048, 100003, torch.float16)


def main_rowcache():
    """The vocabulary rows with and without row-cache (the row kept in shared memory; on by
    default since PERF.md 113, off before: PERF.md 63)."""
    for kind in ("softmax", "layernorm", "rmsnorm"):
        for dt in (torch.float16, torch.bfloat16):
            rows(kind, 4096, 50257, dt)
            rows(kind, 4096, 50257, dt, schedule="rowcache=1")
            for bn, nw in ((1024, 8), (2048, 16), (4096, 16)):
                rows(kind, 4096, 50257, dt, BN=bn, NW=nw)
                rows(kind, 4096, 50257, dt, schedule="rowcache=1", BN=bn, NW=nw)
        rows(kind, 8192, 8192, torch.float16)


def main_rowwalk():
    """The vocabulary rows with P programs walking the rows (tools/exp/rows_walk.tile: only P
    rows in flight, so a row's second pass can hit L2; PERF.md 68)."""
    path = os.path.join(ROOT, "tools", "exp", "rows_walk.tile")
    for kind in ("softmax", "rmsnorm", "layernorm"):
        rows(kind, 4096, 50257, torch.float16)
        for p in (132, 264, 528, 1056):
            for bn, nw in ((1024, 4), (2048, 8), (2048, 16), (4096, 16), (8192, 16)):
                rows(kind, 4096, 50257, torch.float16, path=path, BN=bn, NW=nw, P=p)


def main_rows_even():
    """Vocabulary rows of a 16-byte multiple (4096 x 50264: 16-byte accesses, only the vector
    at a row's end straddles) at the defaults, with the row cache and with walked rows, next
    to the odd 50257 (element accesses): what wide accesses are worth (PERF.md 68)."""
    path = os.path.join(ROOT, "tools", "exp", "rows_walk.tile")
    for kind in ("softmax", "rmsnorm", "layernorm"):
        rows(kind, 4096, 50257, torch.float16)
        rows(kind, 4096, 50264, torch.float16)
        rows(kind, 4096, 50264, torch.bfloat16)
        for bn, nw in ((2048, 8), (4096, 16), (8192, 16)):
            rows(kind, 4096, 50264, torch.float16, BN=bn, NW=nw)
        for bn, nw in ((1024, 4), (1024, 8), (2048, 16), (4096, 16)):
            rows(kind, 4096, 50264, torch.float16, schedule="rowcache=1", BN=bn, NW=nw)
        for p, bn, nw in ((264, 4096, 16), (528, 2048, 8), (1056, 4096, 16)):
            rows(kind, 4096, 50264, torch.float16, path=path, BN=bn, NW=nw, P=p)
        rows(kind, 8192, 8192, torch.float16)


def main_rows_bm():
    """One-pass norms with BM rows per program (tools/exp/layernorm_rows.tile: W and B read
    once per BM rows; PERF.md 69)."""
    path = os.path.join(ROOT, "tools", "exp", "layernorm_rows.tile")
    for kind in ("layernorm", "rmsnorm"):
        for dt in (torch.float16, torch.bfloat16):
            rows(kind, 8192, 8192, dt)
            for bm, nw in ((1, 16), (2, 16), (2, 8), (4, 16), (4, 8)):
                rows(kind, 8192, 8192, dt, path=path, BM=bm, NW=nw)
        rows(kind, 16384, 4096, torch.float16)
        rows(kind, 16384, 4096, torch.float16, path=path, BN=4096, BM=2, NW=8)
        rows(kind, 16384, 4096, torch.float16, path=path, BN=4096, BM=4, NW=16)


def main_softmax3():
    """Vocabulary rows: softmax in three passes with the row cache (tools/exp/softmax3.tile;
    PERF.md 69) against lib/softmax.tile's online form."""
    path = os.path.join(ROOT, "tools", "exp", "softmax3.tile")
    for n in (50264, 50257):
        rows("softmax", 4096, n, torch.float16)
        for bn, nw in ((2048, 8), (2048, 16), (4096, 16), (8192, 16)):
            rows("softmax", 4096, n, torch.float16, path=path, schedule="rowcache=1", BN=bn, NW=nw)
        rows("softmax", 4096, n, torch.float16, path=path, BN=4096, NW=16)


def main_pdl():
    """Programmatic dependent launch (grid-dep pass) on and off (schedule pdl=0): decode's
    split and combine, the backward's three kernels, back-to-back row kernels (PERF.md 70)."""
    for sched in (None, "pdl=0"):
        decode(8, 32, 8, 8187, 128, 16, torch.float16, schedule=sched)
        decode(8, 32, 8, 8187, 128, 16, torch.float16, contiguous=True, schedule=sched)
    for sched in (None, "pdl=0"):
        attention_bwd(2, 16, 4, 4096, 128, True, torch.bfloat16, schedule=sched)
        attention_bwd(1, 16, 16, 2405, 64, False, torch.float16, schedule=sched)
    for sched in (None, "pdl=0"):
        rows("softmax", 8192, 8192, torch.float16, schedule=sched)
        rows("rmsnorm", 1024, 4096, torch.float16, schedule=sched)


def main_rows_inside():
    """The vocabulary rows with chunks wholly inside a row accessed without predicates
    (cg_mem.c's inside branch; PERF.md 71), around the defaults."""
    for kind in ("softmax", "rmsnorm", "layernorm"):
        rows(kind, 4096, 50257, torch.float16)
        rows(kind, 4096, 50257, torch.bfloat16)
        for bn, nw in ((2048, 8), (4096, 16), (8192, 16)):
            rows(kind, 4096, 50257, torch.float16, BN=bn, NW=nw)
        rows(kind, 4096, 50264, torch.float16)
        rows(kind, 8192, 8192, torch.float16)
    path = os.path.join(ROOT, "tools", "exp", "softmax3.tile")
    for n in (50257, 50264):
        for bn, nw in ((4096, 16), (8192, 16)):
            rows("softmax", 4096, n, torch.float16, path=path, schedule="rowcache=1", BN=bn, NW=nw)


def main_sweep_norm():
    """One-pass layernorm at 8192 x 8192 around its default (85% of the copy; rmsnorm 97%)."""
    for dt in (torch.float16, torch.bfloat16):
        for kind in ("layernorm", "rmsnorm", "softmax"):
            rows(kind, 8192, 8192, dt)
            for nw in (8, 16):
                rows(kind, 8192, 8192, dt, BN=8192, NW=nw)
    rows("layernorm", 16384, 4096, torch.float16)
    for nw in (2, 4, 8):
        rows("layernorm", 16384, 4096, torch.float16, BN=4096, NW=nw)


def main_decode_stages():
    """Decode at the default configuration against pinned stage counts (fewer stages: more
    programs per multiprocessor, so more splits; PERF.md 72)."""
    decode(8, 32, 8, 8187, 128, 16, torch.float16)
    for st in (2, 3, 4):
        decode(8, 32, 8, 8187, 128, 16, torch.float16, STAGES=st)
    decode(8, 32, 8, 8187, 128, 16, torch.float16, contiguous=True)
    decode(8, 32, 8, 8187, 128, 16, torch.float16, contiguous=True, STAGES=3)
    decode(8, 32, 8, 8187, 128, 16, torch.bfloat16, STAGES=3)
    decode(64, 32, 8, 2048, 128, 16, torch.float16)
    decode(64, 32, 8, 2048, 128, 16, torch.float16, STAGES=3)


def main_occupancy():
    """One-pass row kernels with registers capped for more programs per multiprocessor
    (schedule occupancy=N; PERF.md 73): layernorm's 168 registers allow 3 of 4 warps."""
    for dt in (torch.float16, torch.bfloat16):
        for kind in ("layernorm", "rmsnorm", "softmax"):
            rows(kind, 8192, 8192, dt)
            for occ in (4, 5):
                rows(kind, 8192, 8192, dt, schedule="occupancy=%d" % occ)
    for occ in (None, "occupancy=5", "occupancy=6"):
        rows("layernorm", 16384, 4096, torch.float16, schedule=occ)


def main_gemm():
    for dt in (torch.float16, torch.bfloat16):
        for m, n, k in ((1, 8192, 8192), (16, 8192, 8192), (64, 8192, 8192), (128, 4096, 4096)):
            gemm_default(m, n, k, dt)
            gemm_default(m, n, k, dt, fixed=True)


if __name__ == "__main__":
    sys.exit(main())
