"""posenc.attention's terms by point (offset_bias, grid_bias, fire): each equals the same bias handed over as a
dense tensor, in the output and in every gradient (q, k, v and the term's own tensors), on the fused and the
composed paths; and the modules that produce them (KerpleBias, DynamicPositionBias, ContinuousPositionBias2d,
FireBias) hand over only those rows, never an [H, Tq, Tk] tensor."""

import pytest
import torch

import posenc
import posenc.nn as pnn


def _qkv(q_len, k_len, heads=3, dh=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, heads, t, dh, generator=g, dtype=torch.float64, requires_grad=True)
            for t in (q_len, k_len, k_len)]


def _dense_from_rows(rows, q_len, k_len):
    """Rows [H, Tq + Tk - 1] read at d + Tk - 1, d = j - i', i' = i + Tk - Tq, written out plainly."""
    out = torch.empty(rows.shape[0], q_len, k_len, dtype=rows.dtype)
    for i in range(q_len):
        for j in range(k_len):
            out[:, i, j] = rows[:, j - (i + k_len - q_len) + k_len - 1]
    return out


def _grads(y, tensors):
    torch.manual_seed(1)
    return torch.autograd.grad(y, tensors, torch.randn_like(y), allow_unused=False)


@pytest.mark.parametrize("path", ["fused", "composed"])
@pytest.mark.parametrize("causal, q_len, k_len", [(False, 5, 5), (True, 5, 5), (True, 3, 7), (False, 4, 6)])
def test_offset_bias_is_the_dense_bias_of_its_rows(path, causal, q_len, k_len):
    q, k, v = _qkv(q_len, k_len)
    rows = torch.randn(3, q_len + k_len - 1, dtype=torch.float64, requires_grad=True)
    got = posenc.attention(q, k, v, causal=causal, offset_bias=rows, path=path)
    want = posenc.attention(q, k, v, causal=causal, bias=_dense_from_rows(rows, q_len, k_len), path="composed")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    for a, b in zip(_grads(got, [q, k, v, rows]), _grads(want, [q, k, v, rows])):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


def test_offset_bias_adds_to_alibi_rows():
    q, k, v = _qkv(6, 6)
    slopes = torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64)
    rows = torch.randn(3, 11, dtype=torch.float64)
    d = torch.arange(6).unsqueeze(0) - torch.arange(6).unsqueeze(1)
    alibi = -slopes.view(3, 1, 1) * d.abs()
    got = posenc.attention(q, k, v, alibi_slopes=slopes, offset_bias=rows)
    want = posenc.attention(q, k, v, bias=alibi + _dense_from_rows(rows, 6, 6), path="composed")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("path", ["fused", "composed"])
def test_grid_bias_is_the_dense_bias_of_its_grid(path):
    height, width = 2, 3
    cells = height * width
    q, k, v = _qkv(cells, cells)
    grid = torch.randn(3, 2 * height - 1, 2 * width - 1, dtype=torch.float64, requires_grad=True)
    y, x = torch.arange(cells) // width, torch.arange(cells) % width
    dense = grid[:, y.unsqueeze(0) - y.unsqueeze(1) + height - 1, x.unsqueeze(0) - x.unsqueeze(1) + width - 1]
    got = posenc.attention(q, k, v, grid_bias=grid, path=path)
    want = posenc.attention(q, k, v, bias=dense, path="composed")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    for a, b in zip(_grads(got, [q, k, v, grid]), _grads(want, [q, k, v, grid])):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


@pytest.mark.parametrize("path", ["fused", "composed"])
@pytest.mark.parametrize("q_len, k_len", [(6, 6), (3, 8)])
def test_fire_term_is_its_dense_bias(path, q_len, k_len):
    torch.manual_seed(3)
    m = pnn.FireBias(3, hidden=5, init_L=4.0).double()  # queries on both sides of L
    q, k, v = _qkv(q_len, k_len)
    params = list(m.parameters())
    got = posenc.attention(q, k, v, causal=True, fire=m.terms(), path=path)
    want = posenc.attention(q, k, v, causal=True, bias=torch.ops.posenc.fire_bias(*m.terms(), q_len, k_len),
                            path="composed")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    for a, b in zip(_grads(got, [q, k, v, *params]), _grads(want, [q, k, v, *params])):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_modules_hand_over_rows_not_dense_biases():
    assert set(pnn.KerpleBias(4).attention_kwargs(5, 5)) == {"offset_bias"}
    assert pnn.KerpleBias(4).attention_kwargs(5, 5)["offset_bias"].shape == (4, 9)
    assert pnn.DynamicPositionBias(4, 8, causal=True).attention_kwargs(3, 7)["offset_bias"].shape == (4, 9)
    assert pnn.ContinuousPositionBias2d(4, 2, 3).attention_kwargs(6, 6)["grid_bias"].shape == (4, 3, 5)
    fire = pnn.FireBias(4).attention_kwargs(5, 5)
    assert fire["causal"] and len(fire["fire"]) == 6


@pytest.mark.parametrize("kwargs, message", [
    ({"offset_bias": torch.zeros(3, 8, dtype=torch.float64)},
     "[attention] offset_bias must be [H, Tq + Tk - 1] = [3, 9], got [3, 8]"),
    ({"grid_bias": torch.zeros(3, 3, 4, dtype=torch.float64)},
     "[attention] grid_bias must be [H, 2*height-1, 2*width-1] with H = 3, got [3, 3, 4]"),
    ({"grid_bias": torch.zeros(3, 3, 3, dtype=torch.float64)},
     "[attention] grid_bias needs q_len = k_len = height*width = 4, got q_len 5 and k_len 5"),
    ({"fire": (torch.zeros(2),) * 3}, "[attention] fire must be a tuple (w1, b1, w2, b2, c, threshold), got 3 items"),
])
def test_bad_terms(kwargs, message):
    q, k, v = _qkv(5, 5)
    with pytest.raises(ValueError) as error:
        posenc.attention(q, k, v, **kwargs)
    assert str(error.value).split("\n")[0] == message
