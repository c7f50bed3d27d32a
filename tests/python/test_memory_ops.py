"""Gathers, scatters, masked loads and stores and atomics on the CPU interpreter, against
NumPy on fresh random inputs with ragged sizes (tests/kernels/memory_ops.tile; the same
kernels go through ptxas for both GPU tiers in tests/cli/ptxas.sh, and through
tools/gpu_check.sh against this interpreter on the GPU). Tolerances: f32 sums of products
within 1e-4 relative of float64 (the interpreter rounds each product and sum to f32);
integer and copied results exact."""
import os

import numpy as np
import pytest

import tile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OPS = os.path.join(ROOT, "tests", "kernels", "memory_ops.tile")
RNG = np.random.default_rng()


def kernel(name, **defines):
    return tile.compile(OPS, kernel=name, defines=defines or None)


@pytest.mark.parametrize("m,n,kk", [(1, 1, 1), (7, 33, 17), (33, 40, 100), (64, 31, 4095)])
def test_split_k_gemm_with_atomic_add(m, n, kk):
    a = RNG.standard_normal((m, kk)).astype(np.float32)
    b = RNG.standard_normal((kk, n)).astype(np.float32)
    c = RNG.standard_normal((m, n)).astype(np.float32)  # atomics add to what is there
    ref = c.astype(np.float64) + a.astype(np.float64) @ b
    kernel("splitk")(a, b, c)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.sqrt(kk))


@pytest.mark.parametrize("m,n", [(1, 1), (7, 33), (33, 32), (40, 20)])
def test_masked_store_leaves_the_rest(m, n):
    x = RNG.standard_normal((m, n)).astype(np.float32)
    lens = RNG.integers(-1, 40, m).astype(np.int32)
    y = RNG.standard_normal((m, n)).astype(np.float32)
    keep = y.copy()
    kernel("rowmask")(x, lens, y)
    cols = np.arange(n)[None, :]
    written = cols < np.minimum(lens, 32)[:, None]
    np.testing.assert_array_equal(y, np.where(written, x * 2, keep))


@pytest.mark.parametrize("n,nb", [(1, 1), (1000, 7), (4095, 33)])
def test_histogram_with_duplicate_addresses(n, nb):
    x = RNG.integers(-3, nb + 3, n).astype(np.int32)  # out-of-range bins are skipped
    h = RNG.integers(0, 5, nb).astype(np.int32)
    ref = h + np.bincount(x[(x >= 0) & (x < nb)], minlength=nb)
    kernel("hist")(x, h)
    np.testing.assert_array_equal(h, ref)


@pytest.mark.parametrize("n,s", [(1, 1), (100, 3), (4095, 17)])
def test_atomic_max_segments_and_old_values(n, s):
    x = RNG.standard_normal(n).astype(np.float32)
    x[RNG.random(n) < 0.05] = np.nan  # NaN values are skipped
    seg = RNG.integers(0, s, n).astype(np.int32)
    mx = np.full(s, -np.inf, np.float32)
    mx[0] = 100.0  # a larger value already there stays
    old = np.full(n, np.nan, np.float32)
    kernel("amax")(x, seg, mx, old)
    ref = np.full(s, -np.inf)
    ref[0] = 100.0
    np.fmax.at(ref, seg, x.astype(np.float64))
    np.testing.assert_array_equal(mx, ref.astype(np.float32))
    # each old value is what the segment held at some point: never above the final maximum
    assert np.all(old <= mx[seg]) and not np.any(np.isnan(old))


def test_scalar_atomic_add_counts_once_per_program():
    x = RNG.standard_normal(1000).astype(np.float32)
    t = np.array([0.5], np.float32)
    kernel("total")(x, t)
    np.testing.assert_allclose(t[0], 0.5 + x.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n", [1, 7, 33, 4095])
def test_scatter_and_masked_gather(n):
    x = RNG.standard_normal(n).astype(np.float32)
    p = RNG.permutation(n).astype(np.int32)
    y = np.full(n, np.nan, np.float32)
    z = np.full(n, np.nan, np.float32)
    kernel("perm")(x, p, y, z)
    ref_y = np.empty(n, np.float32)
    ref_y[p] = x
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(z, np.where(p % 2 == 0, x[p], -1.0).astype(np.float32))


def test_gather_rows_numpy_placement():
    # advanced indices apart (a slice between): their shape comes first, as in NumPy
    src = """
kernel g<BI: 8 = 8>(T: f32[A, 16, C], i: i32[BI], j: i32[BI], O: out f32[BI, 16]) grid(1) {
  O[0 : +BI, 0 : +16] = T[i[0 : +BI], :, j[0 : +BI]];
}
"""
    k = tile.compile(source=src)
    t = RNG.standard_normal((5, 16, 6)).astype(np.float32)
    i = RNG.integers(0, 5, 8).astype(np.int32)
    j = RNG.integers(0, 6, 8).astype(np.int32)
    o = np.empty((8, 16), np.float32)
    k(t, i, j, o)
    np.testing.assert_array_equal(o, t[i, :, j])


@pytest.mark.parametrize("n,s", [(1, 1), (333, 5)])
def test_u32_atomics_are_unsigned_and_wrap(n, s):
    x = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    seg = RNG.integers(0, s, n).astype(np.int32)
    mx = np.zeros(s, np.uint32)
    tot = RNG.integers(0, 2**32, s, dtype=np.uint64).astype(np.uint32)
    ref_mx = mx.copy()
    np.maximum.at(ref_mx, seg, x)
    ref_tot = tot.astype(np.uint64)
    np.add.at(ref_tot, seg, x.astype(np.uint64))
    kernel("umax")(x, seg, mx, tot)
    np.testing.assert_array_equal(mx, ref_mx)
    np.testing.assert_array_equal(tot, (ref_tot % 2**32).astype(np.uint32))


# ---- the examples (examples/*.tile): split-K GEMM, embedding bag, varlen attention ----------

def example(name, **defines):
    return tile.compile(os.path.join(ROOT, "examples", name + ".tile"), defines=defines or None)


@pytest.mark.parametrize("m,n,kk,split", [(1, 1, 1, 2), (7, 100, 1000, 4), (33, 65, 4095, 16)])
def test_example_splitk_gemm(m, n, kk, split):
    a = RNG.standard_normal((m, kk)).astype(np.float16)
    b = RNG.standard_normal((kk, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    example("splitk_gemm", BM=16, BN=64, BK=64, SPLIT=split)(a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.sqrt(kk))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 5e-3)])
@pytest.mark.parametrize("v,bags,dim", [(1, 1, 1), (37, 33, 200), (1000, 7, 4095)])
def test_example_embedding_bag(dtype, tol, v, bags, dim):
    e = RNG.standard_normal((v, dim)).astype(dtype)
    ids = RNG.integers(-2, v + 2, (bags, 8)).astype(np.int32)  # out-of-range ids add nothing
    w = RNG.standard_normal((bags, 8)).astype(np.float32)
    out = np.full((bags, dim), np.nan, dtype)
    example("embedding_bag", T="f32" if dtype == np.float32 else "f16")(e, ids, w, out)
    valid = (ids >= 0) & (ids < v)
    rows = np.where(valid[:, :, None], e[np.clip(ids, 0, v - 1)].astype(np.float64), 0)
    ref = np.einsum("blv,bl->bv", rows, w)
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("lens", [[1], [70, 1, 33, 130], [64, 128, 3]])
def test_example_varlen_attention_writes_only_its_rows(lens):
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total, h, d = int(cu[-1]), 2, 64
    q, k, v = (RNG.standard_normal((total, h, d)).astype(np.float16) for _ in range(3))
    # a block of 64 rows runs into the next sequence: those rows belong to another program,
    # which writes them concurrently; only the masked store keeps them right
    o = np.full((total, h, d), np.nan, np.float16)
    example("varlen_attention", D=64, BM=64, BN=32)(q, k, v, cu, o, scale=0.125, max_len=max(lens))
    for s in range(len(lens)):
        sl = slice(cu[s], cu[s + 1])
        for hh in range(h):
            sc = q[sl, hh].astype(np.float64) @ k[sl, hh].astype(np.float64).T * 0.125
            p = np.exp(sc - sc.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            np.testing.assert_allclose(o[sl, hh].astype(np.float64), p @ v[sl, hh].astype(np.float64), atol=2e-3)


@pytest.mark.parametrize("m,kk,n,r,defs", [(1, 1, 1, 1, {}), (7, 33, 5, 3, {}), (50, 100, 70, 129, {"BM": 16, "NW": 1}),
                                           (1000, 256, 128, 300, {}), (64, 40, 33, 100, {"BM": 128, "NW": 8})])
def test_gather_gemm_rows_by_index(m, kk, n, r, defs):
    """tests/kernels/gather_gemm.tile: C[i] = A[idx[i]] @ B, a gather feeding the Tensor Cores
    in a loop (an asynchronous, pipelined copy on the GPU); indices out of range give zero
    rows. f16 inputs (NumPy has no bf16), f32 sums within 1e-3 of float64."""
    dt = np.float16
    a = RNG.standard_normal((m, kk)).astype(dt)
    b = RNG.standard_normal((kk, n)).astype(dt)
    idx = RNG.integers(-3, m + 3, r).astype(np.int32)
    c = np.full((r, n), np.nan, np.float32)
    k = tile.compile(os.path.join(ROOT, "tests", "kernels", "gather_gemm.tile"), defines=defs or None)
    k(a, idx, b, c)
    ok = (idx >= 0) & (idx < m)
    rows = np.where(ok[:, None], a.astype(np.float64)[np.clip(idx, 0, m - 1)], 0.0)
    ref = rows @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3 * np.sqrt(kk))
