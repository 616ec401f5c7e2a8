"""Gradients of the relative-vector ops: torch.autograd.gradcheck and
gradgradcheck in float64 over several seeds, shared and per-head tables,
contiguous and strided inputs, empty inputs; the backward formulas of
kernels/relative.h stated as properties; 16-bit gradients against float64."""

import numpy as np
import pytest
import torch

import posenc
import relative_references as ref

ops = torch.ops.posenc
SEEDS = [0, 1, 2]


def leaf(t):
    return t.detach().requires_grad_()


def randn(shape, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def bhtd(b, heads, t, d, seed, contiguous):
    """(B, H, T, D): contiguous, or a transposed (B, T, H, D) projection."""
    if contiguous:
        return leaf(randn((b, heads, t, d), seed))
    return leaf(randn((b, t, heads, d), seed).transpose(1, 2))


def bhqk(b, heads, tq, tk, seed, contiguous):
    """(B, H, Tq, Tk): contiguous, or a transpose (column stride Tq)."""
    if contiguous:
        return leaf(randn((b, heads, tq, tk), seed))
    return leaf(randn((b, heads, tk, tq), seed).transpose(-1, -2))


def table(k, d, heads, per_head, seed, contiguous):
    shape = (heads, 2 * k + 1, d) if per_head else (2 * k + 1, d)
    t = randn(shape, seed)
    return leaf(t if contiguous else t.transpose(-1, -2).contiguous().transpose(-1, -2))


# (id, B, H, Tq, Tk, D, k, query_offset): small, so that gradgradcheck stays quick.
SHAPES = [
    ("shaw", 2, 2, 4, 4, 3, 1, 0),
    ("xl-memory", 1, 2, 3, 5, 2, 6, 2),      # k >= every offset, Tk > Tq
    ("more-queries", 1, 1, 5, 3, 2, 2, -1),
    ("empty-batch", 0, 2, 3, 3, 2, 1, 0),
    ("empty-keys", 1, 2, 3, 0, 2, 1, 0),
]
SHAPE_IDS = [s[0] for s in SHAPES]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("per_head", [False, True], ids=["shared", "per-head"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
def test_relative_logits_gradcheck(seed, shape, per_head, contiguous):
    _, b, heads, tq, tk, d, k, offset = shape
    q = bhtd(b, heads, tq, d, seed, contiguous)
    t = table(k, d, heads, per_head, seed + 10, contiguous)
    fn = lambda q, t: posenc.relative_logits(q, t, k, k_len=tk, query_offset=offset)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, t))
    assert torch.autograd.gradgradcheck(fn, (q, t))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("per_head", [False, True], ids=["shared", "per-head"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
def test_relative_values_gradcheck(seed, shape, per_head, contiguous):
    _, b, heads, tq, tk, d, k, offset = shape
    p = bhqk(b, heads, tq, tk, seed, contiguous)
    t = table(k, d, heads, per_head, seed + 10, contiguous)
    fn = lambda p, t: posenc.relative_values(p, t, k, query_offset=offset)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (p, t))
    assert torch.autograd.gradgradcheck(fn, (p, t))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("shared", [True, False], ids=["tables-1", "tables-H"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
def test_relative_table_grad_gradcheck(seed, shape, shared, contiguous):
    _, b, heads, tq, tk, d, k, offset = shape
    w = bhqk(b, heads, tq, tk, seed, contiguous)
    x = bhtd(b, heads, tq, d, seed + 10, contiguous)
    tables = 1 if shared else heads
    fn = lambda w, x: ops.relative_table_grad(w, x, k, tables, offset)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (w, x))
    assert torch.autograd.gradgradcheck(fn, (w, x))


GRIDS = [(2, 3), (1, 4), (3, 1), (1, 1)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("height,width", GRIDS, ids=[f"{h}x{w}" for h, w in GRIDS])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
def test_relative_2d_expand_reduce_gradcheck(seed, height, width, contiguous):
    cells = height * width
    rel_h = bhqk(2, 2, cells, 2 * height - 1, seed, contiguous)
    rel_w = bhqk(2, 2, cells, 2 * width - 1, seed + 10, contiguous)
    expand = lambda a, b: ops.relative_2d_expand(a, b, height, width)  # noqa: E731
    assert torch.autograd.gradcheck(expand, (rel_h, rel_w))
    assert torch.autograd.gradgradcheck(expand, (rel_h, rel_w))
    g = bhqk(2, 2, cells, cells, seed + 20, contiguous)
    reduce = lambda g: ops.relative_2d_reduce(g, height, width)  # noqa: E731
    assert torch.autograd.gradcheck(reduce, (g,))
    assert torch.autograd.gradgradcheck(reduce, (g,))


def test_relative_2d_reduce_one_output_used():
    # The other output's gradient is zero: backward gets both (materialized), expand needs both.
    g = leaf(randn((1, 1, 6, 6), 0))
    rel_h, _ = ops.relative_2d_reduce(g, 2, 3)
    rel_h.sum().backward()
    expected = ref.relative_2d_expand(np.ones((1, 1, 6, 3)), np.zeros((1, 1, 6, 5)), 2, 3)
    np.testing.assert_array_equal(g.grad.numpy(), expected)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("height,width", GRIDS, ids=[f"{h}x{w}" for h, w in GRIDS])
@pytest.mark.parametrize("per_head", [False, True], ids=["shared", "per-head"])
def test_relative_logits_2d_gradcheck(seed, height, width, per_head):
    heads, d = 2, 3
    q = bhtd(1, heads, height * width, d, seed, contiguous=seed % 2 == 0)
    th = table(height - 1, d, heads, per_head, seed + 10, contiguous=True)
    tw = table(width - 1, d, heads, per_head, seed + 20, contiguous=seed % 2 == 1)
    fn = lambda q, th, tw: posenc.relative_logits_2d(q, th, tw, height, width)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, th, tw))
    assert torch.autograd.gradgradcheck(fn, (q, th, tw))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [0, 3])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_sinusoidal_relative_table_gradcheck(seed, k, layout):
    g = torch.Generator().manual_seed(seed)
    omega = leaf(torch.rand(3, generator=g, dtype=torch.float64))
    fn = lambda w: posenc.sinusoidal_relative_table(k, 6, omega=w, layout=layout)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (omega,))


# The backward formulas of kernels/relative.h, as properties against the float64 references.


def test_logits_backward_is_values_and_table_grad():
    b, heads, tq, tk, d, k, offset = 2, 3, 5, 7, 4, 2, 1
    q, t = leaf(randn((b, heads, tq, d), 0)), leaf(randn((heads, 2 * k + 1, d), 1))
    g = randn((b, heads, tq, tk), 2)
    posenc.relative_logits(q, t, k, k_len=tk, query_offset=offset).backward(g)
    # dq = values(g, T), dT = table_grad(g, q): 1e-12, float64 sums of a few terms.
    np.testing.assert_allclose(q.grad.numpy(), ref.relative_values(g, t, k, offset), rtol=0, atol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), ref.relative_table_grad(g, q, k, heads, offset), rtol=0, atol=1e-12)


def test_values_backward_is_logits_and_table_grad_shared_table_stays_2d():
    b, heads, tq, tk, d, k = 2, 3, 4, 6, 5, 3
    p, t = leaf(randn((b, heads, tq, tk), 0)), leaf(randn((2 * k + 1, d), 1))
    g = randn((b, heads, tq, d), 2)
    posenc.relative_values(p, t, k).backward(g)
    assert t.grad.shape == (2 * k + 1, d)
    np.testing.assert_allclose(p.grad.numpy(), ref.relative_logits(g, t, k, tk), rtol=0, atol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), ref.relative_table_grad(p, g, k, 1)[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype,rel", [
    (torch.bfloat16, 2.0 ** -8),  # one round-to-nearest to bfloat16's 8-bit significand
    (torch.float16, 2.0 ** -11),  # one round-to-nearest to float16's 11-bit significand
])
def test_low_precision_gradients(dtype, rel):
    # Against the float64 formulas on the same (rounded) inputs: the gradients are float32 sums
    # (within n 2^-24 sum |terms|, n <= Tq Tk) rounded once to the dtype.
    b, heads, tq, d, k = 1, 2, 8, 16, 3
    q, t = leaf(randn((b, heads, tq, d), 0, dtype)), leaf(randn((2 * k + 1, d), 1, dtype))
    g = randn((b, heads, tq, tq), 2, dtype)
    posenc.relative_logits(q, t, k).backward(g)
    assert q.grad.dtype == dtype and t.grad.dtype == dtype
    n = tq * tq
    for low, exact, magnitude in (
            (q.grad, ref.relative_values(g, t, k), ref.relative_values(g.abs(), t.abs(), k)),
            (t.grad, ref.relative_table_grad(g, q, k, 1)[0], ref.relative_table_grad(g.abs(), q.abs(), k, 1)[0])):
        bound = rel * np.abs(exact) + (1 + rel) * (n + 1) * 2.0 ** -24 * magnitude
        assert np.all(np.abs(low.to(torch.float64).numpy() - exact) <= bound)


@pytest.mark.parametrize("which", [0, 1], ids=["first-only", "second-only"])
@pytest.mark.parametrize("op", ["logits", "values", "table_grad"])
def test_one_input_requires_grad(op, which):
    # A fixed table (NEZHA) with learned q, or fixed probabilities with a learned table: each
    # backward keeps only the input the other's gradient needs, so both ways must still work.
    k, tk = 2, 6
    a = randn((2, 3, 5, 4 if op == "logits" else tk), 0)
    b = randn((3, 2 * k + 1, 4), 1) if op != "table_grad" else randn((2, 3, 5, 4), 1)
    fn = {
        "logits": lambda a, b: posenc.relative_logits(a, b, k, k_len=tk, query_offset=1),
        "values": lambda a, b: posenc.relative_values(a, b, k, query_offset=1),
        "table_grad": lambda a, b: ops.relative_table_grad(a, b, k, 3, 1),
    }[op]
    inputs = [a, b]
    inputs[which] = leaf(inputs[which])
    assert torch.autograd.gradcheck(fn, tuple(inputs))
    assert torch.autograd.gradgradcheck(fn, tuple(inputs))
