"""The fast launch path (torch CUDA tensors, positional arguments) writes tile_arg arrays as
64-bit words. Checked without a GPU: the stand-in driver (tests/cli/fake_libcuda.c, given by
TILE_FAKE_LIBCUDA) logs every launch's grid and parameter bytes, and a stand-in `torch`
module supplies tensors; the fast path's launches must log exactly what the general path's
(keyword arguments) log, for the same values, and its refusals must fall back to the
general path's errors. Runs in a subprocess (the stand-in torch must not meet a real one)."""
import os
import subprocess
import sys

import pytest

FAKE = os.environ.get("TILE_FAKE_LIBCUDA")

SCENARIO = r'''
import sys, types
torch = types.ModuleType("torch")
class dtype:
    def __init__(self, n): self.n = n
    def __repr__(self): return "torch." + self.n
for n in ("bool", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"):
    setattr(torch, n, dtype(n))
class Tensor:
    def __init__(self, ptr, shape, dt, strides=None):
        self.ptr, self.shape, self.dtype, self.is_cuda = ptr, tuple(shape), dt, True
        self._strides = strides or tuple(int(__import__("math").prod(shape[i + 1:])) for i in range(len(shape)))
    def data_ptr(self): return self.ptr
    def stride(self): return self._strides
    def dim(self): return len(self.shape)
    def get_device(self): return 0
Tensor.__module__ = "torch"
torch.Tensor = Tensor
torch.nn = types.SimpleNamespace(Parameter=type("Parameter", (Tensor,), {}))
torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda i: 0)
torch.cuda = types.SimpleNamespace(current_stream=lambda i: types.SimpleNamespace(cuda_stream=0))
sys.modules["torch"] = torch

import tile
from tile._ffi import ffi, lib
ctx = tile._context("cuda", 0)
def alloc(n):
    p = ffi.new("void **")
    assert lib.tile_mem_alloc(ctx.ptr, lib.TILE_DEVICE_CUDA, n, p) == 0
    return int(ffi.cast("uintptr_t", p[0]))
src = """kernel k<BN: 64 = 64>(X: f32[M, N], Z: out f32[M, N], a: f32, s: i32)
  grid(M, cdiv(N, BN)) {
  let c = program_id(1) * BN;
  Z[program_id(0), c : +BN] = a * X[program_id(0), c : +BN] + f32(s);
}"""
k = tile.compile(source=src, name="k.tile", arch="sm_90a")
x = Tensor(alloc(4 * 33 * 4095), (33, 4095), torch.float32)
z = Tensor(alloc(4 * 33 * 4095), (33, 4095), torch.float32)
log = sys.argv[1]
def last():
    with open(log) as f:
        return [l for l in f.read().splitlines() if l.startswith("launch")][-1]
k(x, z, 0.75, -3)                       # general path; sets up the fast one
assert k._fast is not None, "no fast path for torch tensors"
k(X=x, Z=z, a=1.5, s=7); general = last()
k(x, z, 1.5, 7); fast = last()
assert fast == general, (fast, general)
k(x, z, 2, 7); assert last() == general.replace("1.5", "2") or last() != general
# a strided view and a ragged shape
y = Tensor(x.ptr, (7, 1000), torch.float32, (4095, 1))
k(X=y, Z=Tensor(z.ptr, (7, 1000), torch.float32, (4095, 1)), a=-1.25, s=0); general = last()
k(y, Tensor(z.ptr, (7, 1000), torch.float32, (4095, 1)), -1.25, 0); assert last() == general, (last(), general)
# refusals fall back to the general path and its errors
for bad, what in (((Tensor(x.ptr, (33, 4095), torch.float16), z, 1.0, 1), "X"),
                  ((x, Tensor(z.ptr, (33, 4094), torch.float32), 1.0, 1), "Z"),
                  ((x, z, 1.0, 1.5), "integer")):
    try:
        k(*bad)
    except (tile.TileError, TypeError) as e:
        assert what in str(e), (what, str(e))
    else:
        raise AssertionError("accepted: " + what)
# trailing arguments the kernel does not use may be left out on the fast path too
src2 = """kernel k2<BN: 64 = 64, USE: bool = false>(X: f32[M, N], Z: out f32[M, N], W: f32[N], b: f32)
  grid(M, cdiv(N, BN)) {
  let c = program_id(1) * BN;
  var v = X[program_id(0), c : +BN];
  if USE { v = v * W[c : +BN] + b; }
  Z[program_id(0), c : +BN] = v;
}"""
k2 = tile.compile(source=src2, name="k2.tile", arch="sm_90a")
k2(x, z)                                # general path; sets up the fast one
assert k2._fast is not None and k2._fast[7] == 2, k2._fast
k2(X=x, Z=z); general = last()
k2(x, z); assert last() == general, (last(), general)
try:
    k2(x)                               # Z is used: the general path's error
except TypeError as e:
    assert "Z" in str(e), str(e)
else:
    raise AssertionError("accepted a missing used tensor")
print("fast path ok")
'''


@pytest.mark.skipif(not FAKE, reason="TILE_FAKE_LIBCUDA (the stand-in driver) not given")
def test_fast_launch_matches_general_path(tmp_path):
    log = tmp_path / "cuda.log"
    env = dict(os.environ, TILE_LIBCUDA=FAKE, FAKE_CUDA_LOG=str(log), TILE_CACHE_DIR="")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, "-c", SCENARIO, str(log)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fast path ok" in r.stdout
