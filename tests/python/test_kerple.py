"""KERPLE (Chi et al. 2022) from Python: the op's rows against the paper's formula written plainly in float64,
gradcheck on r1 and r2 (both kinds, non-contiguous and empty inputs), posenc.nn.KerpleBias against the same
formula, attention with it on the fused and composed paths, and the refusals word for word."""

import math

import pytest
import torch

import posenc
import posenc.nn as pnn


def plain_rows(kind, r1, r2, q_len, k_len):
    """rows[h, d + k_len - 1] for d = j - i' over every offset the (i, j) pairs reach, in float64."""
    rows = torch.empty(len(r1), q_len + k_len - 1, dtype=torch.float64)
    for h in range(len(r1)):
        a, b = float(r1[h]), float(r2[h])
        for d in range(-(k_len - 1), q_len):
            x = abs(d)
            rows[h, d + k_len - 1] = -a * math.log(1 + b * x) if kind == "log" else (-a * x ** b if x else 0.0)
    return rows


@pytest.mark.parametrize("kind", ["log", "power"])
@pytest.mark.parametrize("q_len, k_len", [(5, 5), (1, 7), (6, 2)])
def test_rows_match_the_paper(kind, q_len, k_len):
    r1 = torch.tensor([0.2, 1.0, 1.9], dtype=torch.float64)
    r2 = torch.tensor([0.05, 0.7, 2.0 if kind == "power" else 3.0], dtype=torch.float64)
    got = posenc.kerple_offset_bias(r1, r2, q_len, k_len, kind=kind)
    # 4e-16 relative: log1p / pow of the same doubles.
    torch.testing.assert_close(got, plain_rows(kind, r1, r2, q_len, k_len), rtol=4e-16, atol=4e-16)
    got32 = posenc.kerple_offset_bias(r1.float(), r2.float(), q_len, k_len, kind=kind)
    assert got32.dtype == torch.float32
    # float32: formed in double from the float parameters, rounded once.
    torch.testing.assert_close(got32.double(), plain_rows(kind, r1.float(), r2.float(), q_len, k_len),
                               rtol=6e-8, atol=6e-8)


@pytest.mark.parametrize("kind", ["log", "power"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradcheck(kind, seed):
    g = torch.Generator().manual_seed(seed)
    r1 = (torch.rand(4, generator=g, dtype=torch.float64) * 2 + 0.05).requires_grad_()
    # r2 strictly inside (0, 2): the power kernel's bound is not differentiable from both sides.
    r2 = (torch.rand(4, generator=g, dtype=torch.float64) * 1.5 + 0.05).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: posenc.kerple_offset_bias(a, b, 5, 8, kind=kind), (r1, r2))
    # Non-contiguous parameters (every other element of a longer vector).
    wide1 = torch.stack([r1.detach(), r1.detach()], 1).flatten().requires_grad_()
    wide2 = torch.stack([r2.detach(), r2.detach()], 1).flatten().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: posenc.kerple_offset_bias(a[::2], b[::2], 3, 4, kind=kind),
                                    (wide1, wide2))
    # Empty: no pair, no column, zero gradients.
    out = posenc.kerple_offset_bias(r1, r2, 0, 5, kind=kind)
    assert out.shape == (4, 0)
    out.sum().backward()
    assert torch.equal(r1.grad, torch.zeros(4, dtype=torch.float64))


@pytest.mark.parametrize("kind", ["log", "power"])
@pytest.mark.parametrize("causal", [False, True])
def test_module_matches_the_paper_and_attention_paths_agree(kind, causal):
    torch.manual_seed(0)
    m = pnn.KerpleBias(3, kind=kind, causal=causal).double()
    q_len, k_len = 4, 7
    rows = plain_rows(kind, m.r1.detach(), m.r2.detach(), q_len, k_len)
    want = torch.empty(3, q_len, k_len, dtype=torch.float64)
    for i in range(q_len):
        for j in range(k_len):
            d = j - (i + k_len - q_len)
            want[:, i, j] = -math.inf if causal and d > 0 else rows[:, d + k_len - 1]
    torch.testing.assert_close(m(q_len, k_len), want, rtol=4e-16, atol=4e-16)

    q = torch.randn(2, 3, q_len, 8, dtype=torch.float64)
    k, v = torch.randn(2, 3, k_len, 8, dtype=torch.float64), torch.randn(2, 3, k_len, 8, dtype=torch.float64)
    grads = []
    for path in ("fused", "composed"):
        m.zero_grad()
        out = posenc.attention(q, k, v, path=path, **m.attention_kwargs(q_len, k_len))
        out.sum().backward()
        grads.append((out.detach(), m.r1.grad.clone(), m.r2.grad.clone()))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)  # the same sums in another order, float64


def test_multihead_attention_by_name():
    decoder = pnn.MultiheadAttention(16, 4, encoding="kerple-power", causal=True)
    assert isinstance(decoder.bias, pnn.KerpleBias) and decoder.bias.kind == "power" and decoder.bias.causal
    out = decoder(torch.randn(2, 5, 16))
    out.sum().backward()
    assert decoder.bias.r1.grad is not None and decoder.bias.r2.grad.abs().sum() > 0


def test_initialisation_and_projection():
    torch.manual_seed(1)
    m = pnn.KerpleBias(64)
    assert 0.01 <= float(m.r1.min()) and float(m.r1.max()) <= 2 and float(m.r1.max()) > 1
    assert 0.01 <= float(m.r2.min()) and float(m.r2.max()) <= 1
    p = pnn.KerpleBias(2, kind="power", r1=0.5, r2=2.0)
    with torch.no_grad():
        p.r1[0] = -1.0
        p.r2[1] = 3.0
    p(3, 3)
    assert float(p.r1[0]) == pytest.approx(0.01) and float(p.r2[1]) == 2.0


@pytest.mark.parametrize("call, message", [
    (lambda: pnn.KerpleBias(2, r1=0.0), "[KerpleBias] r1 must be > 0, got 0"),
    (lambda: pnn.KerpleBias(2, kind="power", r2=3.0), "[KerpleBias] r2 must be in (0, 2], got 3"),
    (lambda: pnn.KerpleBias(2, kind="cosine"), "[KerpleBias] kind must be 'log' or 'power', got 'cosine'"),
    (lambda: posenc.kerple_offset_bias(torch.zeros(2), torch.ones(2), 2, 2),
     "[kerple_offset_bias] r1 must be > 0, got 0 (head 0)"),
    (lambda: posenc.kerple_offset_bias(torch.ones(2), torch.full((2,), 2.5), 2, 2, kind="power"),
     "[kerple_offset_bias] r2 must be <= 2, got 2.5 (head 0)"),
    (lambda: posenc.kerple_offset_bias(torch.ones(2), torch.ones(2), 2, 2, kind="cosine"),
     '[kerple_offset_bias] kind must be "log" or "power", got "cosine"'),
])
def test_errors(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).splitlines()[0] == message
