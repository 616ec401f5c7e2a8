"""CoPE (Golovneva et al. 2024) from Python: torch.ops.posenc.cope_bias against the paper's listing written
plainly in float64 (sigmoid of the scaled logits, flip / cumsum / flip, clamp, gather of the interpolated
q . e), gradcheck on q, k and e (seeds, padding, non-contiguous, empty), attention with CoPE on the fused op
(computed per query row) against the composed path (values and every gradient; causal, Tq != Tk, key padding),
MultiheadAttention(encoding="cope", causal=True) against the plain formula, and the refusals word for word."""

import math

import pytest
import torch

import posenc
import posenc.nn as pnn

cope_bias = torch.ops.posenc.cope_bias
attention_fused = torch.ops.posenc.attention_fused


def plain_term(q, k, e, scale, padding=None):
    """The authors' listing on (B, H, Tq, Tk): gates of the scaled logits with masked keys at 0, positions the
    reverse cumulative sum clamped at npos - 1, q . e interpolated between floor and ceil; 0 after the query."""
    q_len, k_len = q.shape[2], k.shape[2]
    after = torch.arange(k_len).unsqueeze(0) - torch.arange(q_len).unsqueeze(1) > k_len - q_len
    hidden = after.view(1, 1, q_len, k_len)
    if padding is not None:
        hidden = hidden | padding.view(padding.shape[0], 1, 1, k_len)
    gates = torch.sigmoid(q @ k.transpose(-1, -2) * scale).masked_fill(hidden, 0.0)
    pos = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=e.shape[0] - 1)
    lo, hi = pos.floor(), pos.ceil()
    w = pos - lo
    z = q @ e.t()
    out = z.gather(-1, hi.long()) * w + z.gather(-1, lo.long()) * (1 - w)
    return out.masked_fill(after, 0.0)


def inputs(b=2, h=2, q_len=4, k_len=7, dh=5, npos=6, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, q_len, dh, generator=g, dtype=dtype) * 2
    k = torch.randn(b, h, k_len, dh, generator=g, dtype=dtype) * 2
    e = torch.randn(npos, dh, generator=g, dtype=dtype)
    return q, k, e


@pytest.mark.parametrize("npos", [3, 64])  # positions clamped, and not
@pytest.mark.parametrize("q_len, k_len", [(5, 5), (1, 7), (6, 11)])
def test_op_matches_the_paper(npos, q_len, k_len):
    q, k, e = inputs(q_len=q_len, k_len=k_len, npos=npos)
    padding = torch.zeros(2, k_len, dtype=torch.bool)
    padding[1, ::3] = True
    for mask in (None, padding):
        # 1e-12: the same double sums in another order.
        torch.testing.assert_close(cope_bias(q, k, e, 0.4, mask), plain_term(q, k, e, 0.4, mask), rtol=0, atol=1e-12)
    got32 = cope_bias(q.float(), k.float(), e.float(), 0.4)
    assert got32.dtype == torch.float32
    # float32 math: a few float32 ulps of |q . e| of a few units.
    torch.testing.assert_close(got32.double(), plain_term(q, k, e, 0.4), rtol=0, atol=5e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("npos", [2, 16])
def test_gradcheck(seed, npos):
    q, k, e = (t.requires_grad_() for t in inputs(npos=npos, seed=seed))
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[0, 2] = True
    assert torch.autograd.gradcheck(lambda *a: cope_bias(*a, 0.4, padding), (q, k, e))
    # Non-contiguous q (every other column of a wider tensor).
    wide = torch.stack([q.detach(), q.detach()], -1).flatten(-2).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: cope_bias(x[..., ::2], k, e, 0.4), (wide,))
    # Empty: no query, zero gradients.
    out = cope_bias(q[:, :, :0], k, e, 0.4)
    assert out.shape == (2, 2, 0, 7)
    out.sum().backward()
    assert torch.equal(e.grad, torch.zeros_like(e))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 5e-5)])
def test_fused_per_row_equals_composed(dtype, tol):
    """Fused (CoPE per query row, no (Tq, Tk) tensor) against the composed path (dense op)."""
    torch.manual_seed(1)
    heads, q_len, k_len, dh = 3, 20, 45, 8
    m = pnn.CopeBias(heads, dh, npos_max=12).to(dtype)  # rows longer than 12: some positions clamp
    with torch.no_grad():
        m.e.normal_()
    q, k, v = (torch.randn(2, heads, n, dh, dtype=dtype) for n in (q_len, k_len, k_len))
    padding = torch.zeros(2, k_len, dtype=torch.bool)
    padding[1, ::6] = True
    w = torch.randn(2, heads, q_len, dh, dtype=dtype)
    results = []
    for path in ("fused", "composed"):
        m.zero_grad()
        qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
        if path == "fused":
            spec = torch.classes.posenc.TermSpec().tile("cope")
            out, _ = attention_fused(qq, kk, vv, [m.e], spec, causal=True, key_padding_mask=padding)
        else:
            out = posenc.attention(qq, kk, vv, key_padding_mask=padding, path="composed",
                                   **m.attention_kwargs(q_len, k_len))
        (out * w).sum().backward()
        results.append([out.detach(), qq.grad, kk.grad, vv.grad, m.e.grad.clone()])
    for name, a, b in zip(["out", "q", "k", "v", "e"], *results):
        scale = max(1.0, float(b.abs().max()))
        assert float((a - b).abs().max()) <= tol * scale, name
        assert float(a.abs().max()) > 0, name


def test_multihead_attention_by_name():
    torch.manual_seed(3)
    attn = pnn.MultiheadAttention(16, 4, encoding="cope", causal=True).double()
    assert isinstance(attn.bias, pnn.CopeBias) and attn.bias.e.shape == (64, 4)
    with torch.no_grad():
        attn.bias.e.normal_()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    out = attn(x)
    # The plain formula: projections, scaled logits + the term, causal softmax.
    heads, dh = 4, 4
    split = lambda t: t.view(2, 9, heads, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(attn.q_proj(x)), split(attn.k_proj(x)), split(attn.v_proj(x))
    scale = 1 / math.sqrt(dh)
    logits = q @ k.transpose(-1, -2) * scale + plain_term(q, k, attn.bias.e, scale)
    logits = logits.masked_fill(torch.ones(9, 9, dtype=torch.bool).triu(1), -math.inf)
    want = attn.out_proj((logits.softmax(-1) @ v).transpose(1, 2).reshape(2, 9, 16))
    torch.testing.assert_close(out, want, rtol=0, atol=1e-12)
    out.sum().backward()
    assert attn.bias.e.grad is not None and float(attn.bias.e.grad.abs().max()) > 0


@pytest.mark.parametrize("call, message", [
    (lambda: pnn.CopeBias(2, 4, causal=False),
     "[CopeBias] causal must be true: CoPE is defined for decoders (causal attention), got false"),
    (lambda: pnn.CopeBias(2, 4, npos_max=0), "[CopeBias] npos_max must be >= 1, got 0"),
    (lambda: pnn.CopeBias(2, 0), "[CopeBias] head_dim must be >= 1, got 0"),
    (lambda: pnn.MultiheadAttention(16, 4, encoding="cope"),
     None),  # the registry's message, checked below
    (lambda: cope_bias(*inputs()[:2], torch.zeros(3, 4, dtype=torch.float64), 0.5),
     "[cope_bias] e must be [npos, Dh] with npos >= 1 and Dh = 5, got (3, 4)"),
    (lambda: cope_bias(inputs()[1], inputs()[0], inputs()[2], 0.5),
     "[cope_bias] CoPE is causal and needs q_len <= k_len, got q_len 7 and k_len 4"),
    (lambda: attention_fused(*(torch.randn(1, 3, 2, 4, dtype=torch.float64),) * 3,
                             [torch.zeros(5, 4, dtype=torch.float64)], torch.classes.posenc.TermSpec().tile("cope")),
     "[attention] the CoPE term needs causal attention (CoPE is defined for decoders), got causal false"),
])
def test_errors(call, message):
    with pytest.raises(ValueError) as info:
        call()
    if message is not None:
        assert str(info.value).splitlines()[0] == message
    else:
        assert "cope" in str(info.value)
