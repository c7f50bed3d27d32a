"""lib/decode_attention.tile on the CPU interpreter against NumPy: paged KV caches with
pages of 8, 16 and 64 tokens in shuffled order, grouped-query heads, ragged sequence
lengths (1, 7, 33, 1000, and 0), several split counts, f16 and bf16-free f16 inputs (NumPy
has no bf16), NaN in the cache slots past each sequence's end (never read), groups of more
query heads than one program's BG (several programs per group). Reference: float64 softmax attention of each query head over its sequence's
keys; tolerance 2e-3 absolute (f16 inputs, f32 accumulation)."""
import numpy as np
import pytest

import tile

RNG = np.random.default_rng()


def paged(lens, page, hkv, d):
    """A cache with each sequence's pages scattered over a pool: K, V, block_table."""
    pages_per = [(n + page - 1) // page for n in lens]
    maxp = max(1, max(pages_per))
    npages = sum(pages_per) + 3
    order = RNG.permutation(npages)
    table = np.full((len(lens), maxp), -7, np.int32)  # unused entries hold garbage
    k = RNG.standard_normal((npages, page, hkv, d)).astype(np.float16)
    v = RNG.standard_normal((npages, page, hkv, d)).astype(np.float16)
    used = 0
    for b, n in enumerate(pages_per):
        table[b, :n] = order[used:used + n]
        used += n
        if lens[b] % page:  # the last page's slots past the sequence: unwritten cache memory
            k[table[b, n - 1], lens[b] % page:] = np.nan
            v[table[b, n - 1], lens[b] % page:] = np.nan
    return k, v, table


def reference(q, k, v, table, lens, page, scale):
    b_, h, d = q.shape
    hkv = k.shape[2]
    out = np.zeros((b_, h, d))
    for b in range(b_):
        pos = np.arange(lens[b])
        rows_k = k[table[b, pos // page], pos % page].astype(np.float64)  # [n, HKV, D]
        rows_v = v[table[b, pos // page], pos % page].astype(np.float64)
        for hh in range(h):
            g = hh // (h // hkv)
            if lens[b] == 0:
                continue
            s = rows_k[:, g] @ q[b, hh].astype(np.float64) * scale
            p = np.exp(s - s.max())
            out[b, hh] = p @ rows_v[:, g] / p.sum()
    return out


@pytest.mark.parametrize("page,bn,bg", [(8, 16, 8), (16, 16, 8), (64, 16, 8), (24, 16, 8), (32, 32, 16), (16, 32, 8)])
@pytest.mark.parametrize("lens,h,hkv,splits", [([1, 7, 33], 4, 2, 3), ([1000, 0, 70], 8, 2, 4),
                                               ([129], 2, 2, 1), ([5, 300], 16, 4, 8), ([40, 3], 32, 2, 2)])
def test_decode_paged_gqa_ragged(page, bn, bg, lens, h, hkv, splits):
    """Pages that hold whole key blocks (16, 64; 32 with BN=32: a block-table entry per step)
    and pages that do not (8, 24; 16 with BN=32: an entry per key); G = 16 heads per group
    over BG = 8 (two programs per group) and 16."""
    d = 64
    k, v, table = paged(lens, page, hkv, d)
    q = RNG.standard_normal((len(lens), h, d)).astype(np.float16)
    seq = np.array(lens, np.int32)
    opart = np.full((len(lens), h, splits, d), np.nan, np.float32)
    lpart = np.full((len(lens), h, splits), np.nan, np.float32)
    out = np.full((len(lens), h, d), np.nan, np.float16)
    split = tile.compile(tile.lib_path("decode_attention"), kernel="decode_split", defines={"D": d, "BN": bn, "BG": bg})
    combine = tile.compile(tile.lib_path("decode_attention"), kernel="decode_combine", defines={"D": d, "BS": 8})
    split(q, k, v, table, seq, opart, lpart, scale=0.125)
    combine(opart, lpart, out)
    np.testing.assert_allclose(out.astype(np.float64), reference(q, k, v, table, lens, page, 0.125), atol=2e-3)


def test_decode_default_configuration_hd128():
    lens, page, h, hkv, d, splits = [1, 500, 77], 16, 8, 2, 128, 5
    k, v, table = paged(lens, page, hkv, d)
    q = RNG.standard_normal((len(lens), h, d)).astype(np.float16)
    opart = np.empty((len(lens), h, splits, d), np.float32)
    lpart = np.empty((len(lens), h, splits), np.float32)
    out = np.empty((len(lens), h, d), np.float16)
    tile.compile(tile.lib_path("decode_attention"), kernel="decode_split")(
        q, k, v, table, np.array(lens, np.int32), opart, lpart, scale=d ** -0.5)
    tile.compile(tile.lib_path("decode_attention"), kernel="decode_combine")(opart, lpart, out)
    np.testing.assert_allclose(out.astype(np.float64), reference(q, k, v, table, lens, page, d ** -0.5), atol=2e-3)
