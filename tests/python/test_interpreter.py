"""The Python package on the CPU interpreter (NumPy arrays): compiling from files and
strings, binding by position and by name, DLPack, errors with diagnostics, emit. Runs in CI
(no GPU). Tolerances: f32 results within 1e-5 relative of NumPy's float64, f16 GEMM within
2e-2 of a float64 product of the same f16 inputs."""
import os
import re

import numpy as np
import pytest

import tile

RNG = np.random.default_rng()


def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("m,n", [(1, 1), (7, 33), (33, 4095), (3, 1030)])
def test_softmax_ragged(m, n):
    k = tile.compile(tile.lib_path("softmax"), defines={"BN": 256})
    x = RNG.standard_normal((m, n), dtype=np.float32) * 4
    y = np.full_like(x, np.nan)
    k(x, y)
    np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("m,n,kk", [(1, 1, 1), (7, 33, 17), (65, 31, 129)])
def test_gemm_f16_by_name_and_unused_params(m, n, kk):
    g = tile.compile(tile.lib_path("gemm"), kernel="gemm", defines={"BM": 32, "BN": 32, "BK": 16, "NW": 4})
    a = RNG.standard_normal((m, kk)).astype(np.float16)
    b = RNG.standard_normal((kk, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    g(A=a, B=b, C=c)  # bias, R, alpha, beta: unused by this specialization
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-2, atol=2e-2 * np.sqrt(kk))


def test_gemm_bias_gelu_strided_input():
    g = tile.compile(tile.lib_path("gemm"), kernel="gemm",
                     defines={"T": "f32", "BM": 32, "BN": 32, "BK": 16, "NW": 4, "HAS_BIAS": True,
                              "ACT": "relu"})
    big = RNG.standard_normal((40, 80)).astype(np.float32)
    a = big[:, ::2][:33, :37]  # a strided view: strides (80, 2) elements
    b = RNG.standard_normal((37, 19)).astype(np.float32)
    bias = RNG.standard_normal(19).astype(np.float32)
    c = np.empty((33, 19), np.float32)
    g(a, b, c, bias)
    ref = np.maximum(a.astype(np.float64) @ b + bias, 0)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)


def test_scalar_and_string_source():
    src = """
kernel axpy<BN: 64 | 128 = 64>(X: f32[N], Y: f32[N], Z: out f32[N], a: f32, k: i32) grid(cdiv(N, BN)) {
  let i = program_id(0) * BN;
  Z[i : +BN] = a * X[i : +BN] + Y[i : +BN] + f32(k);
}
"""
    k = tile.compile(source=src, name="axpy.tile")
    assert [p.name for p in k.params] == ["X", "Y", "Z", "a", "k"]
    assert k.params[0].dims == ("N",) and k.params[2].is_output
    x, y = RNG.standard_normal(1000).astype(np.float32), RNG.standard_normal(1000).astype(np.float32)
    z = np.empty_like(x)
    k(x, y, z, a=2.5, k=3)
    np.testing.assert_allclose(z, 2.5 * x + y + 3, rtol=1e-6)
    with pytest.raises(TypeError, match="integer parameter"):
        k(x, y, z, 2.5, 1.5)
    with pytest.raises(TypeError, match="no parameter named 'q'"):
        k(x, y, z, a=1.0, k=1, q=2)


class DLPackOnly:
    """An array that offers only the DLPack protocol (as JAX's and others' do)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack():
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("NumPy without DLPack")
    k = tile.compile(tile.lib_path("softmax"), defines={"BN": 64})
    x = RNG.standard_normal((5, 70)).astype(np.float32)
    y = np.zeros_like(x)
    k(DLPackOnly(x), y)
    np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-7)


def test_compile_error_has_diagnostics():
    src = "kernel k(X: f32[N], Y: out f32[N]) grid(1) {\n  Y[0 : +64] = X[0 : +64] + nosuch;\n}\n"
    k = tile.compile(source=src, name="bad.tile")
    with pytest.raises(tile.TileError) as e:
        k.params
    err = e.value
    assert err.status == "COMPILE"
    assert err.diagnostics, "no diagnostics attached"
    d = err.diagnostics[0]
    assert (d.file, d.line, d.col) == ("bad.tile", 2, 29), d
    assert d.code == "UNDECLARED"
    assert "nosuch" in d.message and "bad.tile:2:29" in str(d)


def test_launch_error_names_the_argument():
    k = tile.compile(tile.lib_path("softmax"), defines={"BN": 64})
    x = np.zeros((4, 8), np.float32)
    y = np.zeros((4, 9), np.float32)
    with pytest.raises(tile.TileError) as e:
        k(x, y)
    assert e.value.status == "BAD_LAUNCH"
    assert "Y" in str(e.value)
    with pytest.raises(tile.TileError) as e:
        k(x.astype(np.float16), y[:, :8].copy())
    assert e.value.status == "BAD_LAUNCH" and "X" in str(e.value)
    with pytest.raises(TypeError, match="expected a tensor"):
        k("not an array", y)


def test_bad_define_is_an_error_with_code():
    k = tile.compile(tile.lib_path("softmax"), defines={"BN": 100})
    with pytest.raises(tile.TileError) as e:
        k.params
    assert e.value.status in ("COMPILE", "INVALID_ARGUMENT")
    assert "BN" in str(e.value)


def test_emit():
    ir = tile.emit(tile.lib_path("softmax"), what="ir", device="cpu")
    assert "kernel @softmax" in ir
    ptx = tile.emit(tile.lib_path("softmax"), what="ptx", arch="sm_80", defines={"BN": 128})
    assert re.search(r"\.entry\s+softmax", ptx)
    with pytest.raises(ValueError):
        tile.emit(tile.lib_path("softmax"), what="sass")


def test_binding_covers_the_header():
    """Every TILE_API function of tile.h is callable through the package's binding."""
    from tile._ffi import header_path, lib
    with open(header_path()) as f:
        names = re.findall(r"TILE_API[^;(]*?\b(tile_\w+)\s*\(", f.read())
    assert len(names) > 40
    missing = [n for n in names if not hasattr(lib, n)]
    assert not missing, missing


def test_version_and_cache(tmp_path, monkeypatch):
    assert tile.version().startswith("tile ")
    assert isinstance(tile.cache_entries(), list)


ARGSRC = """
kernel am<BN: 64 = 64>(X: f32[M, N], I: out i32[M], J: out i32[M], W: out i32[1], V: out i32[N])
  grid(1) warps(2)
{
  let x = load(X[0 : +16, 0 : +BN], fill=-inf);
  I[0 : +16] = argmax(x, axis=1);
  J[0 : +16] = argmin(load(X[0 : +16, 0 : +BN], fill=inf), axis=-1);
  W[0 : +1] = full([1], argmax(x), i32);
  V[0 : +BN] = argmin(load(X[0 : +16, 0 : +BN], fill=inf), axis=0);
}
"""


@pytest.mark.parametrize("m,n", [(16, 64), (7, 33), (1, 1), (16, 50)])
def test_argmax_argmin_ties_go_to_the_first(m, n):
    """argmax/argmin along an axis and over the whole tile (row-major), with many ties
    (small integers): the smallest index wins, as in NumPy."""
    k = tile.compile(source=ARGSRC, name="am.tile")
    x = RNG.integers(-4, 4, size=(m, n)).astype(np.float32)
    i, j = np.full(m, -7, np.int32), np.full(m, -7, np.int32)
    w, v = np.full(1, -7, np.int32), np.full(n, -7, np.int32)
    k(x, i, j, w, v)
    np.testing.assert_array_equal(i, x.argmax(1))
    np.testing.assert_array_equal(j, x.argmin(1))
    hi = np.full((16, 64), -np.inf, np.float32)
    hi[:m, :n] = x
    lo = np.full((16, 64), np.inf, np.float32)
    lo[:m, :n] = x
    assert w[0] == hi.argmax()
    np.testing.assert_array_equal(v, lo.argmin(0)[:n])


def test_argmax_skips_nan():
    """NaN elements are skipped, as max skips them; a row of NaN only gives its length."""
    src = """kernel a(X: f32[M, 8], I: out i32[M]) grid(1) {
  I[0 : +4] = argmax(X[0 : +4, 0 : +8], axis=1);
}"""
    k = tile.compile(source=src, name="nan.tile")
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    x[0, 3] = np.nan
    x[1, :] = np.nan
    i = np.zeros(4, np.int32)
    k(x, i)
    row0 = x[0].copy()
    row0[3] = -np.inf
    assert i[0] == row0.argmax()
    assert i[1] == 8
    np.testing.assert_array_equal(i[2:], x[2:].argmax(1))


def test_return_ends_the_program():
    """`return` in branches (also an else-if chain that does not return, and a loop after):
    programs past L store nothing, program 1 stores -1, program 2 adds 100 first."""
    src = """kernel k(X: f32[N], Y: out f32[N], L: i32) grid(cdiv(N, 64)) {
  let i = program_id(0) * 64;
  if i >= L { return; }
  var acc = X[i : +64];
  if program_id(0) == 1 {
    Y[i : +64] = acc * 0.0 - 1.0;
    return;
  } else if program_id(0) == 2 {
    acc = acc + 100.0;
  }
  for r in range(0, 3) { acc = acc * 2.0; }
  Y[i : +64] = acc;
}"""
    k = tile.compile(source=src, name="ret.tile")
    for n, lim in ((500, 320), (7, 1), (4095, 4095)):
        x = RNG.standard_normal(n).astype(np.float32)
        y = np.full(n, 7.0, np.float32)
        k(x, y, lim)
        exp = np.full(n, 7.0, np.float32)
        for p in range((n + 63) // 64):
            i = p * 64
            if i >= lim:
                continue
            sl = slice(i, min(i + 64, n))
            exp[sl] = -1.0 if p == 1 else ((x[sl] + 100) * 8 if p == 2 else x[sl] * 8)
        np.testing.assert_allclose(y, exp, rtol=1e-6)


def test_hex_literals_are_32_bit_patterns():
    """0x9E3779B9 (above 2^31) is the i32 with those bits; products wrap modulo 2^32, as a
    multiplicative hash needs; `>>` is arithmetic."""
    src = """kernel h(Y: out i32[N], Z: out i32[N]) grid(1) {
  let x = arange(64) * 0x9E3779B9 + 0x7F4A7C15;
  Y[0 : +64] = x;
  Z[0 : +64] = (x >> 16) & 0xFFFF;
}"""
    k = tile.compile(source=src, name="hex.tile")
    y, z = np.zeros(64, np.int32), np.zeros(64, np.int32)
    k(y, z)
    exp = (np.arange(64, dtype=np.uint64) * 0x9E3779B9 + 0x7F4A7C15) % (1 << 32)
    np.testing.assert_array_equal(y.view(np.uint32), exp.astype(np.uint32))
    np.testing.assert_array_equal(z, (exp.astype(np.uint32).view(np.int32) >> 16) & 0xFFFF)


# ---- shape manipulation: reshape, permute, join, split, broadcast (SPEC sections 8, 12) ----
# Exact data movement, so results must equal NumPy's bit for bit. Tiles are loaded from
# tensors that may be smaller than the tile (ragged: the rest reads 0) and stored into
# tensors that may be smaller too (the rest is not written).

def _dims(shape):
    return ", ".join(str(d) for d in shape)


def _slice(shape):
    return ", ".join(f"0 : +{d}" for d in shape)


def _names(prefix, n):
    return ", ".join(f"{prefix}{i}" for i in range(n))


def _run_shape_kernel(expr, tile_in, tile_out, tensor_in, tensor_out, warps=4, dtype="f32"):
    """Y[0 : +tile_out...] = expr(x) for x = X[0 : +tile_in...]; returns (x, y)."""
    src = f"""kernel k(X: {dtype}[{_names('A', len(tile_in))}], Y: out {dtype}[{_names('B', len(tile_out))}])
  grid(1) warps({warps}) {{
  let x = X[{_slice(tile_in)}];
  Y[{_slice(tile_out)}] = {expr};
}}"""
    k = tile.compile(source=src, name="shape.tile")
    np_dt = np.float32 if dtype == "f32" else np.float16
    x = RNG.standard_normal(tensor_in).astype(np_dt)
    y = np.full(tensor_out, 7.0, np_dt)
    k(x, y)
    return x, y


def _padded(x, shape):
    p = np.zeros(shape, x.dtype)
    p[tuple(slice(0, d) for d in x.shape)] = x
    return p


def _check_stored(y, ref):
    """y's elements inside ref's tile equal ref; y is all written when it fits the tile."""
    inside = tuple(slice(0, min(a, b)) for a, b in zip(y.shape, ref.shape))
    np.testing.assert_array_equal(y[inside], ref[inside])


@pytest.mark.parametrize("tin,tout,ragged", [
    ((16, 64), (1024,), False), ((16, 64), (16, 32, 2), True), ((8, 8, 8), (64, 8), True),
    ((1, 64), (64, 1), False), ((2, 2), (1, 4, 1), False), ((32, 4, 2), (2, 2, 8, 8), True),
    ((128,), (8, 16), True), ((64, 1, 2), (128,), False), ((4, 256), (1024,), True),
])
@pytest.mark.parametrize("warps", [1, 4])
def test_reshape_is_numpy_reshape(tin, tout, ragged, warps):
    tensor_in = tuple(max(1, d - RNG.integers(0, d)) if ragged else d for d in tin)
    x, y = _run_shape_kernel(f"reshape(x, [{_dims(tout)}])", tin, tout, tensor_in, tout, warps)
    _check_stored(y, _padded(x, tin).reshape(tout))


@pytest.mark.parametrize("tin,perm", [
    ((16, 64), (1, 0)), ((4, 8, 16), (2, 0, 1)), ((4, 8, 16), (0, 2, 1)), ((1, 8, 2), (2, 1, 0)),
    ((2, 4, 8, 16), (3, 1, 0, 2)), ((8, 1, 32), (-1, 0, 1)), ((4, 8, 16), (0, 1, 2)),
])
def test_permute_is_numpy_transpose(tin, perm):
    tout = tuple(tin[p] for p in perm)
    tensor_in = tuple(max(1, d - RNG.integers(0, d)) for d in tin)
    x, y = _run_shape_kernel(f"permute(x, [{_dims(perm)}])", tin, tout, tensor_in, tout)
    _check_stored(y, np.transpose(_padded(x, tin), perm))


@pytest.mark.parametrize("tin", [(16, 64), (1, 8), (4, 1, 32), (2,), (8, 4, 2)])
@pytest.mark.parametrize("warps", [1, 2, 8])
def test_join_and_split_interleave(tin, warps):
    """join(a, b)[..., 0] is a and [..., 1] is b (Triton's tl.join); split undoes it, and
    split of a reshape to [..., n/2, 2] takes the even and odd elements."""
    tj = tin + (2,)
    x, y = _run_shape_kernel("join(x, x * 2.0 + 1.0)", tin, tj, tin, tj, warps)
    np.testing.assert_array_equal(y, np.stack([x, x * np.float32(2) + np.float32(1)], axis=-1))
    n = tin[-1]
    if n >= 2:
        src = f"""kernel k(X: f32[{_names('A', len(tin))}], E: out f32[{_names('B', len(tin))}],
      O: out f32[{_names('C', len(tin))}]) grid(1) warps({warps}) {{
  let x = X[{_slice(tin)}];
  let (even, odd) = split(reshape(x, [{_dims(tin[:-1] + (n // 2, 2))}]));
  E[{_slice(tin[:-1] + (n // 2,))}] = even;
  O[{_slice(tin[:-1] + (n // 2,))}] = odd;
}}"""
        k = tile.compile(source=src, name="split.tile")
        x = RNG.standard_normal(tin).astype(np.float32)
        e = np.zeros(tin[:-1] + (n // 2,), np.float32)
        o = np.zeros_like(e)
        k(x, e, o)
        np.testing.assert_array_equal(e, x[..., 0::2])
        np.testing.assert_array_equal(o, x[..., 1::2])


@pytest.mark.parametrize("shape", [(16, 64), (1, 32), (4, 8, 2)])
def test_broadcast_is_numpy_broadcast_to(shape):
    row = tuple(shape[1:])
    src = f"""kernel k(V: f32[{_names('A', len(row))}], Y: out f32[{_names('B', len(shape))}], s: f32)
  grid(1) {{
  let v = V[{_slice(row)}];
  Y[{_slice(shape)}] = broadcast(v, [{_dims(shape)}]) + broadcast(s, [{_dims(shape)}]);
}}"""
    k = tile.compile(source=src, name="bcast.tile")
    v = RNG.standard_normal(row).astype(np.float32)
    y = np.zeros(shape, np.float32)
    s = float(RNG.standard_normal())
    k(v, y, s)
    np.testing.assert_array_equal(y, np.broadcast_to(v, shape) + np.float32(s))


ROTARY = """
kernel rotary<T: dtype = f32, BM: 1 | 16 | 32 | 64 = 32, D: 16 | 64 | 128 = 64, NW: 1 | 4 | 8 = 4>
    (X: T[M, D], Cos: f32[M, D / 2], Sin: f32[M, D / 2], Y: out T[M, D])
  grid(cdiv(M, BM)) warps(NW)
{
  let m0 = program_id(0) * BM;
  let (even, odd) = split(reshape(f32(X[m0 : +BM, 0 : +D]), [BM, D / 2, 2]));
  let c = Cos[m0 : +BM, 0 : +D / 2];
  let s = Sin[m0 : +BM, 0 : +D / 2];
  Y[m0 : +BM, 0 : +D] = T(reshape(join(even * c - odd * s, even * s + odd * c), [BM, D]));
}
"""


@pytest.mark.parametrize("t,bm,d,nw,m", [
    ("f32", 32, 64, 4, 77), ("f32", 1, 16, 1, 3), ("f32", 64, 128, 8, 130), ("f16", 16, 64, 4, 33),
    ("f32", 16, 16, 8, 1),
])
def test_rotary_interleaved(t, bm, d, nw, m):
    """Interleaved rotary embedding (GPT-J style): pairs (x[2i], x[2i+1]) rotated by angle
    i of each row; split/join/reshape against a float64 NumPy reference. Tolerance: f32
    1e-5 relative (two products and a sum), f16 output rounding (2e-3 relative)."""
    k = tile.compile(source=ROTARY, name="rotary.tile",
                     defines={"T": t, "BM": bm, "D": d, "NW": nw})
    np_dt = np.float32 if t == "f32" else np.float16
    x = RNG.standard_normal((m, d)).astype(np_dt)
    theta = RNG.uniform(-np.pi, np.pi, (m, d // 2))
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    y = np.full_like(x, np.nan)
    k(x, cos, sin, y)
    xe, xo = x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64)
    ref = np.empty((m, d))
    ref[:, 0::2] = xe * cos - xo * sin
    ref[:, 1::2] = xe * sin + xo * cos
    tol = 1e-5 if t == "f32" else 2e-3
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol, atol=tol)


def test_int4_unpacking():
    """Two 4-bit values per byte, low nibble first: join(lo, hi) then a reshape doubles the
    last dimension; (q - 8) * scale dequantizes."""
    src = """kernel unpack<BM: 16 = 16, BN: 32 = 32>(P: i8[M, N], S: f32[M], Y: out f32[M, N2])
  grid(cdiv(M, BM)) {
  let m0 = program_id(0) * BM;
  let b = i32(P[m0 : +BM, 0 : +BN]);
  let q = reshape(join(b & 15, (b >> 4) & 15), [BM, 2 * BN]);
  Y[m0 : +BM, 0 : +2 * BN] = f32(q - 8) * S[m0 : +BM][:, None];
}"""
    k = tile.compile(source=src, name="unpack.tile")
    m, n = 37, 32
    p = RNG.integers(-128, 128, size=(m, n)).astype(np.int8)
    s = RNG.uniform(0.5, 2.0, m).astype(np.float32)
    y = np.zeros((m, 2 * n), np.float32)
    k(p, s, y)
    u = p.view(np.uint8).astype(np.int64)
    q = np.stack([u & 15, u >> 4], axis=-1).reshape(m, 2 * n)
    np.testing.assert_array_equal(y, ((q - 8) * s[:, None].astype(np.float64)).astype(np.float32))


SHAPE_OPS = os.path.join(os.path.dirname(__file__), "..", "cli", "shape_ops.tile")


@pytest.mark.parametrize("bm,nw,m", [(64, 4, 100), (16, 1, 16), (128, 8, 1)])
def test_shape_ops_file_mixed(bm, nw, m):
    """tests/cli/shape_ops.tile's `mixed` (its PTX is checked by ptxas.sh): a transposing
    reshape, and a dot result split, rejoined and with row blocks permuted. Tolerance: the
    f32 product of f16 inputs (K = 64) against float64, 1e-4."""
    k = tile.compile(SHAPE_OPS, kernel="mixed", defines={"BM": bm, "NW": nw})
    a = RNG.standard_normal((m, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 64)).astype(np.float16)
    y = np.full((m, 64), np.nan, np.float32)
    z = np.full((m, 64), np.nan, np.float32)
    k(a, b, y, z)
    rows = -(-m // bm) * bm
    ap = _padded(a.astype(np.float64), (rows, 64))
    acc = ap @ b.astype(np.float64)
    t = ap.reshape(rows, 8, 8).transpose(0, 2, 1).reshape(rows, 64)
    swapped = np.stack([acc[:, 1::2], acc[:, 0::2]], axis=-1).reshape(rows, 64)
    zr = acc.reshape(rows // bm, bm // 16, 16, 64).transpose(0, 2, 1, 3).reshape(rows, 64)
    np.testing.assert_allclose(y, (t + swapped)[:m], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(z, zr[:m], rtol=1e-4, atol=1e-4)


def test_shape_ops_file_rotary_and_unpack():
    """The other kernels of tests/cli/shape_ops.tile in their default configurations."""
    k = tile.compile(SHAPE_OPS, kernel="rotary")
    m, d = 70, 128
    x = RNG.standard_normal((m, d)).astype(np.float16)
    theta = RNG.uniform(-np.pi, np.pi, (m, d // 2))
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    y = np.zeros_like(x)
    k(x, cos, sin, y)
    xe, xo = x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64)
    ref = np.stack([xe * cos - xo * sin, xe * sin + xo * cos], axis=-1).reshape(m, d)
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-3, atol=2e-3)
    u = tile.compile(SHAPE_OPS, kernel="unpack")
    p = RNG.integers(-128, 128, size=(65, 64)).astype(np.int8)
    s = RNG.uniform(0.5, 2.0, 65).astype(np.float32)
    out = np.zeros((65, 128), np.float16)
    u(p, s, out)
    bits = p.view(np.uint8).astype(np.int64)
    q = np.stack([bits & 15, bits >> 4], axis=-1).reshape(65, 128)
    ref = ((q - 8) * s[:, None].astype(np.float64)).astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(out, ref)
