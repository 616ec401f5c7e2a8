"""FIRE (Li et al. 2023) from Python: torch.ops.posenc.fire_bias against the paper's formula written plainly in
float64, gradcheck on all six parameters (seeds, non-contiguous, empty), posenc.nn.FireBias against the same
formula, attention with FIRE on the fused op (computed per tile) against the composed path with the dense bias
(values and every gradient; causal, Tq != Tk, key padding), and the refusals word for word."""

import math

import pytest
import torch

import posenc  # noqa: F401  (loads torch.ops.posenc)
import posenc.nn as pnn

fire_bias = torch.ops.posenc.fire_bias
attention_fused = torch.ops.posenc.attention_fused


def plain_bias(w1, b1, w2, b2, c, L, q_len, k_len):
    """b[h, i, j] = b2[h] + sum_k w2[h, k] relu(w1[k] x + b1[k]), x = log(c d + 1) / log(c max(L, i') + 1),
    d = i' - j >= 0, i' = i + k_len - q_len; 0 after the query. Plain float64 loops."""
    heads, hidden = w2.shape
    c, L = float(c), float(L)
    out = torch.zeros(heads, q_len, k_len, dtype=torch.float64)
    for i in range(q_len):
        query = i + k_len - q_len
        for j in range(min(k_len, query + 1)):
            x = math.log(c * (query - j) + 1) / math.log(c * max(L, query) + 1)
            for h in range(heads):
                out[h, i, j] = float(b2[h]) + sum(float(w2[h, k]) * max(0.0, float(w1[k]) * x + float(b1[k]))
                                                  for k in range(hidden))
    return out


def params(heads=3, hidden=5, c=0.4, L=6.5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.rand(*shape, generator=g, dtype=dtype) * 2 - 1  # noqa: E731
    return [r(hidden), r(hidden), r(heads, hidden) / 2, r(heads) / 2, torch.tensor(c, dtype=dtype),
            torch.tensor(L, dtype=dtype)]


@pytest.mark.parametrize("q_len, k_len", [(5, 5), (1, 7), (6, 2), (12, 20)])
def test_op_matches_the_paper(q_len, k_len):
    p = params()
    # 1e-13: log1p and the MLP in double against math.log and Python sums.
    torch.testing.assert_close(fire_bias(*p, q_len, k_len), plain_bias(*p, q_len, k_len), rtol=0, atol=1e-13)
    p32 = [t.float() for t in p]
    got32 = fire_bias(*p32, q_len, k_len)
    assert got32.dtype == torch.float32
    # float32 math: a few float32 ulps of terms of size <= hidden.
    torch.testing.assert_close(got32.double(), plain_bias(*p32, q_len, k_len), rtol=0, atol=5e-6)


def torch_max_bias(w1, b1, w2, b2, c, L, q_len, k_len):
    """The authors' form in float64 torch ops: psi(d) / psi(torch.max(L, i')), whose autograd splits the
    gradient evenly between L and i' where they tie."""
    query = torch.arange(q_len, dtype=torch.float64).unsqueeze(1) + (k_len - q_len)
    d = (query - torch.arange(k_len, dtype=torch.float64)).clamp(min=0)
    x = torch.log(c * d + 1) / torch.log(c * torch.maximum(L, query) + 1)
    hidden = torch.relu(x.unsqueeze(-1) * w1 + b1)
    out = (hidden @ w2.t() + b2).permute(2, 0, 1)
    return out.masked_fill((query < torch.arange(k_len)).unsqueeze(0), 0.0)


def test_threshold_gradient_at_a_tie_is_torch_max_s():
    # L = 6 exactly is the key position of query 3 (as L = 512 at init is at T > 512): L gets half there.
    p = [t.requires_grad_() for t in params(heads=2, hidden=4, c=0.7, L=6.0, seed=1)]
    ref = [t.detach().clone().requires_grad_() for t in p]
    g = torch.randn(2, 8, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    fire_bias(*p, 8, 10).backward(g)
    torch_max_bias(*ref, 8, 10).backward(g)
    for name, a, b in zip(["w1", "b1", "w2", "b2", "c", "L"], p, ref):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-13, msg=name)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("L", [2.5, 30.0])  # below some queries (max picks i') and above all of them
def test_gradcheck(seed, L):
    p = [t.requires_grad_() for t in params(heads=2, hidden=4, c=0.7, L=L, seed=seed)]
    assert torch.autograd.gradcheck(lambda *a: fire_bias(*a, 4, 9), p)
    # Non-contiguous MLP weights (every other column of a wider matrix).
    wide = torch.stack([p[2].detach(), p[2].detach()], 2).flatten(1).requires_grad_()
    assert torch.autograd.gradcheck(lambda w: fire_bias(p[0], p[1], w[:, ::2], p[3], p[4], p[5], 3, 5), (wide,))
    # Empty: no pair, zero gradients.
    out = fire_bias(*p, 0, 5)
    assert out.shape == (2, 0, 5)
    out.sum().backward()
    assert torch.equal(p[0].grad, torch.zeros(4, dtype=torch.float64))


def test_module_matches_the_paper_and_initialisation():
    torch.manual_seed(0)
    m = pnn.FireBias(3, hidden=8).double()
    assert m.hidden == 8 and m.causal and float(m.c) == pytest.approx(0.1) and float(m.threshold()) == 512.0
    assert float(m.w1.abs().max()) <= 1 and float(m.w2.abs().max()) <= 1 / math.sqrt(8)
    q_len, k_len = 4, 7
    # c as stored (float32 0.1 widened), L = |1 * 512|.
    want = plain_bias(m.w1.detach(), m.b1.detach(), m.w2.detach(), m.b2.detach(), float(m.c), 512.0, q_len, k_len)
    want = want.masked_fill(torch.ones(q_len, k_len, dtype=torch.bool).triu(k_len - q_len + 1), -math.inf)
    torch.testing.assert_close(m(q_len, k_len), want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-11), (torch.float32, 3e-5)])
def test_fused_per_tile_equals_composed_dense(dtype, tol):
    """Fused (FIRE per tile, no (Tq, Tk) tensor) against the composed path given the dense bias."""
    torch.manual_seed(1)
    heads, q_len, k_len, dh = 3, 20, 45, 8
    m = pnn.FireBias(heads, hidden=6, init_L=30.0).to(dtype)  # queries at 25..44: both sides of L
    q, k, v = (torch.randn(2, heads, n, dh, dtype=dtype) for n in (q_len, k_len, k_len))
    padding = torch.zeros(2, k_len, dtype=torch.bool)
    padding[1, ::6] = True
    w = torch.randn(2, heads, q_len, dh, dtype=dtype)
    results = []
    for fused in (True, False):
        m.zero_grad()
        qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
        if fused:
            out, _ = attention_fused(qq, kk, vv, list(m.terms()), torch.classes.posenc.TermSpec().tile("fire"),
                                     causal=True, key_padding_mask=padding)
        else:
            out = posenc.attention(qq, kk, vv, key_padding_mask=padding, path="composed",
                                   **m.attention_kwargs(q_len, k_len))
        (out * w).sum().backward()
        results.append([out.detach(), qq.grad, kk.grad, vv.grad] + [p.grad.clone() for p in m.parameters()])
    for name, a, b in zip(["out", "q", "k", "v", "w1", "b1", "w2", "b2", "c", "L_multiplier"], *results):
        scale = max(1.0, float(b.abs().max()))
        assert float((a - b).abs().max()) <= tol * scale, name
        assert float(a.abs().max()) > 0, name


def test_multihead_attention_takes_it():
    attn = pnn.MultiheadAttention(16, 4, encoding=pnn.FireBias(4, hidden=8), causal=True)
    out = attn(torch.randn(2, 5, 16))
    out.sum().backward()
    assert attn.bias.w1.grad is not None and attn.bias.L_multiplier.grad is not None


@pytest.mark.parametrize("call, message", [
    (lambda: pnn.FireBias(2, causal=False),
     "[FireBias] causal must be true: FIRE is defined for decoders (causal attention), got false"),
    (lambda: pnn.FireBias(2, hidden=0), "[FireBias] hidden must be >= 1, got 0"),
    (lambda: pnn.FireBias(2, init_c=0.0), "[FireBias] init_c must be > 0, got 0"),
    (lambda: pnn.FireBias(1)(4, 3),
     "[FireBias] causal attention needs every query to see a key: q_len must be <= k_len, got 4 and 3"),
    (lambda: fire_bias(*params()[:4], torch.tensor(-1.0, dtype=torch.float64), params()[5], 2, 2),
     "[fire_bias] c must be > 0, got -1"),
    (lambda: fire_bias(*params()[:5], torch.tensor(math.nan, dtype=torch.float64), 2, 2),
     "[fire_bias] threshold must be > 0, got nan"),
    (lambda: fire_bias(params()[0], params()[1], torch.zeros(3, 2, dtype=torch.float64), *params()[3:], 2, 2),
     "[fire_bias] w2 must be [H, hidden] = [H, 5], got (3, 2)"),
    (lambda: attention_fused(*(torch.randn(1, 3, 2, 4, dtype=torch.float64),) * 3, list(params()),
                             torch.classes.posenc.TermSpec().tile("fire")),
     "[attention] the FIRE term needs causal attention (FIRE is defined for decoders), got causal false"),
])
def test_errors(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).splitlines()[0] == message
