"""row_align.py - the row-align pass (PERF.md 100): loops over rows that lie off 16 bytes
start at the 16-byte boundary in front of the row. Sections (argv; all by default):
  check  ragged rows against PyTorch (f16, bf16, f32; softmax, rmsnorm, layernorm), with
         the output (and the input) as views off the allocation's 16-byte boundary, so that
         both the aligned loop and the loop kept for rows whose tensors disagree run
  vocab  4096 x 50257 at the defaults against rowalign=0, and a few tile configurations
  mid    other row lengths off 16 bytes, and 8192 x 8192 (unchanged: rows on 16 bytes)
  rev    (not by default) the row-reverse pass against rowrev=0 at several row lengths
  clustercheck, cluster  (not by default) rows split across a thread-block cluster (BN=65536):
         ragged rows against PyTorch; speed against the defaults
  exp    (not by default) softmax's looped form, one exponential per element against two
         (tools/exp/softmax_2exp/softmax.tile, the form before PERF.md 109) and against the
         form without the -inf guard (tools/exp/softmax_fma/softmax.tile, PERF.md 110)
  pfcache (not by default) prefetch=1 beside the row cache (on by default since PERF.md 113)
  pfcheck, pf  (not by default) register prefetch D chunks ahead (prefetch=D, PERF.md 113):
         ragged rows against PyTorch; speed against the defaults
  shift  (not by default) the norms' weights as shifted vectors (PERF.md 115): the defaults
         against shift=1 (off by default since that measurement), occupancy=1 and prefetch=1
  nsweep (not by default) rmsnorm and layernorm at 4096 x 50257 / 50264 f16 over BN, NW,
         shift=1 and prefetch=1 (what the weights' loads cost in the output pass)
  pfrule (not by default) the norms' output pass loading W (and B) 1-3 chunks ahead
         (prefetch=D) at vocabulary and shorter rows
  rule   (not by default) the three row kernels at issue 17's rows and others at the
         defaults, the norms also at shift=0,prefetch=0 (the defaults before PERF.md 119)
  rawcheck, raw, slots  (not by default) shifted weights loaded ahead, carried through the loop as
         their two blocks (PERF.md 120): ragged rows against PyTorch; the norms' speed over
         shift and prefetch at the vocabulary row and shorter ones; slots: a row cache of K
         chunks (rowslots=K), the others read again from L2, for more programs
  lnocc  (not by default) layernorm's rows with shifted weights at more programs per
         multiprocessor (occupancy=K caps the registers: 67 at 8192 x 16385 with shift=1)"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

import tile  # noqa: E402

ROOT = be.ROOT
only = set(sys.argv[1:]) or {"check", "vocab", "mid"}
torch.manual_seed(0)


def offset_view(m, n, dt, off):
    """An m x n tensor whose first element lies `off` elements past a fresh allocation."""
    if off == 0:
        return torch.empty(m, n, device="cuda", dtype=dt)
    return torch.empty(m * n + off, device="cuda", dtype=dt)[off:].view(m, n)


def check(kind, m, n, dt, xoff=0, yoff=0, schedule=None, woff=0, **defs):
    x = offset_view(m, n, dt, xoff)
    x.copy_(torch.randn(m, n, device="cuda", dtype=torch.float32) * 3 + 1)
    y = offset_view(m, n, dt, yoff)
    w = offset_view(1, n, dt, woff)[0]  # (woff: the weights off their allocation's 16 bytes)
    w.copy_(torch.randn(n, device="cuda", dtype=dt))
    bias = offset_view(1, n, dt, woff)[0]
    bias.copy_(torch.randn(n, device="cuda", dtype=dt))
    s1 = torch.empty(m, device="cuda", dtype=torch.float32)
    s2 = torch.empty(m, device="cuda", dtype=torch.float32)
    tname = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}[dt]
    k = tile.compile(os.path.join(ROOT, "lib", kind + ".tile"), kernel=kind, defines=dict(T=tname, **defs),
                     schedule=schedule)
    xf = x.float()
    if kind == "softmax":
        k(x, y)
        want, stat_err = F.softmax(xf, dim=-1), 0.0
    elif kind == "rmsnorm":
        k(x, w, y, s1, eps=1e-5)
        rstd = torch.rsqrt(xf.pow(2).mean(-1) + 1e-5)
        want = xf * rstd[:, None] * w.float()
        stat_err = ((s1 - rstd).abs() / rstd).max().item()
    else:
        k(x, w, bias, y, s1, s2, eps=1e-5)
        mean, var = xf.mean(-1), xf.var(-1, unbiased=False)
        rstd = torch.rsqrt(var + 1e-5)
        want = (xf - mean[:, None]) * rstd[:, None] * w.float() + bias.float()
        stat_err = max(((s1 - mean).abs() / mean.abs().clamp_min(1)).max().item(),
                       ((s2 - rstd).abs() / rstd).max().item())
    torch.cuda.synchronize()
    err = max(((y.float() - want).abs().max() / want.abs().max()).item(), stat_err)
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-4}[dt]
    cfg = ",".join(["%s=%s" % kv for kv in defs.items()] + ([schedule] if schedule else [])) or "default"
    be.row("%s %dx%d %s x+%d y+%d w+%d %s" % (kind, m, n, str(dt)[6:], xoff, yoff, woff, cfg), 1.0, 1.0, err, tol,
           k.config())


print("%-44s %9s %9s %8s" % ("case", "ours ms", "torch ms", "ratio"))
if "check" in only:
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16, torch.float32):
            for m, n in ((7, 4097), (33, 50257), (5, 20003), (3, 50264), (2, 1025), (4, 1031), (1, 100003)):
                check(kind, m, n, dt)
            check(kind, 9, 50257, dt, yoff=1)        # Y's rows disagree with X's: the loop as it was
            check(kind, 9, 50257, dt, xoff=3, yoff=3)  # both off the allocation's boundary
            check(kind, 9, 33333, dt, BN=4096, NW=8)
            check(kind, 9, 2049, dt, BN=256, NW=2)
            check(kind, 6, 50257, dt, schedule="rowalign=0")
            check(kind, 9, 50257, dt, schedule="rowcache=1", BN=2048, NW=16)
            check(kind, 5, 50257, dt, yoff=5, schedule="rowcache=1", BN=2048, NW=16)
            # the weights off their own boundary; read as shifted vectors with shift=1 (PERF.md 115)
            check(kind, 9, 50257, dt, woff=1)
            for sch in ("shift=1", None):
                check(kind, 9, 50257, dt, woff=3, xoff=5, schedule=sch)
                check(kind, 5, 4097, dt, woff=7, schedule=sch, BN=1024, NW=4)
                check(kind, 5, 3001, dt, woff=2, schedule=sch, BN=4096, NW=8)  # the one-tile row
if "vocab" in only:
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16):
            be.rows(kind, 4096, 50257, dt)
            be.rows(kind, 4096, 50257, dt, schedule="rowalign=0")
            if dt == torch.float16:
                for bn, nw in ((1024, 8), (2048, 8), (2048, 16), (4096, 16), (512, 4)):
                    be.rows(kind, 4096, 50257, dt, BN=bn, NW=nw)
if "noshiftw" in only:  # TILE_RA_NOW experiment: loops with other loads at the variable kept
    print("TILE_RA_NOW=%s" % os.environ.get("TILE_RA_NOW", ""))
    for kind in ("rmsnorm", "layernorm"):
        for m, n in ((4096, 50257), (16384, 4097), (8192, 16385)):
            be.rows(kind, m, n, torch.float16)
            be.rows(kind, m, n, torch.float16, schedule="rowalign=0")
if "wide" in only:  # not run by default: wider chunks and more warps for the looped rows
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((4096, 50257), (16384, 4097), (8192, 16385), (4096, 32769), (2048, 100003), (4096, 50264)):
            be.rows(kind, m, n, torch.float16)
            be.rows(kind, m, n, torch.float16, BN=4096, NW=16)
            be.rows(kind, m, n, torch.float16, BN=2048, NW=8)
if "variants" in only:  # not run by default: lib/softmax.tile against other forms
    one = os.path.join(ROOT, "tools", "exp", "softmax_1exp.tile")
    three = os.path.join(ROOT, "tools", "exp", "softmax3.tile")
    for m, n in ((33, 50257), (7, 4097), (3, 100003)):
        for dt in (torch.float16, torch.bfloat16):
            be.rows("softmax", m, n, dt, path=one)
    for dt in (torch.float16, torch.bfloat16):
        be.rows("softmax", 4096, 50257, dt)
        for bn, nw in ((1024, 4), (2048, 8), (4096, 16), (2048, 4), (1024, 8)):
            be.rows("softmax", 4096, 50257, dt, path=one, BN=bn, NW=nw)
    for bn, nw in ((1024, 4), (2048, 8), (4096, 16)):
        be.rows("softmax", 4096, 50257, torch.float16, path=three, BN=bn, NW=nw)
if "cache" in only:  # not run by default: row-align with the row cache
    for kind in ("softmax", "rmsnorm", "layernorm"):
        be.rows(kind, 4096, 50257, torch.float16)
        for bn, nw in ((1024, 8), (2048, 8), (2048, 16), (4096, 16), (1024, 16)):
            be.rows(kind, 4096, 50257, torch.float16, schedule="rowcache=1", BN=bn, NW=nw)
if "hint" in only:  # not run by default: L2 eviction hints (TILE_HINT, an experiment in cg_mem.c)
    print("TILE_HINT=%s" % os.environ.get("TILE_HINT", ""))
    for kind in ("softmax", "rmsnorm"):
        be.rows(kind, 4096, 50257, torch.float16)
        for bn, nw in ((2048, 8), (4096, 16), (8192, 16)):
            be.rows(kind, 4096, 50257, torch.float16, BN=bn, NW=nw)
if "knobs" in only:  # not run by default
    for kind in ("softmax", "rmsnorm"):
        for sched in ("prefetch=1", "occupancy=8", "occupancy=12"):
            be.rows(kind, 4096, 50257, torch.float16, schedule=sched)
        for bn, nw in ((2048, 4), (4096, 8), (8192, 16), (1024, 2), (2048, 2)):
            be.rows(kind, 4096, 50257, torch.float16, BN=bn, NW=nw)
            be.rows(kind, 4096, 50257, torch.float16, schedule="prefetch=1", BN=bn, NW=nw)
if "clustercheck" in only:  # not run by default: rows split across a cluster (PERF.md 103) against PyTorch
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16, torch.float32):
            for m, n in ((7, 50257), (33, 65536), (3, 40000), (1, 16385), (5, 50264)):
                check(kind, m, n, dt, BN=65536, NW=16)
            check(kind, 9, 50257, dt, yoff=1, BN=65536, NW=8)
            check(kind, 4, 30001, dt, BN=32768, NW=4)
            for c in ("2", "4", "8"):
                check(kind, 5, 50257, dt, schedule="cluster=" + c, BN=65536, NW=16)
if "cluster" in only:  # not run by default: the cluster split's speed against the defaults (PERF.md 103)
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((4096, 50257), (4096, 50264), (8192, 32768), (2048, 100003)):
            be.rows(kind, m, n, torch.float16)
            bn = 65536 if n <= 65536 else 131072
            if bn > 65536:
                continue
            for nw in (16, 8, 4):
                be.rows(kind, m, n, torch.float16, BN=bn, NW=nw)
            # two programs of 16 warps per multiprocessor: registers capped at 64
            be.rows(kind, m, n, torch.float16, schedule="occupancy=2", BN=bn, NW=16)
            for c in ("2", "8"):
                be.rows(kind, m, n, torch.float16, schedule="cluster=" + c, BN=bn, NW=16)
        be.rows(kind, 4096, 50257, torch.bfloat16)
        be.rows(kind, 4096, 50257, torch.bfloat16, BN=65536, NW=16)
if "exp" in only:  # not run by default: softmax's looped form with one exponential per element (PERF.md 109)
    two = os.path.join(ROOT, "tools", "exp", "softmax_2exp", "softmax.tile")
    fma = os.path.join(ROOT, "tools", "exp", "softmax_fma", "softmax.tile")  # PERF.md 110
    for m, n in ((4096, 50257), (4096, 50264), (8192, 16385), (2048, 100003), (16384, 4097)):
        be.rows("softmax", m, n, torch.float16)
        be.rows("softmax", m, n, torch.float16, path=two)
        be.rows("softmax", m, n, torch.float16, path=fma)
    be.rows("softmax", 4096, 50257, torch.bfloat16)
    be.rows("softmax", 4096, 50257, torch.bfloat16, path=two)
    be.rows("softmax", 4096, 50257, torch.bfloat16, path=fma)
if "rev" in only:  # not run by default: the row-reverse pass (PERF.md 102) against rowrev=0
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((4096, 50257), (8192, 16385), (4096, 32769), (2048, 100003), (16384, 4097)):
            be.rows(kind, m, n, torch.float16)
            be.rows(kind, m, n, torch.float16, schedule="rowrev=0")
        be.rows(kind, 4096, 50257, torch.bfloat16)
        be.rows(kind, 4096, 50257, torch.bfloat16, schedule="rowrev=0")
        for bn, nw in ((2048, 8), (2048, 16), (8192, 16), (1024, 8)):
            be.rows(kind, 4096, 50257, torch.float16, BN=bn, NW=nw)
if "pfcheck" in only:  # not run by default: chunks loaded D iterations ahead (PERF.md 113) against PyTorch
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16):
            for d in ("1", "2", "4"):
                for m, n in ((33, 50257), (7, 4097), (3, 100003), (4, 1031)):
                    check(kind, m, n, dt, schedule="prefetch=" + d)
                check(kind, 9, 50257, dt, yoff=1, schedule="prefetch=" + d)
                check(kind, 9, 33333, dt, schedule="prefetch=" + d, BN=512, NW=2)
        check(kind, 9, 50257, torch.float32, schedule="prefetch=2")
        check(kind, 9, 50257, torch.float16, schedule="prefetch=2,rowrev=0")
        check(kind, 9, 50257, torch.float16, schedule="prefetch=2,rowcache=1", BN=2048, NW=16)
        check(kind, 5, 50257, torch.bfloat16, yoff=5, schedule="prefetch=1,rowcache=1")
if "pf" in only:  # not run by default: the prefetch's speed (PERF.md 113)
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((4096, 50257), (16384, 4097), (8192, 16385), (2048, 100003)):
            be.rows(kind, m, n, torch.float16)
            for sched in ("prefetch=1", "prefetch=2", "prefetch=2,occupancy=2", "prefetch=3,occupancy=2"):
                be.rows(kind, m, n, torch.float16, schedule=sched)
        for bn, nw in ((2048, 16), (2048, 8), (1024, 8)):
            be.rows(kind, 4096, 50257, torch.float16, BN=bn, NW=nw)
            be.rows(kind, 4096, 50257, torch.float16, schedule="prefetch=2", BN=bn, NW=nw)
        be.rows(kind, 4096, 50257, torch.bfloat16)
        be.rows(kind, 4096, 50257, torch.bfloat16, schedule="prefetch=2")
        # rows on 16 bytes: the norms' weights in vectors too (what loads them element by
        # element at 50257 costs)
        be.rows(kind, 4096, 50264, torch.float16)
        be.rows(kind, 4096, 50264, torch.float16, schedule="prefetch=1")
        # the row cache (the second loop from shared memory) with its fill loop prefetched
        for m, n in ((4096, 50257), (4096, 32769), (2048, 100003)):
            for sched in ("rowcache=1", "rowcache=1,prefetch=1", "rowcache=1,prefetch=2"):
                be.rows(kind, m, n, torch.float16, schedule=sched)
                be.rows(kind, m, n, torch.float16, schedule=sched, BN=2048, NW=16)
if "pfcache" in only:  # not run by default: the prefetch beside the row cache (its fill loop left alone)
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n, dt in ((4096, 50257, torch.float16), (4096, 50264, torch.float16), (8192, 16385, torch.float16),
                         (4096, 32769, torch.bfloat16), (16384, 4097, torch.float16), (32768, 2049, torch.float16)):
            be.rows(kind, m, n, dt)
            be.rows(kind, m, n, dt, schedule="prefetch=1")
        for sched in ("rowfill=2", "rowfill=8", "rowfill=8,prefetch=1"):  # the fill's chunks in flight
            be.rows(kind, 4096, 50257, torch.float16, schedule=sched)
            be.rows(kind, 8192, 16385, torch.float16, schedule=sched)
if "shift" in only:  # not run by default: the norms' weights as shifted vectors (shift=1, PERF.md 115)
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n, dt in ((4096, 50257, torch.float16), (4096, 50257, torch.bfloat16), (4096, 50264, torch.float16),
                         (8192, 16385, torch.float16), (16384, 4097, torch.float16), (32768, 2049, torch.float16)):
            be.rows(kind, m, n, dt)
            if kind != "softmax":
                be.rows(kind, m, n, dt, schedule="shift=1")  # W (and B) as shifted vectors
                be.rows(kind, m, n, dt, schedule="occupancy=1")
                be.rows(kind, m, n, dt, schedule="prefetch=1")
if "nsweep" in only:  # not run by default: the norms' vocabulary rows over tile shapes and the W knobs
    for kind in ("rmsnorm", "layernorm"):
        for n in (50257, 50264):
            for bn, nw in ((4096, 16), (8192, 16), (8192, 8), (2048, 8)):
                for sched in (None, "shift=1", "prefetch=1", "shift=1,prefetch=1"):
                    be.rows(kind, 4096, n, torch.float16, schedule=sched, BN=bn, NW=nw)
if "lnocc" in only:  # not run by default: layernorm's shifted weights at more programs per multiprocessor
    for m, n, bn, nw, occs in ((8192, 16385, 2048, 8, (3, 4, 5)), (16384, 4097, 1024, 4, (7, 8, 10)),
                               (32768, 2049, 1024, 4, (8, 10)), (4096, 50257, 4096, 16, (2,))):
        be.rows("layernorm", m, n, torch.float16)
        be.rows("layernorm", m, n, torch.float16, schedule="shift=1")
        for occ in occs:
            be.rows("layernorm", m, n, torch.float16, schedule="shift=1,occupancy=%d" % occ, BN=bn, NW=nw)
            be.rows("layernorm", m, n, torch.float16, schedule="shift=0,occupancy=%d" % occ, BN=bn, NW=nw)
if "pfrule" in only:  # not run by default: how far ahead a norm's output pass should load W (and B)
    for kind in ("rmsnorm", "layernorm"):
        for m, n, dt in ((4096, 50257, torch.float16), (4096, 50264, torch.float16), (4096, 32000, torch.bfloat16),
                         (4096, 32769, torch.bfloat16), (8192, 16385, torch.float16), (16384, 4097, torch.float16),
                         (8192, 8192, torch.float16)):
            for sched in (None, "prefetch=1", "prefetch=2", "prefetch=3"):
                be.rows(kind, m, n, dt, schedule=sched)
        if kind == "layernorm":
            for sched in ("shift=1", "shift=1,prefetch=2"):
                be.rows(kind, 4096, 50257, torch.float16, schedule=sched)
if "rule" in only:  # not run by default: PERF.md 119's defaults against the ones before (shift=0,prefetch=0)
    for m, n, dt in ((4096, 50257, torch.float16), (4096, 50257, torch.bfloat16), (4096, 50264, torch.float16),
                     (4096, 32000, torch.bfloat16), (4096, 32769, torch.bfloat16), (8192, 16385, torch.float16),
                     (16384, 4097, torch.float16), (32768, 2049, torch.float16), (8192, 8192, torch.float16),
                     (8192, 8192, torch.bfloat16)):
        for kind in ("softmax", "rmsnorm", "layernorm"):
            be.rows(kind, m, n, dt)
            if kind != "softmax":
                be.rows(kind, m, n, dt, schedule="shift=0,prefetch=0")
if "rawcheck" in only:  # not run by default: shifted loads carried ahead as blocks (PERF.md 120)
    for kind in ("rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16):
            for sch in ("shift=1,prefetch=1", "shift=1,prefetch=2,pfunroll=1", "shift=2", "shift=2,prefetch=2,pfunroll=1"):
                check(kind, 33, 50257, dt, schedule=sch)
                check(kind, 7, 4097, dt, schedule=sch)
                check(kind, 9, 50257, dt, woff=3, xoff=5, schedule=sch)
                check(kind, 9, 33333, dt, woff=1, schedule=sch, BN=512, NW=2)
        check(kind, 9, 50257, torch.float32, schedule="shift=1,prefetch=2")
        check(kind, 9, 50257, torch.float32, schedule="shift=2,prefetch=1")
        check(kind, 5, 4097, torch.float16, woff=7, schedule="shift=2", BN=1024, NW=4)
        check(kind, 3, 100003, torch.float16, schedule="shift=1,prefetch=2")
        check(kind, 5, 50264, torch.float16, schedule="prefetch=3,pfunroll=1")
        check(kind, 3, 10001, torch.bfloat16, schedule="prefetch=1,pfunroll=1", BN=1024, NW=4)
    for kind in ("softmax", "rmsnorm", "layernorm"):  # a row cache of fewer slots (rowslots=K)
        for dt in (torch.float16, torch.bfloat16):
            check(kind, 33, 50257, dt, schedule="rowslots=5")
            check(kind, 9, 50257, dt, xoff=3, yoff=3, schedule="rowslots=8,occupancy=3")
            check(kind, 7, 100003, dt, schedule="rowslots=9")
if "slots" in only:  # not run by default: a row cache of K slots, the rest read again from L2
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((4096, 50257), (2048, 100003)):
            be.rows(kind, m, n, torch.float16)
            be.rows(kind, m, n, torch.float16, schedule="rowslots=8,occupancy=3", BN=4096, NW=16)
            be.rows(kind, m, n, torch.float16, schedule="rowslots=12,occupancy=4", BN=2048, NW=8)
            be.rows(kind, m, n, torch.float16, schedule="rowslots=8,occupancy=6", BN=2048, NW=8)
            be.rows(kind, m, n, torch.float16, schedule="rowslots=6,occupancy=8", BN=1024, NW=4)
        if kind != "softmax":
            be.rows(kind, 4096, 50257, torch.float16, schedule="rowslots=8,occupancy=3,shift=1,prefetch=1",
                    BN=4096, NW=16)
if "raw1" in only:  # not run by default: the first rows of raw and slots, most telling first
    for kind, scheds in (("layernorm", (None, "shift=2", "shift=2,prefetch=2,pfunroll=1", "shift=2,prefetch=1,pfunroll=1",
                                        "shift=1,prefetch=1", "shift=1,prefetch=1,pfunroll=1", "shift=2,prefetch=2",
                                        "rowslots=8,occupancy=3", "rowslots=8,occupancy=3,shift=2,prefetch=1")),
                         ("rmsnorm", (None, "shift=2", "shift=2,prefetch=2,pfunroll=1", "shift=1,prefetch=2,pfunroll=1",
                                      "shift=1,prefetch=1", "shift=0,prefetch=2,pfunroll=1", "rowslots=8,occupancy=3"))):
        for sched in scheds:
            be.rows(kind, 4096, 50257, torch.float16, schedule=sched)
    for kind in ("layernorm", "rmsnorm"):  # few warps, loads deep ahead (unrolled: registers to spare)
        for sched in ("shift=2,prefetch=3,pfunroll=1", "shift=1,prefetch=3,pfunroll=1"):
            be.rows(kind, 4096, 50257, torch.float16, schedule=sched, BN=2048, NW=8)
    for kind in ("layernorm", "rmsnorm"):  # rows on 16 bytes: prefetch=2 by default there
        for sched in (None, "pfunroll=1", "prefetch=3,pfunroll=1"):
            be.rows(kind, 4096, 50264, torch.float16, schedule=sched)
    for sched in (None, "rowslots=8,occupancy=3"):
        be.rows("softmax", 4096, 50257, torch.float16, schedule=sched, BN=4096, NW=16)
    for kind in ("layernorm", "rmsnorm"):
        for sched in (None, "shift=2,prefetch=2,pfunroll=1"):
            be.rows(kind, 4096, 50257, torch.bfloat16, schedule=sched)
if "raw" in only:  # not run by default: the norms' output pass with shifted weights loaded ahead
    be.rows("softmax", 4096, 50257, torch.float16)
    for kind in ("rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16):
            for sched in (None, "shift=0,prefetch=2", "shift=1,prefetch=0", "shift=1,prefetch=1", "shift=1,prefetch=2"):
                be.rows(kind, 4096, 50257, dt, schedule=sched)
        for sched in ("shift=1,prefetch=2", "shift=1,prefetch=3"):
            be.rows(kind, 4096, 50257, torch.float16, schedule=sched, BN=2048, NW=8)
            be.rows(kind, 4096, 50257, torch.float16, schedule=sched, BN=2048, NW=16)
        be.rows(kind, 4096, 50264, torch.float16)
        for m, n in ((8192, 16385), (16384, 4097)):
            for sched in (None, "shift=1", "shift=1,prefetch=1"):
                be.rows(kind, m, n, torch.float16, schedule=sched)
if "mid" in only:
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((16384, 4097), (8192, 16385), (4096, 32769), (2048, 100003)):
            be.rows(kind, m, n, torch.float16)
            be.rows(kind, m, n, torch.float16, schedule="rowalign=0")
        be.rows(kind, 8192, 8192, torch.float16)
print("rows ok: %d/%d" % (sum(be.ROWS), len(be.ROWS)))
