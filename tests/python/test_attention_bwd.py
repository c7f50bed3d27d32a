"""lib/attention_bwd.tile on the CPU interpreter against float64 NumPy gradients: the
forward (lib/attention.tile with HAS_LSE) gives O and LSE, then the three backward kernels
give dQ, dK, dV for a random dO, and so do the fused kernel (dQ by atomics) and its cast. Ragged N (1, 7, 33, 100), N != NK, grouped-query heads
(dK and dV summed over a group), causal and not, head dims 16, 64 and 128. Tolerance:
2e-2 relative to the largest gradient magnitude (f16 inputs and P, dS rounded to f16 before
each product, as the GPU does; f32 accumulation)."""
import numpy as np
import pytest

import tile

RNG = np.random.default_rng()


def reference(q, k, v, do, scale, causal):
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    b, h, n, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    g = h // hkv
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for bb in range(b):
        for hh in range(h):
            kk, vv = k[bb, hh // g], v[bb, hh // g]
            s = q[bb, hh] @ kk.T * scale
            if causal:
                s = np.where(np.arange(nk)[None, :] <= np.arange(n)[:, None], s, -np.inf)
            m = s.max(1, keepdims=True)
            p = np.exp(s - np.where(np.isinf(m), 0, m))
            p /= np.maximum(p.sum(1, keepdims=True), 1e-300)
            o = p @ vv
            dp = do[bb, hh] @ vv.T
            ds = p * (dp - (do[bb, hh] * o).sum(1, keepdims=True))
            dq[bb, hh] = ds @ kk * scale
            dk[bb, hh // g] += ds.T @ q[bb, hh] * scale
            dv[bb, hh // g] += p.T @ do[bb, hh]
    return dq, dk, dv


def close(got, ref):
    scale = max(np.abs(ref).max(), 1e-3)
    np.testing.assert_allclose(got.astype(np.float64) / scale, ref / scale, atol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,hkv,n,nk,d", [(1, 1, 1, 1, 1, 16), (2, 4, 2, 7, 33, 64), (1, 2, 2, 100, 100, 64),
                                            (1, 4, 1, 33, 70, 128)])
def test_attention_backward(causal, b, h, hkv, n, nk, d):
    if causal and n != nk and n > nk:
        pytest.skip("causal rows past the last key have no keys")
    q = (RNG.standard_normal((b, h, n, d)) * 0.5).astype(np.float16)
    k = (RNG.standard_normal((b, hkv, nk, d)) * 0.5).astype(np.float16)
    v = RNG.standard_normal((b, hkv, nk, d)).astype(np.float16)
    do = RNG.standard_normal((b, h, n, d)).astype(np.float16)
    scale = d ** -0.5
    defs = {"D": d, "CAUSAL": causal}
    fwd = tile.compile(tile.lib_path("attention"), kernel="attention",
                       defines=dict(defs, HAS_LSE=True, BM=16, BN=16, BNM=16))
    o = np.empty((b, h, n, d), np.float16)
    lse = np.empty((b, h, n), np.float32)
    fwd(q, k, v, o, lse, scale=scale)
    bwd = tile.lib_path("attention_bwd")
    delta = np.empty((b, h, n), np.float32)
    tile.compile(bwd, kernel="attention_bwd_pre", defines={"D": d})(o, do, delta)
    dk = np.full(k.shape, np.nan, np.float16)
    dv = np.full(v.shape, np.nan, np.float16)
    dq = np.full(q.shape, np.nan, np.float16)
    tile.compile(bwd, kernel="attention_bwd_dkdv", defines=dict(defs, BM=16, BN=16))(
        q, k, v, do, lse, delta, dk, dv, scale=scale)
    tile.compile(bwd, kernel="attention_bwd_dq", defines=dict(defs, BM=16, BN=16))(
        q, k, v, do, lse, delta, dq, scale=scale)
    rq, rk, rv = reference(q, k, v, do, scale, causal)
    close(dq, rq)
    close(dk, rk)
    close(dv, rv)
    # the fused form: dK, dV and dQ's f32 partial sums (atomics) in one kernel, then a cast
    dk[:] = np.nan
    dv[:] = np.nan
    dq[:] = np.nan
    acc = np.zeros(q.shape, np.float32)
    tile.compile(bwd, kernel="attention_bwd_fused", defines=dict(defs, BM=16, BN=16))(
        q, k, v, do, lse, delta, dk, dv, acc, scale=scale)
    tile.compile(bwd, kernel="attention_bwd_dq_scale", defines={"D": d, "BM": 16})(acc, dq, scale=scale)
    close(dq, rq)
    close(dk, rk)
    close(dv, rv)

