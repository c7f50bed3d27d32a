"""rowcache_tma.py - the row cache filled by TMA (PERF.md 96-98; the rowtma and rowprogs
options and the two-row prefetch live on branch exp/rowtma, run this there): ragged rows against PyTorch
with rowcache=1 (flat maps for rows off 16 bytes), then the vocabulary rows, default against
rowcache=1 at several tile configurations, in one process. argv: sections (check, vocab,
softmax3; all by default)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_examples as be  # noqa: E402

ROOT = be.ROOT
only = set(sys.argv[1:]) or {"check", "vocab", "softmax3", "partial"}
torch.manual_seed(0)
print("%-44s %9s %9s %8s" % ("case", "ours ms", "torch ms", "ratio"))
if "check" in only:
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16):
            for m, n in ((7, 4097), (33, 50257), (5, 20003), (3, 50264), (2, 1025)):
                be.rows(kind, m, n, dt, schedule="rowcache=1")
            be.rows(kind, 9, 50257, dt, schedule="rowcache=1", BN=2048, NW=16)
            be.rows(kind, 9, 33333, dt, schedule="rowcache=1", BN=4096, NW=8)
if "vocab" in only:
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for dt in (torch.float16, torch.bfloat16):
            be.rows(kind, 4096, 50257, dt)
            be.rows(kind, 4096, 50257, dt, schedule="rowcache=1")
            for bn, nw in ((1024, 8), (2048, 8), (2048, 16), (4096, 16)):
                be.rows(kind, 4096, 50257, dt, schedule="rowcache=1", BN=bn, NW=nw)
            if dt == torch.float16:
                be.rows(kind, 4096, 50257, dt, schedule="rowcache=1,tma=0", BN=2048, NW=16)
        be.rows(kind, 4096, 50264, torch.float16, schedule="rowcache=1", BN=2048, NW=16)
        be.rows(kind, 8192, 8192, torch.float16)
if "softmax3" in only:
    path = os.path.join(ROOT, "tools", "exp", "softmax3.tile")
    for bn, nw in ((1024, 16), (2048, 8), (2048, 16), (4096, 16)):
        be.rows("softmax", 4096, 50257, torch.float16, path=path, schedule="rowcache=1", BN=bn, NW=nw)
if "partial" in only:  # PERF.md 97: part of the row cached, the rest read again (from L2)
    for kind in ("softmax", "rmsnorm", "layernorm"):
        be.rows(kind, 4096, 50257, torch.float16)
        be.rows(kind, 4096, 50257, torch.float16, schedule="rowcache=1,tma=0", BN=2048, NW=16)
        for progs in (3, 4, 6):
            for tma in ("tma=0", "tma=1"):
                for bn, nw in ((2048, 8), (2048, 16), (1024, 8)):
                    be.rows(kind, 4096, 50257, torch.float16, schedule="rowcache=1,rowprogs=%d,%s" % (progs, tma),
                            BN=bn, NW=nw)
if "pcheck" in only:
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((33, 50257), (5, 20003), (3, 50264), (9, 100003)):
            for tma in ("tma=0", "tma=1"):
                be.rows(kind, m, n, torch.bfloat16, schedule="rowcache=1,rowprogs=4," + tma, BN=2048, NW=8)
if "walk" in only:  # PERF.md 98: rows per program, the next row's copies in flight (rows_walk.tile)
    walk = os.path.join(ROOT, "tools", "exp", "rows_walk.tile")
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((33, 50257), (7, 20003), (5, 50264), (300, 4097)):
            be.rows(kind, m, n, torch.bfloat16, path=walk, schedule="rowcache=1,rowtma=1", BN=2048, NW=16, P=132)
        for dt in (torch.float16, torch.bfloat16):
            be.rows(kind, 4096, 50257, dt)
            for bn, nw in ((2048, 16), (1024, 16), (4096, 16), (2048, 8)):
                be.rows(kind, 4096, 50257, dt, path=walk, schedule="rowcache=1,rowtma=1", BN=bn, NW=nw, P=132)
        be.rows(kind, 4096, 50257, torch.float16, path=walk, BN=2048, NW=16, P=132)
        be.rows(kind, 4096, 50264, torch.float16, path=walk, schedule="rowcache=1,rowtma=1", BN=2048, NW=16, P=132)
if "midrows" in only:  # the threads' fill (rowcache=1, main) against the defaults across row lengths
    for kind in ("softmax", "rmsnorm", "layernorm"):
        for m, n in ((16384, 4097), (8192, 16385), (4096, 32769), (4096, 50257), (2048, 100003)):
            be.rows(kind, m, n, torch.float16)
            be.rows(kind, m, n, torch.float16, schedule="rowcache=1", BN=2048, NW=16)
            be.rows(kind, m, n, torch.float16, BN=2048, NW=16)
print("rows ok: %d/%d" % (sum(be.ROWS), len(be.ROWS)))
