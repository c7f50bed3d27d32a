#!/usr/bin/env python3
"""bench_attention.py - the library's attention kernel (lib/attention.tile) against PyTorch's
scaled_dot_product_attention (flash and cuDNN backends): speed and correctness.

  python3 tools/bench_attention.py [--lib PATH] [--our CFG] [--our-d64 CFG] [--our-d128 CFG]
                                   [--quick] [--csv FILE] [--timer triton|events] [--lse]
                                   [--schedule KEY=V,...] [--n N,...]
                                   [--no-extra] [--no-perf] [--selftest]

libtile.so is loaded with ctypes from --lib, else $TILE_LIB, else ./.carry/libtile.so (then
./build/libtile.so). The kernel source is lib/attention.tile next to this tools/ folder (or
--kernel-file).

Performance configurations: batch 4 (batch 1 at N=16384), 32 heads, N = NK in {1024, 4096,
16384}, head dim 64 and 128, causal and not, f16 and bf16; q, k, v from torch.randn on the GPU
in [B, H, N, D] layout. Each is
  - checked: our O against a float32 reference (torch's SDPA on the inputs upcast to float32,
    math backend, heads in chunks), relative error ||ours - ref|| / ||ref|| must be < 2e-3
    (f16) or 1e-2 (bf16); O is poisoned with NaN first, so an unwritten element fails. The
    flash backend's error against the same reference is printed for comparison;
  - timed: ours (tile_launch on torch's current stream), SDPA with the FLASH_ATTENTION
    backend and with the CUDNN_ATTENTION backend (n/a when a backend refuses a config), all
    three with the same timer: triton.testing.do_bench(return_mode="median") when triton
    imports (it times each call with CUDA events and clears a 256 MB buffer before each, so
    the L2 is cold and launch overheads are hidden), else an equivalent CUDA-event loop here
    (--timer events). TFLOP/s = 4*B*H*N*N*D / time, halved for causal.
Correctness-only configurations (skipped by --no-extra): ragged N (1000, 4095), a query
length different from the key length, grouped-query attention (HKV = H/4; the reference
repeats K and V to H heads with repeat_interleave), head dims 64 and 128, causal and not,
f16 and bf16, all with HAS_LSE=true: LSE is checked against torch.logsumexp of the scaled
(and masked) float32 scores (max abs error < 1e-3).

Our tile configuration: --our sets it for every head dim ("BM=128,BN=64,NW=8,STAGES=2";
keys BM BN BNM NW STAGES LONG_FIRST LPT; "default" = the lib file's defaults); --our-d64 / --our-d128 per head
dim. Without them the kernel's own defaults are used (its `defaults sm_90a` clauses: what a
user who sets nothing gets).

--selftest needs neither torch nor a GPU: it checks the ctypes structures against tile.h
(also live, by compiling a small C program, when a C compiler is there), then compiles the
kernel for the CPU interpreter and runs small causal / GQA / ragged cases from plain Python
lists against a pure-Python reference (O and LSE), and exercises tile_bench, the stats and a
rejected launch.

Exit status: 0 all checks passed; 1 a check failed or an error occurred; 2 bad usage or
libtile.so / the kernel file not found; 77 torch or CUDA not available (skipped).
"""
import argparse
import ctypes
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback
import warnings

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Per-head-dim configurations of our kernel (overridable with --our / --our-d64 /
# --our-d128). None: the kernel's own defaults (its `defaults sm_90a` clauses, PERF.md 57),
# what a user who sets nothing gets.
DEFAULT_CFG = {}
CFG_KEYS = ("BM", "BN", "BNM", "NW", "STAGES", "LONG_FIRST", "LPT")

# The configurations (module level, so that a test can shrink them).
PERF_N = (1024, 4096, 16384)          # N = NK
PERF_N_QUICK = (4096,)
PERF_HEADS = 32
PERF_HEAD_DIMS = (64, 128)
def perf_batch(n):
    return 1 if n >= 16384 else 4
EXTRA_SHAPES = ((1000, 1000), (4095, 4095), (333, 1000))  # (N, NK); --quick: the first two
EXTRA_B, EXTRA_H, EXTRA_HKV = 2, 8, (8, 2)                # MHA and GQA (HKV = H/4)

TOL = {"f16": 2e-3, "bf16": 1e-2}
LSE_TOL = 1e-3

# ---- ctypes mirror of runtime/include/tile.h ---------------------------------------------------
c_int, c_uint, c_int64, c_double, c_size_t = (ctypes.c_int, ctypes.c_uint, ctypes.c_int64,
                                              ctypes.c_double, ctypes.c_size_t)
c_char_p, c_void_p, POINTER = ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER

TILE_MAX_RANK = 4
# enum tile_dtype
TILE_F16, TILE_BF16, TILE_F32 = 6, 7, 8
# enum tile_device
TILE_DEVICE_CPU, TILE_DEVICE_CUDA = 0, 1
# enum tile_arg_kind
TILE_ARG_TENSOR, TILE_ARG_INT, TILE_ARG_FLOAT = 1, 2, 3
# enum tile_status (the order of TILE_STATUS_MAP)
TILE_OK, TILE_BAD_LAUNCH = 0, 6


class TileContextOptions(ctypes.Structure):
    _fields_ = [("cuda_device", c_int), ("cpu_threads", c_int), ("cache_dir", c_char_p),
                ("alloc", c_void_p), ("alloc_ud", c_void_p), ("trace_path", c_char_p)]


class TileDefine(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("value", c_char_p)]


class TileCompileOptions(ctypes.Structure):
    _fields_ = [("kernel", c_char_p), ("defines", POINTER(TileDefine)), ("ndefines", c_uint),
                ("device", c_int), ("arch", c_char_p), ("flags", c_uint), ("schedule", c_char_p)]


class TileTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("dtype", c_int), ("rank", c_uint),
                ("shape", c_int64 * TILE_MAX_RANK), ("strides", c_int64 * TILE_MAX_RANK)]


class TileArgUnion(ctypes.Union):
    _fields_ = [("tensor", TileTensor), ("i", c_int64), ("f", c_double)]


class TileArg(ctypes.Structure):
    _fields_ = [("kind", c_int), ("u", TileArgUnion)]


class TileLaunchOptions(ctypes.Structure):
    _fields_ = [("stream", c_void_p)]


class TileKernelStats(ctypes.Structure):
    _fields_ = [("grid", c_uint * 3), ("threads", c_uint), ("shared_bytes", c_uint),
                ("registers", c_int), ("local_bytes", c_int), ("compile_ms", c_double),
                ("cache_hit", c_int), ("repacked", c_uint), ("blocks_per_sm", c_int),
                ("multiprocessors", c_int)]


class TileBenchOptions(ctypes.Structure):
    _fields_ = [("stream", c_void_p), ("warmup", c_int), ("reps", c_int), ("max_ms", c_double),
                ("flush_l2_bytes", c_size_t)]


class TileBenchResult(ctypes.Structure):
    _fields_ = [("median_ms", c_double), ("min_ms", c_double), ("mean_ms", c_double),
                ("reps", c_int)]


class TileDeviceInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("cc_major", c_int), ("cc_minor", c_int),
                ("sm_count", c_int), ("smem_per_block_optin", c_int), ("driver_version", c_int),
                ("arch", c_char_p), ("clock_mhz", c_int), ("peak_tc_f16_tflops", c_double),
                ("peak_f32_tflops", c_double), ("peak_mem_gbps", c_double)]


# Sizes and offsets printed by this C program, compiled against runtime/include/tile.h with
# gcc 12 (Debian 12, x86-64) on the build machine (the same program LAYOUT_PROGRAM below):
#   tile_context_options 40 (cache_dir 8, trace_path 32)      tile_define 16
#   tile_compile_options 48 (ndefines 16, device 20, arch 24, flags 32, schedule 40)
#   tile_tensor 80 (dtype 8, rank 12, shape 16, strides 48)      tile_arg 88 (u 8)
#   tile_launch_options 8
#   tile_kernel_stats 56 (threads 12, registers 20, local_bytes 24, compile_ms 32, cache_hit 40,
#                         repacked 44, blocks_per_sm 48, multiprocessors 52)
#   tile_bench_options 32 (warmup 8, max_ms 16, flush_l2_bytes 24)
#   tile_bench_result 32 (reps 24)
#   tile_device_info 320 (cc_major 256, driver_version 272, arch 280, peak_mem_gbps 312)
EXPECTED_LAYOUT = {
    "tile_context_options": (TileContextOptions, 40, {"cache_dir": 8, "trace_path": 32}),
    "tile_define": (TileDefine, 16, {"value": 8}),
    "tile_compile_options": (TileCompileOptions, 48,
                             {"ndefines": 16, "device": 20, "arch": 24, "flags": 32, "schedule": 40}),
    "tile_tensor": (TileTensor, 80, {"dtype": 8, "rank": 12, "shape": 16, "strides": 48}),
    "tile_arg": (TileArg, 88, {"u": 8}),
    "tile_launch_options": (TileLaunchOptions, 8, {"stream": 0}),
    "tile_kernel_stats": (TileKernelStats, 56, {"threads": 12, "registers": 20,
                                                "local_bytes": 24, "compile_ms": 32,
                                                "cache_hit": 40, "repacked": 44,
                                                "blocks_per_sm": 48, "multiprocessors": 52}),
    "tile_bench_options": (TileBenchOptions, 32, {"warmup": 8, "max_ms": 16,
                                                  "flush_l2_bytes": 24}),
    "tile_bench_result": (TileBenchResult, 32, {"reps": 24}),
    "tile_device_info": (TileDeviceInfo, 320, {"cc_major": 256, "driver_version": 272,
                                               "arch": 280, "peak_mem_gbps": 312}),
}

LAYOUT_PROGRAM = r"""
#include <stdio.h>
#include <stddef.h>
#include "tile.h"
#define S(t) printf("%s size %zu\n", #t, sizeof(t))
#define O(t, f) printf("%s %s %zu\n", #t, #f, offsetof(t, f))
int main(void) {
  S(tile_context_options); O(tile_context_options, cache_dir); O(tile_context_options, trace_path);
  S(tile_define); O(tile_define, value);
  S(tile_compile_options); O(tile_compile_options, ndefines); O(tile_compile_options, device);
  O(tile_compile_options, arch); O(tile_compile_options, flags); O(tile_compile_options, schedule);
  S(tile_tensor); O(tile_tensor, dtype); O(tile_tensor, rank); O(tile_tensor, shape);
  O(tile_tensor, strides);
  S(tile_arg); O(tile_arg, u);
  S(tile_launch_options); O(tile_launch_options, stream);
  S(tile_kernel_stats); O(tile_kernel_stats, threads); O(tile_kernel_stats, registers);
  O(tile_kernel_stats, local_bytes); O(tile_kernel_stats, compile_ms); O(tile_kernel_stats, cache_hit);
  O(tile_kernel_stats, repacked); O(tile_kernel_stats, blocks_per_sm); O(tile_kernel_stats, multiprocessors);
  S(tile_bench_options); O(tile_bench_options, warmup); O(tile_bench_options, max_ms);
  O(tile_bench_options, flush_l2_bytes);
  S(tile_bench_result); O(tile_bench_result, reps);
  S(tile_device_info); O(tile_device_info, cc_major); O(tile_device_info, driver_version);
  O(tile_device_info, arch); O(tile_device_info, peak_mem_gbps);
  return 0;
}
"""


def check_layout():
    """Asserts the ctypes structures have tile.h's sizes and offsets (hardcoded above)."""
    assert ctypes.sizeof(c_void_p) == 8, "a 64-bit Python is needed"
    for name, (cls, size, offsets) in EXPECTED_LAYOUT.items():
        got = ctypes.sizeof(cls)
        assert got == size, "ctypes %s is %d bytes, tile.h's is %d" % (name, got, size)
        for field, off in offsets.items():
            got = getattr(cls, field).offset
            assert got == off, "ctypes %s.%s at offset %d, tile.h's at %d" % (name, field, got, off)


def check_layout_live(include_dir):
    """Compiles LAYOUT_PROGRAM against tile.h with the C compiler here, if any, and compares.
    Returns (ok or None when no compiler, message)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return None, "no C compiler: live layout check skipped"
    if not os.path.exists(os.path.join(include_dir, "tile.h")):
        return None, "no tile.h in %s: live layout check skipped" % include_dir
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write(LAYOUT_PROGRAM)
        r = subprocess.run([cc, "-std=c11", "-I", include_dir, src, "-o", exe],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return False, "compiling the layout program failed: %s" % r.stderr.strip()[:500]
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    bad = []
    for line in out.splitlines():
        t, field, value = line.split()
        cls, size, _ = EXPECTED_LAYOUT[t]
        want = ctypes.sizeof(cls) if field == "size" else getattr(cls, field).offset
        if int(value) != want:
            bad.append("%s.%s: C %s, ctypes %d" % (t, field, value, want))
    if bad:
        return False, "layout mismatch: " + "; ".join(bad)
    return True, "ctypes layouts match tile.h as compiled by %s (%d values)" % (
        cc, len(out.splitlines()))


class TileError(RuntimeError):
    pass


class Tile:
    """The few tile.h functions this tool needs, through ctypes."""

    def __init__(self, path):
        self.lib = lib = ctypes.CDLL(path)
        self.path = path
        sig = {
            "tile_version": ([], c_char_p),
            "tile_status_name": ([c_int], c_char_p),
            "tile_errmsg": ([c_void_p], c_char_p),
            "tile_context_create": ([POINTER(TileContextOptions), POINTER(c_void_p)], c_int),
            "tile_context_destroy": ([c_void_p], None),
            "tile_compile_file": ([c_void_p, c_char_p, POINTER(TileCompileOptions),
                                   POINTER(c_void_p)], c_int),
            "tile_kernel_release": ([c_void_p], None),
            "tile_kernel_config": ([c_void_p], c_char_p),
            "tile_launch": ([c_void_p, c_void_p, POINTER(TileArg), c_uint,
                             POINTER(TileLaunchOptions)], c_int),
            "tile_kernel_get_stats": ([c_void_p, POINTER(TileKernelStats)], c_int),
            "tile_device_query": ([c_void_p, c_int, POINTER(TileDeviceInfo)], c_int),
            "tile_synchronize": ([c_void_p, c_int], c_int),
            "tile_bench": ([c_void_p, c_void_p, POINTER(TileArg), c_uint,
                            POINTER(TileBenchOptions), POINTER(TileBenchResult)], c_int),
        }
        for name, (argtypes, restype) in sig.items():
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = restype
        self.ctx = c_void_p()
        opts = TileContextOptions(0, 0, None)
        st = lib.tile_context_create(ctypes.byref(opts), ctypes.byref(self.ctx))
        if st != TILE_OK or not self.ctx:
            raise TileError("tile_context_create failed: status %d" % st)
        self.kernels = {}

    def version(self):
        return self.lib.tile_version().decode()

    def error(self, st, what):
        msg = (self.lib.tile_errmsg(self.ctx) or b"").decode(errors="replace")
        name = (self.lib.tile_status_name(st) or b"?").decode()
        return TileError("%s: %s: %s" % (what, name, msg))

    def device_query(self, dev):
        info = TileDeviceInfo()
        st = self.lib.tile_device_query(self.ctx, dev, ctypes.byref(info))
        if st != TILE_OK:
            raise self.error(st, "tile_device_query")
        return info

    def compile(self, path, defines, device, kernel=b"attention", schedule=None):
        key = (path, tuple(sorted(defines.items())), device, kernel, schedule)
        if key in self.kernels:
            return self.kernels[key]
        items = sorted(defines.items())
        keep = [(k.encode(), str(v).encode()) for k, v in items]
        arr = (TileDefine * max(1, len(keep)))()
        for i, (k, v) in enumerate(keep):
            arr[i].name, arr[i].value = k, v
        co = TileCompileOptions(kernel, arr, len(keep), device, None, 0,
                                schedule.encode() if schedule else None)
        k = c_void_p()
        st = self.lib.tile_compile_file(self.ctx, path.encode(), ctypes.byref(co), ctypes.byref(k))
        if st != TILE_OK:
            raise self.error(st, "compiling %s [%s]" % (
                os.path.basename(path), ",".join("%s=%s" % kv for kv in items)))
        self.kernels[key] = k
        return k

    def config(self, k):
        return (self.lib.tile_kernel_config(k) or b"").decode()

    def stats(self, k):
        s = TileKernelStats()
        st = self.lib.tile_kernel_get_stats(k, ctypes.byref(s))
        if st != TILE_OK:
            raise self.error(st, "tile_kernel_get_stats")
        return s

    def launch(self, k, args, opts):
        st = self.lib.tile_launch(self.ctx, k, args, len(args), ctypes.byref(opts))
        if st != TILE_OK:
            raise self.error(st, "tile_launch")

    def synchronize(self, dev):
        st = self.lib.tile_synchronize(self.ctx, dev)
        if st != TILE_OK:
            raise self.error(st, "tile_synchronize")

    def close(self):
        for k in self.kernels.values():
            self.lib.tile_kernel_release(k)
        self.kernels = {}
        if self.ctx:
            self.lib.tile_context_destroy(self.ctx)
            self.ctx = c_void_p()


def tensor_arg(ptr, dtype, shape):
    a = TileArg()
    a.kind = TILE_ARG_TENSOR
    a.u.tensor.data = ptr
    a.u.tensor.dtype = dtype
    a.u.tensor.rank = len(shape)
    for i in range(TILE_MAX_RANK):
        a.u.tensor.shape[i] = shape[i] if i < len(shape) else 0
        a.u.tensor.strides[i] = 0  # contiguous row-major
    return a


def float_arg(v):
    a = TileArg()
    a.kind = TILE_ARG_FLOAT
    a.u.f = v
    return a


def attention_args(q, k, v, o, lse, dtype, B, H, HKV, N, NK, D, scale):
    """The kernel's arguments, in its parameter order:
    (Q: T[B,H,N,D], K: T[B,HKV,NK,D], V: T[B,HKV,NK,D], O: out T[B,H,N,D], LSE: out f32[B,H,N],
    scale: f32). Pointers are ints (or None for an unused LSE)."""
    args = (TileArg * 6)()
    args[0] = tensor_arg(q, dtype, (B, H, N, D))
    args[1] = tensor_arg(k, dtype, (B, HKV, NK, D))
    args[2] = tensor_arg(v, dtype, (B, HKV, NK, D))
    args[3] = tensor_arg(o, dtype, (B, H, N, D))
    args[4] = tensor_arg(lse, TILE_F32, (B, H, N))
    args[5] = float_arg(scale)
    return args


def parse_cfg(text):
    if text in (None, "", "default"):
        return {}
    cfg = {}
    for item in text.split(","):
        if "=" not in item:
            raise ValueError("'%s' is not NAME=VALUE" % item)
        k, v = item.split("=", 1)
        k = k.strip()
        if k not in CFG_KEYS:
            raise ValueError("%s cannot be set (allowed: %s; T, D, CAUSAL and HAS_LSE follow "
                             "the configuration)" % (k, " ".join(CFG_KEYS)))
        cfg[k] = v.strip()
    return cfg


def kernel_cfg_text(tile, kern):
    """The tile parameters a compiled kernel took (its defaults): BM=..,BN=..,..."""
    items = dict(kv.split("=", 1) for kv in tile.config(kern).split(",") if "=" in kv)
    return ",".join("%s=%s" % (k, items[k]) for k in CFG_KEYS if k in items) or "default"


def cfg_text(cfg):
    return ",".join("%s=%s" % (k, cfg[k]) for k in CFG_KEYS if k in cfg) or "default"


# ---- the CPU self-test (no torch, no GPU) ------------------------------------------------------

def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def f16_value(h):
    return struct.unpack("<e", struct.pack("<H", h))[0]


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u += 0x7FFF + ((u >> 16) & 1)  # round to nearest even (finite inputs)
    return (u >> 16) & 0xFFFF


def bf16_value(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


def py_attention(q, k, v, B, H, HKV, N, NK, D, scale, causal):
    """Pure-Python float reference: O [B*H*N*D] and LSE [B*H*N] from flat lists."""
    o = [0.0] * (B * H * N * D)
    lse = [0.0] * (B * H * N)
    g = H // HKV
    for b in range(B):
        for h in range(H):
            hk = h // g
            for i in range(N):
                qi = (((b * H + h) * N) + i) * D
                s = []
                for j in range(NK):
                    if causal and j > i:
                        continue
                    kj = (((b * HKV + hk) * NK) + j) * D
                    s.append((j, scale * sum(q[qi + d] * k[kj + d] for d in range(D))))
                if not s:
                    lse[(b * H + h) * N + i] = -math.inf
                    continue
                m = max(x for _, x in s)
                w = [(j, math.exp(x - m)) for j, x in s]
                tot = sum(x for _, x in w)
                lse[(b * H + h) * N + i] = m + math.log(tot)
                for d in range(D):
                    acc = 0.0
                    for j, p in w:
                        acc += p * v[(((b * HKV + hk) * NK) + j) * D + d]
                    o[qi + d] = acc / tot
    return o, lse


def rel_err(got, want):
    num = sum((a - b) ** 2 for a, b in zip(got, want))
    den = sum(b * b for b in want)
    if any(not math.isfinite(a) for a in got):
        return math.inf
    return math.sqrt(num / den) if den > 0 else math.sqrt(num)


def selftest(args):
    fails = 0
    check_layout()
    print("selftest: ctypes layouts match the hardcoded tile.h values: ok")
    ok, msg = check_layout_live(os.path.join(REPO, "runtime", "include"))
    print("selftest: %s%s" % (msg, "" if ok is None else (": ok" if ok else ": FAIL")))
    fails += ok is False

    tile = Tile(args.lib)
    print("selftest: %s from %s" % (tile.version(), args.lib))
    info = tile.device_query(TILE_DEVICE_CPU)
    print("selftest: CPU device: %s (arch %s)" % (info.name.decode(), (info.arch or b"").decode()))
    rnd = random.Random(args.seed)
    cases = [  # (dtype, D, causal, B, H, HKV, N, NK, cfg)
        ("f16", 16, True, 1, 4, 2, 37, 37, {"BM": "16", "BN": "16"}),
        ("bf16", 16, False, 1, 4, 2, 37, 37, {"BM": "16", "BN": "16"}),
        ("f16", 16, False, 2, 2, 2, 20, 45, {"BM": "16", "BN": "16", "STAGES": "1"}),
        ("bf16", 32, True, 1, 2, 1, 33, 33, {"BM": "32", "BN": "16", "NW": "4"}),
    ]
    for dt, D, causal, B, H, HKV, N, NK, cfg in cases:
        enc, dec = (f16_bits, f16_value) if dt == "f16" else (bf16_bits, bf16_value)
        tdt = TILE_F16 if dt == "f16" else TILE_BF16
        scale = 1.0 / math.sqrt(D)

        def make(n):
            bits = [enc(rnd.gauss(0.0, 1.0)) for _ in range(n)]
            return bits, [dec(h) for h in bits]

        qb, qf = make(B * H * N * D)
        kb, kf = make(B * HKV * NK * D)
        vb, vf = make(B * HKV * NK * D)
        Q = (ctypes.c_uint16 * len(qb))(*qb)
        K = (ctypes.c_uint16 * len(kb))(*kb)
        V = (ctypes.c_uint16 * len(vb))(*vb)
        O = (ctypes.c_uint16 * (B * H * N * D))(*([0xFFFF] * (B * H * N * D)))  # NaN poison
        L = (ctypes.c_float * (B * H * N))(*([math.nan] * (B * H * N)))
        defines = dict(T=dt, D=D, CAUSAL="true" if causal else "false", HAS_LSE="true", **cfg)
        name = "cpu attention %s D=%d causal=%d B=%d H=%d HKV=%d N=%d NK=%d [%s]" % (
            dt, D, causal, B, H, HKV, N, NK, cfg_text(cfg))
        try:
            k = tile.compile(args.kernel_file, defines, TILE_DEVICE_CPU)
            a = attention_args(ctypes.addressof(Q), ctypes.addressof(K), ctypes.addressof(V),
                               ctypes.addressof(O), ctypes.addressof(L), tdt, B, H, HKV, N, NK, D,
                               scale)
            tile.launch(k, a, TileLaunchOptions(None))
            st = tile.stats(k)
        except TileError as e:
            print("selftest: %s: FAIL: %s" % (name, e))
            fails += 1
            continue
        ro, rl = py_attention(qf, kf, vf, B, H, HKV, N, NK, D, scale, causal)
        got_o = [dec(h) for h in O]
        e_o = rel_err(got_o, ro)
        e_l = max(abs(a - b) if math.isfinite(a) else math.inf for a, b in zip(L, rl))
        ok = e_o < TOL[dt] and e_l < LSE_TOL
        print("selftest: %s: O rel err %.2e, LSE max abs err %.2e, grid %dx%dx%d: %s" % (
            name, e_o, e_l, st.grid[0], st.grid[1], st.grid[2], "ok" if ok else "FAIL"))
        fails += not ok

    # tile_bench on the CPU (host clock): exercises the bench structures
    k = tile.compile(args.kernel_file, {"T": "f16", "D": 16, "BM": 16, "BN": 16},
                     TILE_DEVICE_CPU)
    n = 1 * 2 * 16 * 16
    bufs = [(ctypes.c_uint16 * n)(*([f16_bits(0.5)] * n)) for _ in range(4)]
    a = attention_args(*(ctypes.addressof(b) for b in bufs), None, TILE_F16, 1, 2, 2, 16, 16, 16,
                       0.25)
    bo, br = TileBenchOptions(None, 1, 3, 1000.0, 0), TileBenchResult()
    stb = tile.lib.tile_bench(tile.ctx, k, a, 6, ctypes.byref(bo), ctypes.byref(br))
    ok = stb == TILE_OK and br.reps == 3 and 0 <= br.min_ms <= br.median_ms
    ok = ok and abs(f16_value(bufs[3][0]) - 0.5) < 1e-3  # softmax of equal scores averages V
    print("selftest: tile_bench on the CPU: status %d, %d reps, median %.3f ms: %s" % (
        stb, br.reps, br.median_ms, "ok" if ok else "FAIL"))
    fails += not ok

    # a rejected launch: Q given as f32 must be TILE_BAD_LAUNCH with a message naming it
    a[0].u.tensor.dtype = TILE_F32
    stl = tile.lib.tile_launch(tile.ctx, k, a, 6, ctypes.byref(TileLaunchOptions(None)))
    msg = (tile.lib.tile_errmsg(tile.ctx) or b"").decode()
    ok = stl == TILE_BAD_LAUNCH and "Q" in msg
    print("selftest: rejected launch: %s, '%s': %s" % (
        (tile.lib.tile_status_name(stl) or b"?").decode(), msg, "ok" if ok else "FAIL"))
    fails += not ok
    tile.close()
    print("selftest: %s (%d failure%s)" % ("FAIL" if fails else "PASS", fails,
                                           "" if fails == 1 else "s"))
    return 1 if fails else 0


# ---- the GPU benchmark ---------------------------------------------------------------------------

class Timer:
    def __init__(self, torch, mode, quick):
        self.torch = torch
        self.warmup_ms, self.rep_ms = (10, 50) if quick else (25, 200)
        self.mode = mode
        self.do_bench = None
        self.cache = None
        if mode in ("auto", "triton"):
            try:
                import triton.testing
                self.do_bench = triton.testing.do_bench
                self.mode = "triton"
            except Exception as e:  # noqa: BLE001 - any import problem means: use our loop
                if mode == "triton":
                    print("bench_attention: triton does not import (%s); using CUDA events" % e)
                self.mode = "events"

    def describe(self):
        if self.mode == "triton":
            return ("triton.testing.do_bench(warmup=%d ms, rep=%d ms, return_mode='median'): "
                    "CUDA events per call, 256 MB cache clear before each" % (
                        self.warmup_ms, self.rep_ms))
        return ("CUDA events per call (torch.cuda.Event), 256 MB memset before each, "
                "warm-up %d ms, %d ms of runs (5..1000), median" % (self.warmup_ms, self.rep_ms))

    def __call__(self, fn):
        if self.mode == "triton":
            try:
                return float(self.do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms,
                                           return_mode="median"))
            except Exception as e:  # noqa: BLE001 - e.g. another signature: fall back for good
                if is_fatal(str(e)) or isinstance(e, TileError):
                    raise
                print("bench_attention: do_bench failed (%s: %s); using CUDA events from now on"
                      % (type(e).__name__, e))
                self.mode = "events"
        return self._events(fn)

    def _events(self, fn):
        torch = self.torch
        if self.cache is None:
            self.cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(5):
            self.cache.zero_()
            fn()
        e.record()
        torch.cuda.synchronize()
        est = max(s.elapsed_time(e) / 5, 1e-3)
        for _ in range(max(1, int(self.warmup_ms / est))):
            fn()
        n = max(5, min(1000, int(self.rep_ms / est)))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            self.cache.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        t = sorted(a.elapsed_time(b) for a, b in zip(starts, ends))
        return t[n // 2] if n % 2 else 0.5 * (t[n // 2 - 1] + t[n // 2])


def torch_reference(torch, F, q, k, v, causal, scale, want_lse):
    """float32 reference O (and LSE) by SDPA's math backend on upcast inputs, heads in chunks
    so that one chunk's score matrix stays near 1 GiB. GQA: K, V repeated to H heads."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, H, N, D = q.shape
    HKV, NK = k.shape[1], k.shape[2]
    g = H // HKV
    out = torch.empty((B, H, N, D), dtype=torch.float32, device=q.device)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device) if want_lse else None
    chunk = max(1, min(H, (1 << 30) // max(1, N * NK * 4)))
    mask = None
    if causal:
        mask = torch.ones((N, NK), dtype=torch.bool, device=q.device).tril()
    for b in range(B):
        for h0 in range(0, H, chunk):
            h1 = min(H, h0 + chunk)
            qs = q[b:b + 1, h0:h1].float()
            kvh = torch.arange(h0, h1, device=q.device) // g  # == repeat_interleave(g, dim=1)
            ks = k[b:b + 1].index_select(1, kvh).float()
            vs = v[b:b + 1].index_select(1, kvh).float()
            with sdpa_kernel(SDPBackend.MATH):
                out[b:b + 1, h0:h1] = F.scaled_dot_product_attention(
                    qs, ks, vs, is_causal=causal, scale=scale)
            if want_lse:
                s = torch.matmul(qs, ks.transpose(-1, -2)) * scale
                if causal:
                    s = s.masked_fill(~mask, float("-inf"))
                lse[b:b + 1, h0:h1] = torch.logsumexp(s, dim=-1)
                del s
    return out, lse


def rel_err_t(torch, got, ref):
    if not bool(torch.isfinite(got).all()):
        return math.inf
    d = torch.linalg.vector_norm((got.float() - ref).flatten(), dtype=torch.float64)
    r = torch.linalg.vector_norm(ref.flatten(), dtype=torch.float64)
    return float(d / r) if float(r) > 0 else float(d)


def is_fatal(msg):
    m = msg.lower()
    return ("illegal" in m or "cuda_error" in m or "unspecified launch failure" in m or
            "device-side assert" in m or "misaligned address" in m)


def record_failure(row, e, verbose):
    """Marks the row failed with the exception's first line; True if the CUDA context is gone."""
    row["fail"] = True
    text = str(e).strip()
    row["note"] += "%s: %s; " % (type(e).__name__, text.splitlines()[0][:300] if text else "")
    if verbose:
        traceback.print_exc()
    return is_fatal(str(e))


def run_gpu(args):
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        print("bench_attention: SKIP: torch is not importable (%s)" % e)
        return SKIP
    if not torch.cuda.is_available():
        print("bench_attention: SKIP: torch %s sees no CUDA GPU" % torch.__version__)
        return SKIP
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001
        print("bench_attention: torch %s lacks torch.nn.attention.sdpa_kernel (%s)" % (
            torch.__version__, e))
        return 1
    # a float32 reference, not a TF32 one ("highest" is torch's default; only asked for here)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.set_float32_matmul_precision("highest")
    except Exception as e:  # noqa: BLE001
        print("bench_attention: WARNING: set_float32_matmul_precision('highest'): %s" % e)
    dev = torch.device("cuda")
    torch.cuda.init()
    tile = Tile(args.lib)
    info = tile.device_query(TILE_DEVICE_CUDA)
    print("bench_attention: %s from %s; torch %s; %s (sm_%d%d, %d SMs), target %s" % (
        tile.version(), args.lib, torch.__version__, info.name.decode(), info.cc_major,
        info.cc_minor, info.sm_count, (info.arch or b"").decode()))
    timer = Timer(torch, args.timer, args.quick)
    print("timing: " + timer.describe())
    tdtype = {"f16": (torch.float16, TILE_F16), "bf16": (torch.bfloat16, TILE_BF16)}
    backends = [("flash", SDPBackend.FLASH_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.append(("cudnn", SDPBackend.CUDNN_ATTENTION))
    else:
        print("bench_attention: this torch has no CUDNN_ATTENTION backend: cudnn column n/a")

    # our configuration per head dim
    cfg_for = {}
    for D in PERF_HEAD_DIMS:
        text = getattr(args, "our_d%d" % D, None) or args.our
        cfg_for[D] = (parse_cfg(text), text is not None)
        if text is None:
            cfg_for[D] = (parse_cfg(DEFAULT_CFG.get(D, "default")), False)
    print("our configs: " + "; ".join("D=%d: %s%s" % (D, cfg_text(c), "" if given else
                                                     " (built-in default)")
                                      for D, (c, given) in cfg_for.items()))

    def kernel_for(dt, D, causal, lse):
        cfg, given = cfg_for[D]
        defines = dict(T=dt, D=D, CAUSAL="true" if causal else "false",
                       HAS_LSE="true" if lse else "false", **cfg)
        try:
            return tile.compile(args.kernel_file, defines, TILE_DEVICE_CUDA,
                                schedule=args.schedule), cfg
        except TileError as e:
            if given or not cfg:
                raise
            print("bench_attention: WARNING: the built-in default %s for D=%d does not compile "
                  "(%s); using the lib defaults for D=%d" % (cfg_text(cfg), D, e, D))
            cfg_for[D] = ({}, False)
            return kernel_for(dt, D, causal, lse)

    stream = TileLaunchOptions(c_void_p(torch.cuda.current_stream().cuda_stream))
    rows, fatal = [], False
    gen = torch.Generator(device=dev)

    def run_ours(dt, D, causal, lse_on, q, k, v, o, lse, scale):
        B, H, N, _ = q.shape
        HKV, NK = k.shape[1], k.shape[2]
        kern, cfg = kernel_for(dt, D, causal, lse_on)
        a = attention_args(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                           lse.data_ptr() if lse is not None else None, tdtype[dt][1],
                           B, H, HKV, N, NK, D, scale)
        for t in (q, k, v, o) + ((lse,) if lse is not None else ()):
            assert t.is_contiguous() and t.is_cuda
        return kern, cfg, a

    # ---- performance configurations
    perf = []
    if not args.no_perf:
        Ns = PERF_N_QUICK if args.quick else PERF_N
        if args.n:
            Ns = tuple(int(x) for x in args.n.split(","))
        dts = ("bf16",) if args.quick else ("f16", "bf16")
        for N in Ns:
            for D in PERF_HEAD_DIMS:
                for causal in (False, True):
                    for dt in dts:
                        perf.append((dt, perf_batch(N), PERF_HEADS, N, D, causal))
    hdr = ("%-38s %8s %8s %8s %8s %8s %9s %9s  %-28s %s" % (
        "config", "ours", "flash", "cudnn", "ours/", "ours/", "rel err", "flash", "our config",
        "regs/local"))
    hdr2 = ("%-38s %8s %8s %8s %8s %8s %9s %9s" % (
        "", "TFLOP/s", "TFLOP/s", "TFLOP/s", "flash", "cudnn", "ours", "rel err"))
    if perf:
        print(hdr)
        print(hdr2)
    for dt, B, H, N, D, causal in perf:
        if fatal:
            break
        name = "%-4s B=%d H=%d N=%d D=%d %s" % (dt, B, H, N, D, "causal" if causal else "full")
        row = dict(config=name, dtype=dt, B=B, H=H, N=N, D=D, causal=causal, ours=None,
                   flash=None, cudnn=None, err=None, flash_err=None, cfg="", regs="", note="",
                   fail=False)
        rows.append(row)
        try:
            torch_dt = tdtype[dt][0]
            gen.manual_seed(args.seed * 7919 + len(rows))
            shape = (B, H, N, D)
            q = torch.randn(shape, dtype=torch_dt, device=dev, generator=gen)
            k = torch.randn(shape, dtype=torch_dt, device=dev, generator=gen)
            v = torch.randn(shape, dtype=torch_dt, device=dev, generator=gen)
            o = torch.full(shape, float("nan"), dtype=torch_dt, device=dev)
            scale = 1.0 / math.sqrt(D)
            flops = 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)
            # the args array holds raw pointers: every tensor stays referenced in this scope
            lse_t = torch.full((B, H, N), float("nan"), dtype=torch.float32, device=dev) \
                if args.lse else None
            kern, cfg, a = run_ours(dt, D, causal, args.lse, q, k, v, o, lse_t, scale)
            tile.launch(kern, a, stream)
            torch.cuda.synchronize()
            tile.synchronize(TILE_DEVICE_CUDA)
            st = tile.stats(kern)
            row["cfg"] = cfg_text(cfg) if cfg else kernel_cfg_text(tile, kern)
            row["regs"] = "%d/%d" % (st.registers, st.local_bytes)
            ref, _ = torch_reference(torch, F, q, k, v, causal, scale, False)
            row["err"] = rel_err_t(torch, o, ref)
            if not row["err"] < TOL[dt]:
                row["fail"] = True
                row["note"] += "ours vs reference %.2e >= %.0e; " % (row["err"], TOL[dt])
            row["ours"] = flops / (timer(lambda: tile.launch(kern, a, stream)) * 1e-3) / 1e12
            for bname, backend in backends:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        with sdpa_kernel(backend):
                            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                 scale=scale)
                            torch.cuda.synchronize()
                            if bname == "flash":
                                row["flash_err"] = rel_err_t(torch, out, ref)
                            del out
                            ms = timer(lambda: F.scaled_dot_product_attention(
                                q, k, v, is_causal=causal, scale=scale))
                    row[bname] = flops / (ms * 1e-3) / 1e12
                except RuntimeError as e:
                    first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
                    if is_fatal(first):
                        raise
                    row["note"] += "%s n/a (%s); " % (bname, first[:100])
            del ref
        except Exception as e:  # noqa: BLE001 - report, and go on unless the context is gone
            fatal = record_failure(row, e, args.verbose) or fatal
        print(format_row(row))
        torch.cuda.empty_cache()

    # ---- correctness-only configurations
    extra = []
    if not args.no_extra and not fatal:
        dts = ("f16", "bf16")
        for (N, NK) in (EXTRA_SHAPES[:2] if args.quick else EXTRA_SHAPES):
            for D in PERF_HEAD_DIMS:
                for causal in (False, True):
                    for dt in dts:
                        for i, HKV in enumerate(EXTRA_HKV):
                            if args.quick and i == 0 and causal:  # quick: MHA full, GQA both
                                continue
                            extra.append((dt, EXTRA_B, EXTRA_H, HKV, N, NK, D, causal))
    if extra:
        print("\ncorrectness-only configurations (HAS_LSE=true; O relative error, LSE max abs "
              "error):")
    erows = []
    for dt, B, H, HKV, N, NK, D, causal in extra:
        if fatal:
            break
        name = "%-4s B=%d H=%d HKV=%d N=%d NK=%d D=%d %s" % (dt, B, H, HKV, N, NK, D,
                                                           "causal" if causal else "full")
        row = dict(config=name, dtype=dt, err=None, lse_err=None, cfg="", note="", fail=False)
        erows.append(row)
        try:
            torch_dt = tdtype[dt][0]
            gen.manual_seed(args.seed * 104729 + len(erows))
            q = torch.randn((B, H, N, D), dtype=torch_dt, device=dev, generator=gen)
            k = torch.randn((B, HKV, NK, D), dtype=torch_dt, device=dev, generator=gen)
            v = torch.randn((B, HKV, NK, D), dtype=torch_dt, device=dev, generator=gen)
            o = torch.full((B, H, N, D), float("nan"), dtype=torch_dt, device=dev)
            lse = torch.full((B, H, N), float("nan"), dtype=torch.float32, device=dev)
            scale = 1.0 / math.sqrt(D)
            kern, cfg, a = run_ours(dt, D, causal, True, q, k, v, o, lse, scale)
            row["cfg"] = cfg_text(cfg) if cfg else kernel_cfg_text(tile, kern)
            tile.launch(kern, a, stream)
            torch.cuda.synchronize()
            tile.synchronize(TILE_DEVICE_CUDA)
            ref, ref_lse = torch_reference(torch, F, q, k, v, causal, scale, True)
            row["err"] = rel_err_t(torch, o, ref)
            if bool(torch.isfinite(lse).all()):
                row["lse_err"] = float((lse - ref_lse).abs().max())
            else:
                row["lse_err"] = math.inf
            if not row["err"] < TOL[dt]:
                row["fail"] = True
                row["note"] += "O error %.2e >= %.0e; " % (row["err"], TOL[dt])
            if not row["lse_err"] < LSE_TOL:
                row["fail"] = True
                row["note"] += "LSE error %.2e >= %.0e; " % (row["lse_err"], LSE_TOL)
        except Exception as e:  # noqa: BLE001
            fatal = record_failure(row, e, args.verbose) or fatal
        print(format_extra(row))
        torch.cuda.empty_cache()

    # ---- summary
    if rows:
        print("\n== bench_attention: performance (%s; TFLOP/s = 4*B*H*N*N*D/t, halved for causal;"
              " rel err vs float32 SDPA, tolerance f16 %.0e, bf16 %.0e) ==" % (
                  info.name.decode(), TOL["f16"], TOL["bf16"]))
        print(hdr)
        print(hdr2)
        for r in rows:
            print(format_row(r))
    if erows:
        print("\n== bench_attention: correctness-only (LSE tolerance %.0e abs) ==" % LSE_TOL)
        for r in erows:
            print(format_extra(r))
    nfail = sum(r["fail"] for r in rows) + sum(r["fail"] for r in erows)
    print("%d performance rows, %d correctness rows, %d failed%s" % (
        len(rows), len(erows), nfail, "; STOPPED EARLY after a CUDA error" if fatal else ""))
    if args.csv:
        write_csv(args.csv, rows, erows)
        print("wrote %s" % args.csv)
    tile.close()
    return 1 if (nfail or fatal) else 0


def fnum(x, fmt="%.1f"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt % x


def format_row(r):
    ratio = lambda a, b: (a / b) if (a and b) else None  # noqa: E731
    return "%-38s %8s %8s %8s %8s %8s %9s %9s  %-28s %-10s %s%s" % (
        r["config"], fnum(r["ours"]), fnum(r["flash"]), fnum(r["cudnn"]),
        fnum(ratio(r["ours"], r["flash"]), "%.3f"), fnum(ratio(r["ours"], r["cudnn"]), "%.3f"),
        fnum(r["err"], "%.2e"), fnum(r["flash_err"], "%.2e"), r["cfg"], r["regs"],
        "FAIL" if r["fail"] else "ok", (": " + r["note"].rstrip("; ")) if r["note"] else "")


def format_extra(r):
    return "%-48s O %9s  LSE %9s  %-28s %s%s" % (
        r["config"], fnum(r["err"], "%.2e"), fnum(r["lse_err"], "%.2e"), r["cfg"],
        "FAIL" if r["fail"] else "ok", (": " + r["note"].rstrip("; ")) if r["note"] else "")


def write_csv(path, rows, erows):
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "config", "dtype", "B", "H", "N", "D", "causal", "ours_tflops",
                    "flash_tflops", "cudnn_tflops", "ours_over_flash", "ours_over_cudnn",
                    "rel_err", "flash_rel_err", "lse_err", "our_config", "regs_local", "status",
                    "note"])
        for r in rows:
            w.writerow(["perf", r["config"], r["dtype"], r["B"], r["H"], r["N"], r["D"],
                        int(r["causal"]), r["ours"], r["flash"], r["cudnn"],
                        (r["ours"] / r["flash"]) if r["ours"] and r["flash"] else None,
                        (r["ours"] / r["cudnn"]) if r["ours"] and r["cudnn"] else None,
                        r["err"], r["flash_err"], None, r["cfg"], r["regs"],
                        "FAIL" if r["fail"] else "ok", r["note"]])
        for r in erows:
            w.writerow(["correctness", r["config"], r["dtype"], None, None, None, None, None,
                        None, None, None, None, None, r["err"], None, r["lse_err"], r["cfg"],
                        None, "FAIL" if r["fail"] else "ok", r["note"]])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", help="libtile.so (default $TILE_LIB, else ./.carry/libtile.so)")
    p.add_argument("--kernel-file", default=os.path.join(REPO, "lib", "attention.tile"))
    p.add_argument("--our", help="our tile config for every head dim, e.g. "
                                 "BM=128,BN=64,NW=8,STAGES=2 ('default' = the lib defaults)")
    p.add_argument("--our-d64", help="our tile config for D=64 (overrides --our)")
    p.add_argument("--our-d128", help="our tile config for D=128 (overrides --our)")
    p.add_argument("--quick", action="store_true", help="fewer configurations, shorter timing")
    p.add_argument("--n", help="comma-separated sequence lengths of the performance rows "
                   "(default 1024,4096,16384; --quick: 4096)")
    p.add_argument("--schedule", help="schedule options for our kernel (tilec --schedule), "
                   "e.g. wgmma=1")
    p.add_argument("--csv", help="also write the rows to this CSV file")
    p.add_argument("--timer", choices=("auto", "triton", "events"), default="auto")
    p.add_argument("--lse", action="store_true", help="time our kernel with HAS_LSE=true")
    p.add_argument("--no-extra", action="store_true", help="skip the correctness-only configs")
    p.add_argument("--no-perf", action="store_true", help="skip the performance configs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--selftest", action="store_true",
                   help="CPU-only check of the ctypes bindings (no torch, no GPU)")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    args = p.parse_args(argv)
    try:
        sys.stdout.reconfigure(line_buffering=True)  # rows appear as they complete
    except (AttributeError, ValueError):
        pass

    try:
        check_layout()
    except AssertionError as e:
        print("bench_attention: ctypes layout self-check FAILED: %s" % e)
        return 1
    for opt in ("our", "our_d64", "our_d128"):
        try:
            parse_cfg(getattr(args, opt))
        except ValueError as e:
            print("bench_attention: --%s: %s" % (opt.replace("_", "-"), e))
            return 2
    if not args.lib:
        args.lib = os.environ.get("TILE_LIB") or "./.carry/libtile.so"
        if not os.path.exists(args.lib) and not os.environ.get("TILE_LIB"):
            alt = os.path.join(".", "build", "libtile.so")
            if os.path.exists(alt):
                print("bench_attention: %s not found; using %s" % (args.lib, alt))
                args.lib = alt
    if not os.path.exists(args.lib):
        print("bench_attention: libtile.so not found at %s (use --lib or TILE_LIB)" % args.lib)
        return 2
    args.lib = os.path.abspath(args.lib)
    if not os.path.exists(args.kernel_file):
        print("bench_attention: kernel file %s not found (--kernel-file)" % args.kernel_file)
        return 2
    if args.selftest:
        return selftest(args)
    return run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
