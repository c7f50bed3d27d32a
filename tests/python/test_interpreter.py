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


# ---- scans: cumsum, cumprod, cummax, cummin ----
# Tolerances: a float running sum of k terms, in any order of additions, is within
# k * 2^-24 * (|x_1| + ... + |x_k|) of the exact sum (f32 rounding after each addition; f16 and
# bf16 inputs accumulate in f32); a running product within 2k * 2^-24 relative. The bound does
# not depend on the order, so it holds for the GPU's order (SPEC section 12) as well as for the
# interpreter's sequential one. max/min and i32 (wrapping) results are exact.

SCAN_UFUNC = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.fmax, "cummin": np.fmin}
SCAN_FILL = {"cumsum": "0", "cumprod": "1", "cummax": "-inf", "cummin": "inf"}
SCAN_IFILL = {"cumsum": "0", "cumprod": "1", "cummax": "0x80000000", "cummin": "2147483647"}


def round_bf16(x):
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return b.view(np.float32)


def scan_ref(x, op, axis, reverse):
    """The exact scan (float64 for floats, wrapping i32 for ints) along axis."""
    if reverse:
        x = np.flip(x, axis)
    if x.dtype == np.int32:
        r = SCAN_UFUNC[op].accumulate(x, axis=axis, dtype=np.int32)
    else:
        r = SCAN_UFUNC[op].accumulate(x.astype(np.float64), axis=axis)
    return np.flip(r, axis) if reverse else r


def check_scan(y, x, op, axis, reverse):
    ref = scan_ref(x, op, axis, reverse)
    if x.dtype == np.int32 or op in ("cummax", "cummin"):
        np.testing.assert_array_equal(y.astype(ref.dtype), ref.astype(ref.dtype))
        return
    k = np.cumsum(np.ones_like(x, dtype=np.float64), axis=axis)
    if reverse:
        k = np.flip(k, axis)
    if op == "cumsum":
        tol = k * 2.0**-24 * scan_ref(np.abs(x), "cumsum", axis, reverse)
    else:
        tol = 2 * k * 2.0**-24 * np.abs(ref)
    err = np.abs(y.astype(np.float64) - ref)
    assert np.all(err <= tol + 1e-30), f"{op} axis={axis} reverse={reverse}: max excess {np.max(err - tol)}"


def scan_input(op, dt, shape):
    if dt == "i32":
        return RNG.integers(-2**31, 2**31, size=shape, dtype=np.int64).astype(np.int32)
    if op == "cumprod":  # magnitudes near 1: no overflow over 1024 factors
        x = RNG.uniform(0.97, 1.03, size=shape) * RNG.choice([-1.0, 1.0], size=shape)
    else:
        x = RNG.standard_normal(shape) * 4
    x = x.astype(np.float32)
    if dt == "f16":
        x = x.astype(np.float16).astype(np.float32)
    if dt == "bf16":
        x = round_bf16(x)
    return x


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "i32"])
@pytest.mark.parametrize("L", [1, 8, 64, 1024])
def test_scan_1d_against_numpy(op, dt, L):
    """A scan of a [L] tile, forwards and with reverse=true, over a ragged tensor (n <= L
    elements, the rest filled with op's identity so the valid part is unaffected)."""
    io = "i32" if dt == "i32" else "f32"
    fill = SCAN_IFILL[op] if dt == "i32" else SCAN_FILL[op]
    conv = dt if dt in ("f16", "bf16") else ""
    out = f"{io}(" if op in ("cummax", "cummin") and conv else "("
    src = f"""kernel s(X: {io}[N], Y: out {io}[N], Z: out {io}[N]) grid(1) warps(4) {{
  let x = {conv}(load(X[0 : +{L}], fill={fill}));
  Y[0 : +{L}] = {out}{op}(x));
  Z[0 : +{L}] = {out}{op}(x, axis=0, reverse=true));
}}"""
    k = tile.compile(source=src, name="scan1.tile")
    for n in sorted({L, max(1, L - 1), int(RNG.integers(1, L + 1))}):
        x = scan_input(op, dt, n)
        y, z = np.zeros_like(x), np.zeros_like(x)
        k(x, y, z)
        check_scan(y, x, op, 0, False)
        check_scan(z, x, op, 0, True)


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("dt", ["f32", "bf16", "i32"])
@pytest.mark.parametrize("bm,bn", [(16, 64), (64, 8), (1, 32), (32, 1)])
def test_scan_2d_both_axes(op, dt, bm, bn):
    """A [BM, BN] tile scanned along each axis, both directions, ragged m x n."""
    io = "i32" if dt == "i32" else "f32"
    fill = SCAN_IFILL[op] if dt == "i32" else SCAN_FILL[op]
    conv = "bf16" if dt == "bf16" else ""
    out = "f32(" if op in ("cummax", "cummin") and conv else "("
    sl = f"0 : +{bm}, 0 : +{bn}"
    src = f"""kernel s(X: {io}[M, N], A: out {io}[M, N], B: out {io}[M, N], C: out {io}[M, N], D: out {io}[M, N])
  grid(1) warps(4)
{{
  let x = {conv}(load(X[{sl}], fill={fill}));
  A[{sl}] = {out}{op}(x, axis=0));
  B[{sl}] = {out}{op}(x, axis=0, reverse=true));
  C[{sl}] = {out}{op}(x));
  D[{sl}] = {out}{op}(x, axis=-1, reverse=true));
}}"""
    k = tile.compile(source=src, name="scan2.tile")
    for m, n in {(bm, bn), (int(RNG.integers(1, bm + 1)), int(RNG.integers(1, bn + 1)))}:
        x = scan_input(op, dt, (m, n))
        outs = [np.zeros_like(x) for _ in range(4)]
        k(x, *outs)
        check_scan(outs[0], x, op, 0, False)
        check_scan(outs[1], x, op, 0, True)
        check_scan(outs[2], x, op, 1, False)
        check_scan(outs[3], x, op, 1, True)


def test_scan_rank3_and_result_dtypes():
    """A rank-3 tile along its middle axis; cumsum of f16 is f32 (accumulated in f32, like
    sum), cummax of f16 stays f16; NaN is skipped by cummax as max skips it."""
    src = """kernel s(X: f16[2, 8, 4], S: out f32[2, 8, 4], M: out f16[2, 8, 4]) grid(1) {
  let x = X[0 : +2, 0 : +8, 0 : +4];
  S[0 : +2, 0 : +8, 0 : +4] = cumsum(x, axis=1);
  M[0 : +2, 0 : +8, 0 : +4] = cummax(x, axis=1);
}"""
    k = tile.compile(source=src, name="scan3.tile")
    x = (RNG.standard_normal((2, 8, 4)) * 4).astype(np.float16)
    x[0, 0, 0] = np.nan
    x[1, 3, 2] = np.nan
    s, m = np.zeros((2, 8, 4), np.float32), np.zeros((2, 8, 4), np.float16)
    k(x, s, m)
    np.testing.assert_array_equal(m, np.fmax.accumulate(x, axis=1))
    ref = np.cumsum(x.astype(np.float64), axis=1)
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(s[ok], ref[ok], rtol=1e-5, atol=1e-4)
    assert np.isnan(s[~ok]).all()


def test_scan_stream_compaction():
    """The SPEC example: each kept element's output slot is the exclusive running count."""
    src = """kernel compact(X: f32[N], Y: out f32[N], C: out i32[1]) grid(1) {
  let x = load(X[0 : +256], fill=-1.0);
  let keep = i32(x > 0.0);
  let slot = cumsum(keep) - keep;
  C[0 : +1] = full([1], sum(keep), i32);
  Y[0 : +256] = where(x > 0.0, f32(slot), -1.0);
}"""
    k = tile.compile(source=src, name="compact.tile")
    x = RNG.standard_normal(200).astype(np.float32)
    y, c = np.zeros(200, np.float32), np.zeros(1, np.int32)
    k(x, y, c)
    keep = x > 0
    assert c[0] == keep.sum()
    np.testing.assert_array_equal(y[keep], np.arange(keep.sum(), dtype=np.float32))


@pytest.mark.parametrize("defs,m,n", [({}, 7, 1000), ({"BM": 1, "BN": 64, "REVERSE": True}, 3, 33),
                                      ({"T": "f16", "BM": 16, "BN": 1024, "NW": 8}, 33, 1), ({"REVERSE": True}, 5, 513)])
def test_lib_scan_cumsum_rows(defs, m, n):
    """lib/scan.tile: row scans longer than a chunk (the carry), ragged m and n, both
    directions; f16 results are also rounded to f16 once (2^-11 relative)."""
    k = tile.compile(tile.lib_path("scan"), kernel="cumsum", defines=defs)
    rev = defs.get("REVERSE", False)
    x = scan_input("cumsum", defs.get("T", "f32"), (m, n))
    if defs.get("T") == "f16":
        x16, y = x.astype(np.float16), np.zeros((m, n), np.float16)
        k(x16, y)
        ref = scan_ref(x, "cumsum", 1, rev)
        tol = 2.0**-11 * np.abs(ref) + n * 2.0**-24 * scan_ref(np.abs(x), "cumsum", 1, rev) + 1e-30
        assert np.all(np.abs(y.astype(np.float64) - ref) <= tol)
        return
    y = np.zeros_like(x)
    k(x, y)
    check_scan(y, x, "cumsum", 1, rev)


def test_lib_scan_cummax_columns():
    """lib/scan.tile: column running maxima over several BM-row chunks, ragged."""
    k = tile.compile(tile.lib_path("scan"), kernel="cummax", defines={"BM": 16, "BN": 8})
    x = scan_input("cummax", "f32", (70, 13))
    y = np.zeros_like(x)
    k(x, y)
    check_scan(y, x, "cummax", 0, False)


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
