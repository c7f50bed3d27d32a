"""The package on PyTorch CUDA tensors (the GPU machine; skipped elsewhere): lib kernels
against torch, torch's current stream, bf16, grouped-query attention, and a custom op inside
torch.compile without graph breaks. Tolerances: f16/bf16 GEMM within 1e-2 relative Frobenius
error of a float32 product of the same inputs; attention within 2e-2 (f16) / 4e-2 (bf16) max
absolute error of float32 SDPA."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tile  # noqa: E402
import tile.torch  # noqa: E402

DEV = "cuda"


def rel_err(x, ref):
    return ((x.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 4095, 7), (1000, 1024, 4095), (4096, 4096, 4096)])
def test_gemm(dtype, m, n, k):
    g = tile.compile(tile.lib_path("gemm"), kernel="gemm",
                     defines={"T": "bf16" if dtype == torch.bfloat16 else "f16"})
    a = torch.randn(m, k, device=DEV, dtype=dtype)
    b = torch.randn(k, n, device=DEV, dtype=dtype)
    c = torch.full((m, n), float("nan"), device=DEV, dtype=dtype)
    g(a, b, c)
    torch.cuda.synchronize()
    assert rel_err(c, a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("n,pad,bn", [(1001, 1024, 1024), (4100, 4160, 1024), (33, 64, 1024), (4095, 4096, 8192)])
def test_rows_on_padded_views(dtype, n, pad, bn):
    """Row kernels on views x[:, :n] of padded rows (16-byte row strides, n not a multiple
    of the vector width): the vectors that straddle a row's end go one element at a time
    (cg_mem.c), the others 16 bytes at a time; the padding must stay untouched. Within
    1e-2 (f16, f32) / 2e-2 (bf16) max error relative to float32 torch."""
    tname = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}[dtype]
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-2
    m = 37
    xb = torch.randn(m, pad, device=DEV, dtype=dtype)
    yb = torch.full((m, pad), 7.0, device=DEV, dtype=dtype)
    x, y = xb[:, :n], yb[:, :n]
    w = torch.randn(n, device=DEV, dtype=dtype)
    rstd = torch.empty(m, device=DEV, dtype=torch.float32)
    sm = tile.compile(tile.lib_path("softmax"), kernel="softmax", defines={"T": tname, "BN": str(bn)})
    sm(x, y)
    torch.cuda.synchronize()
    want = torch.softmax(x.float(), dim=-1)
    assert ((y.float() - want).abs().max() / want.abs().max()).item() < tol
    assert (yb[:, n:] == 7.0).all()
    rn = tile.compile(tile.lib_path("rmsnorm"), kernel="rmsnorm", defines={"T": tname, "BN": str(bn)})
    rn(x, w, y, rstd, eps=1e-5)
    torch.cuda.synchronize()
    want = torch.nn.functional.rms_norm(x.float(), (n,), w.float(), eps=1e-5)
    assert ((y.float() - want).abs().max() / want.abs().max()).item() < tol
    assert (yb[:, n:] == 7.0).all()


def test_gemm_bias_gelu_on_a_side_stream():
    g = tile.compile(tile.lib_path("gemm"), kernel="gemm", defines={"HAS_BIAS": True, "ACT": "gelu"})
    a = torch.randn(777, 512, device=DEV, dtype=torch.float16)
    b = torch.randn(512, 640, device=DEV, dtype=torch.float16)
    bias = torch.randn(640, device=DEV, dtype=torch.float16)
    c = torch.empty(777, 640, device=DEV, dtype=torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g(a, b, c, bias=bias)  # torch's current stream: s
    s.synchronize()
    ref = torch.nn.functional.gelu(a.float() @ b.float() + bias.float())
    assert rel_err(c, ref) < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n,nk,h,hkv,d,causal", [(1000, 1000, 8, 8, 64, False), (4095, 4095, 4, 2, 128, True),
                                                  (128, 777, 4, 1, 64, False)])
def test_attention(dtype, n, nk, h, hkv, d, causal):
    att = tile.compile(tile.lib_path("attention"),
                       defines={"D": d, "CAUSAL": causal, "T": "bf16" if dtype == torch.bfloat16 else "f16"})
    q = torch.randn(2, h, n, d, device=DEV, dtype=dtype)
    k = torch.randn(2, hkv, nk, d, device=DEV, dtype=dtype)
    v = torch.randn(2, hkv, nk, d, device=DEV, dtype=dtype)
    o = torch.empty_like(q)
    att(q, k, v, o, None, scale=d ** -0.5)
    torch.cuda.synchronize()
    kr = k.float().repeat_interleave(h // hkv, dim=1)
    vr = v.float().repeat_interleave(h // hkv, dim=1)
    mask = None
    if causal:  # bottom-right aligned, as the kernel's SPEC says for n != nk
        mask = torch.ones(n, nk, device=DEV, dtype=torch.bool).tril(nk - n)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), kr, vr, attn_mask=mask)
    tol = 2e-2 if dtype == torch.float16 else 4e-2
    assert (o.float() - ref).abs().max().item() < tol


def test_launch_error_is_an_exception():
    g = tile.compile(tile.lib_path("gemm"), kernel="gemm")
    a = torch.randn(64, 32, device=DEV, dtype=torch.float16)
    b = torch.randn(33, 64, device=DEV, dtype=torch.float16)
    c = torch.empty(64, 64, device=DEV, dtype=torch.float16)
    with pytest.raises(tile.TileError) as e:
        g(a, b, c)
    assert e.value.status == "BAD_LAUNCH" and "B" in str(e.value)


def test_custom_op_under_torch_compile():
    g = tile.compile(tile.lib_path("gemm"), kernel="gemm", defines={"HAS_BIAS": True, "ACT": "relu"})
    op = tile.torch.custom_op(g, "tile_test::linear_relu")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(256, 384, device=DEV, dtype=torch.float16) * 0.05)
            self.b = torch.nn.Parameter(torch.randn(384, device=DEV, dtype=torch.float16))

        def forward(self, x):
            return op(x * 2, self.w, self.b) + 1

    m = M()
    x = torch.randn(100, 256, device=DEV, dtype=torch.float16)
    with torch.no_grad():
        eager = m(x)
        ref = torch.relu((x.float() * 2) @ m.w.float() + m.b.float()) + 1
        assert rel_err(eager, ref) < 1e-2
        explain = torch._dynamo.explain(m)(x)
        assert explain.graph_break_count == 0, explain.break_reasons
        compiled = torch.compile(m, fullgraph=True)
        out = compiled(x)
        torch.cuda.synchronize()
        assert rel_err(out, ref) < 1e-2
    print("torch.compile: %d graph(s), %d graph break(s)" % (explain.graph_count, explain.graph_break_count))


def test_tune_and_bench():
    g = tile.compile(tile.lib_path("softmax"))
    x = torch.randn(512, 3000, device=DEV, dtype=torch.float32)
    y = torch.empty_like(x)
    r = g.tune(x, y, budget_ms=5000, max_configs=6, store=False)
    assert r.best and r.best_ms > 0 and r.configs
    y.zero_()
    g(x, y)  # the winner
    torch.cuda.synchronize()
    assert rel_err(y, torch.softmax(x, dim=1)) < 1e-5
    assert g.bench(x, y, reps=5) > 0
