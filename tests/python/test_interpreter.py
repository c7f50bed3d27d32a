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


def test_autoconfig_flag_is_accepted_and_changes_nothing_on_the_cpu():
    """autoconfig=True sets TILE_AUTOCONFIG; on the interpreter the kernel runs as compiled
    (the choice is a GPU matter, tests/unit/test_autoconfig.c checks it)."""
    g = tile.compile(tile.lib_path("gemm"), kernel="gemm", defines={"BK": 16, "NW": 4}, autoconfig=True)
    assert g.flags & tile.lib.TILE_AUTOCONFIG
    a = RNG.standard_normal((7, 40)).astype(np.float16)
    b = RNG.standard_normal((40, 33)).astype(np.float16)
    c = np.full((7, 33), np.nan, np.float16)
    g(A=a, B=b, C=c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-2, atol=2e-2 * np.sqrt(40))


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


# ---- u32 ----------------------------------------------------------------------------------
# Reference: NumPy uint32 arithmetic (wraps modulo 2^32, unsigned /, %, >>, comparisons).
# Integer results are exact; the f32 conversions are compared exactly too (one rounding).

U32_OPS = """kernel ops<BN: 64 | 128 = 64>(X: u32[N], Y: u32[N], S: out u32[N], D: out u32[N],
    P: out u32[N], Q: out u32[N], R: out u32[N], H: out u32[N], L: out bool[N], M: out u32[N],
    F: out f32[N], K: out u32[N], I: out i32[N], s: u32)
  grid(cdiv(N, BN))
{
  let o = program_id(0) * BN;
  let x = X[o : +BN];
  let y = load(Y[o : +BN], fill=1);
  S[o : +BN] = x + y * 2654435769 - s;
  D[o : +BN] = x - y;
  P[o : +BN] = x * y;
  Q[o : +BN] = x / y;
  R[o : +BN] = x % y;
  H[o : +BN] = ((x ^ 0x9E3779B9) >> 7) | (y << 29);
  L[o : +BN] = x < y;
  M[o : +BN] = max(x, y) - min(x, y) / 2;
  F[o : +BN] = f32(x);
  K[o : +BN] = u32(F[o : +BN] * 0.5 - 1.0);
  I[o : +BN] = i32(x) >> 28;
}"""


@pytest.mark.parametrize("n", [1, 7, 33, 200])
def test_u32_arithmetic_against_numpy(n):
    k = tile.compile(source=U32_OPS, name="u32.tile")
    x = RNG.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    y = RNG.integers(1, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x[: min(n, 3)] = [0xFFFFFFFF, 0x80000000, 0x7FFFFFFF][: min(n, 3)]   # around 2^31 and 2^32
    y[: min(n, 3)] = [1, 0x7FFFFFFF, 0x80000000][: min(n, 3)]
    s = 0xDEADBEEF
    outs = [np.zeros(n, np.uint32) for _ in range(8)]
    lt, f, kk, ii = np.zeros(n, bool), np.zeros(n, np.float32), np.zeros(n, np.uint32), np.zeros(n, np.int32)
    S, D, P, Q, R, H, M, _ = outs
    k(x, y, S, D, P, Q, R, H, lt, M, f, kk, ii, s)
    with np.errstate(over="ignore"):
        u = np.uint32
        np.testing.assert_array_equal(S, x + y * u(2654435769) - u(s))
        np.testing.assert_array_equal(D, x - y)
        np.testing.assert_array_equal(P, x * y)
        np.testing.assert_array_equal(Q, x // y)
        np.testing.assert_array_equal(R, x % y)
        np.testing.assert_array_equal(H, ((x ^ u(0x9E3779B9)) >> u(7)) | (y << u(29)))
        np.testing.assert_array_equal(lt, x < y)
        np.testing.assert_array_equal(M, np.maximum(x, y) - np.minimum(x, y) // u(2))
    np.testing.assert_array_equal(f, x.astype(np.float32))
    # f32 -> u32 truncates toward zero and saturates: negative values give 0
    g = f.astype(np.float64) * 0.5 - 1.0
    np.testing.assert_array_equal(kk, np.clip(np.trunc(g.astype(np.float32).astype(np.float64)), 0, 0xFFFFFFFF).astype(np.uint32))
    np.testing.assert_array_equal(ii, x.view(np.int32) >> 28)   # i32(u) keeps bits; i32 >> is arithmetic


def test_u32_reductions_and_conversions():
    src = """kernel red(X: u32[64], A: out u32[2], B: out u32[2], C: out u32[1], Z: out u32[4], W: out f32[4], V: out i32[3])
  grid(1)
{
  let x = X[:];
  A[0 : +2] = max(x[None, :] + zeros([2, 64], u32), axis=1);
  B[0 : +2] = min(x[None, :] + zeros([2, 64], u32), axis=1);
  C[0] = sum(x);
  let f = W[0 : +4];
  Z[0 : +4] = u32(f);
  V[0 : +2] = i32(u32(arange(2) - 1));
  V[2] = argmax(x);
}"""
    k = tile.compile(source=src, name="red.tile")
    x = RNG.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)
    x[5] = 0xFFFFFFF0
    x[9] = 3
    a, b, c = np.zeros(2, np.uint32), np.zeros(2, np.uint32), np.zeros(1, np.uint32)
    z, v = np.zeros(4, np.uint32), np.zeros(3, np.int32)
    w = np.array([-3.5, 1e10, np.nan, 3000000000.75], np.float32)
    k(x, a, b, c, z, w, v)
    np.testing.assert_array_equal(a, [x.max()] * 2)           # unsigned: 0xFFFFFFF0 wins
    np.testing.assert_array_equal(b, [x.min()] * 2)
    np.testing.assert_array_equal(c, [x.sum(dtype=np.uint64) % (1 << 32)])   # the sum wraps
    # saturating as cvt.rzi.sat.u32.f32: below 0 -> 0, above 2^32-1 -> 2^32-1, NaN -> 0
    np.testing.assert_array_equal(z, [0, 0xFFFFFFFF, 0, np.float32(3000000000.75).astype(np.uint64)])
    np.testing.assert_array_equal(v, [-1, 0, np.argmax(x)])   # u32(-1) is 0xFFFFFFFF, i32 of it -1


def test_u32_literals_and_constants():
    """Decimal literals up to 4294967295 are u32 constants; weak ints adopt u32 with their
    32-bit pattern; constant u32 arithmetic folds exactly."""
    src = """const BIG = 4000000000;
kernel c(Y: out u32[8]) grid(1) {
  let a = u32(7);
  Y[0] = BIG + 294967295;
  Y[1] = u32(-1);
  Y[2] = a - 1;
  Y[3] = u32(0x80000000) / 3;
  Y[4] = 0xFFFFFFFF >> 4 + a - a;
  Y[5] = u32(3000000000) % 7;
  Y[6] = max(u32(1), BIG);
  Y[7] = ~a;
}"""
    k = tile.compile(source=src, name="c.tile")
    y = np.zeros(8, np.uint32)
    k(y)
    np.testing.assert_array_equal(y, [4294967295, 0xFFFFFFFF, 6, 0x80000000 // 3,
                                      0xFFFFFFFF >> 4, 3000000000 % 7, 4000000000, 0xFFFFFFF8])


def test_u32_scalar_argument_range():
    """A u32 scalar takes 0 .. 4294967295; the launch refuses anything else."""
    k = tile.compile(source="kernel s(Y: out u32[1], s: u32) grid(1) { Y[0] = s >> 1; }", name="s.tile")
    y = np.zeros(1, np.uint32)
    k(y, 0xFFFFFFFF)
    assert y[0] == 0x7FFFFFFF
    for bad in (-1, 1 << 32):
        with pytest.raises(tile.TileError, match="does not fit in u32"):
            k(y, bad)


# ---- rand, randn, randint: Philox4x32-10 ----------------------------------------------------
# The reference is Philox4x32-10 written out here (Salmon et al., SC'11; Random123), checked
# against the published known-answer vectors before it judges the kernels.

def philox4x32_10(ctr, key):
    """Philox4x32-10 on NumPy arrays: ctr a 4-tuple and key a 2-tuple of 32-bit words."""
    m32 = np.uint64(0xFFFFFFFF)
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) for c in ctr)
    k0, k1 = (np.asarray(k, np.uint64) for k in key)
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2   # < 2^64: exact
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & m32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & m32)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & m32, (k1 + np.uint64(0xBB67AE85)) & m32
    return [c.astype(np.uint32) for c in (c0, c1, c2, c3)]


def test_philox_reference_known_answers():
    ones = 0xFFFFFFFF
    kat = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
           ((ones,) * 4, (ones, ones), (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
           ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
            (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for ctr, key, out in kat:
        assert [int(w) for w in philox4x32_10(ctr, key)] == list(out)


RAND_SRC = """kernel r<BN: 256 | 1024 = 256>(S: out u32[N], U: out f32[N], Z: out f32[N], seed: u32, base: i32)
  grid(cdiv(N, BN))
{
  let offs = program_id(0) * BN + arange(BN) + base;
  S[program_id(0) * BN : +BN] = randint(seed, offs);
  U[program_id(0) * BN : +BN] = rand(seed, offs);
  Z[program_id(0) * BN : +BN] = randn(seed, offs);
}"""


def rand_ref(seed, offs):
    """randint, rand and randn as SPEC section 12 defines them from the first two words."""
    z = np.zeros_like(offs, dtype=np.uint64)
    w0, w1, _, _ = philox4x32_10((offs.astype(np.uint32).astype(np.uint64), z, z, z), (seed, 0))
    u = (w0 >> 8).astype(np.float64) * 2.0 ** -24
    u1 = ((w0 >> 8).astype(np.float64) + 1) * 2.0 ** -24
    u2 = (w1 >> 8).astype(np.float64) * 2.0 ** -24
    return w0, u, np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)


def run_rand(seed, n, base=0):
    k = tile.compile(source=RAND_SRC, name="rand.tile")
    s, u, z = np.zeros(n, np.uint32), np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    k(s, u, z, seed, base)
    return s, u, z


@pytest.mark.parametrize("n,seed,base", [(1, 0, 0), (33, 0xFFFFFFFF, 7), (1000, 12345, -500), (4097, 0x9E3779B9, 2 ** 31 - 3000)])
def test_rand_matches_philox_reference(n, seed, base):
    """randint bit-exact; rand exact ((w >> 8) 2^-24 is one f32); randn within 2e-5 (f32 log,
    sqrt and a degree-12 cos polynomial, |z| < 5.8). Offsets wrap through 2^31 as u32."""
    s, u, z = run_rand(seed, n, base)
    offs = (np.arange(n, dtype=np.int64) + base) % (1 << 32)
    w0, uref, zref = rand_ref(seed, offs)
    np.testing.assert_array_equal(s, w0)
    np.testing.assert_array_equal(u.astype(np.float64), uref)
    np.testing.assert_allclose(z, zref, rtol=0, atol=2e-5)
    if seed == 0 and base == 0:
        assert s[0] == 0x6627e8d5   # the known answer for counter 0, key 0, through the kernel


def test_rand_statistics_and_determinism():
    """64k samples: rand in [0, 1) with mean 1/2 and std 1/sqrt(12), randn with mean 0 and std
    1 (tolerances about 8 standard errors); the same seed and offsets give the same values,
    another seed other values."""
    n = 1 << 16
    s, u, z = run_rand(2024, n)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.std() - 12 ** -0.5) < 0.005
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.02
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.01          # the normal's mass within 1 sigma
    s2, u2, z2 = run_rand(2024, n)
    np.testing.assert_array_equal(s, s2)
    np.testing.assert_array_equal(z, z2)
    s3, _, _ = run_rand(2025, n)
    assert np.mean(s == s3) < 1e-3
    assert len(np.unique(s)) > n - 10                             # distinct offsets, distinct words


def test_rand_scalar_and_2d_offsets_dropout():
    """A scalar offset gives a scalar; a 2-d offset tile a 2-d result; an i32 seed is its bit
    pattern as u32 (-1 is 0xFFFFFFFF). Dropout keeps a fraction close to 1 - p."""
    src = """kernel d(X: f32[M, 64], Y: out f32[M, 64], A: out u32[3], seed: i32, p: f32) grid(cdiv(M, 16)) {
  let r = program_id(0) * 16;
  let offs = (r + arange(16))[:, None] * 64 + arange(64)[None, :];
  let keep = rand(seed, offs) > p;
  Y[r : +16, :] = where(keep, X[r : +16, :] / (1.0 - p), 0.0);
  A[0] = randint(seed, 5);
  A[1] = randint(u32(seed), u32(5));
  A[2] = randint(7, 9);   // constants: the IR folder computes the chain (eval.c's mulhi)
}"""
    k = tile.compile(source=src, name="dropout.tile")
    m = 333
    x = RNG.standard_normal((m, 64)).astype(np.float32) + 3   # never 0
    y, a = np.zeros_like(x), np.zeros(3, np.uint32)
    k(x, y, a, -1, 0.25)
    offs = np.arange(m * 64, dtype=np.int64).reshape(m, 64)
    _, u, _ = rand_ref(0xFFFFFFFF, offs)
    keep = u.astype(np.float32) > np.float32(0.25)
    np.testing.assert_allclose(y, np.where(keep, x / np.float32(0.75), 0), rtol=1e-6)
    assert abs(keep.mean() - 0.75) < 0.02
    w0, _, _ = rand_ref(0xFFFFFFFF, np.array([5]))
    c0, _, _ = rand_ref(7, np.array([9]))
    np.testing.assert_array_equal(a, [w0[0], w0[0], c0[0]])


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


NESTED = """
kernel nested<BM: 16 = 16, BN: 16 = 16>(X: f32[G, N, D], Y: out f32[D, N], W: f32[D, D])
  grid(cdiv(N, BN))
  warps(4)
{
  let n0 = program_id(0) * BN;
  let w = W[0 : +16, 0 : +16];
  var acc = zeros([BN, 16], f32);
  for g in range(1, G) {                    // flattened with the loop below (the flatten pass)
    for m0 in range(n0 / 2, N, BM) {
      let x = X[g, m0 : +BM, 0 : +16];
      let s = exp2(x @ w * 0.125 - 1.0);    // used only transposed: computed transposed
      acc += trans(s) @ x * 0.001;
    }
  }
  Y[0 : +16, n0 : +BN] = trans(acc);
}
"""


@pytest.mark.parametrize("g,n", [(1, 16), (3, 7), (4, 33), (2, 100)])
def test_nested_loops_and_transposed_chains(g, n):
    """The flatten pass (a head loop around a block loop, ragged and empty ranges) and the
    transpose pass (exp2 of a product used only transposed) against NumPy (tolerance 1e-5
    relative to the largest value)."""
    k = tile.compile(source=NESTED, name="nested.tile", verify=True)
    x = RNG.standard_normal((g, n, 16)).astype(np.float32)
    w = RNG.standard_normal((16, 16)).astype(np.float32)
    y = np.full((16, n), np.nan, np.float32)
    k(x, y, w)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    ref = np.zeros((16, n))
    for p in range((n + 15) // 16):
        n0 = p * 16
        acc = np.zeros((16, 16))
        for gg in range(1, g):
            for m0 in range(n0 // 2, n, 16):
                xb = np.zeros((16, 16))
                rows = xd[gg, m0:m0 + 16]
                xb[:len(rows)] = rows
                s = np.exp2(xb @ wd * 0.125 - 1.0)
                acc += s.T @ xb * 0.001
        cols = min(16, n - n0)
        ref[:, n0:n0 + cols] = acc.T[:, :cols]
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-5 * max(1.0, np.abs(ref).max()))
