"""Gradients of posenc.attention (the composed path, also as chosen by
path="auto"): torch.autograd.gradcheck and gradgradcheck in float64 with
respect to q, k, v and every table (ALiBi slopes, T5 table, Shaw rel_k /
rel_v, Transformer-XL u / v, 2D tables, dense bias), with causal and padding
masks (a fully masked row included: its gradient is 0, not NaN), over
several seeds, contiguous and strided inputs, and empty inputs."""

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import posenc


def randn(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def leaf(t):
    return t.detach().requires_grad_()


def bhtd(b, h, t, d, seed, contiguous):
    """(B, H, T, D): contiguous, or a transposed (B, T, H, D) projection."""
    return leaf(randn((b, h, t, d), seed) if contiguous else randn((b, t, h, d), seed).transpose(1, 2))


# Small sizes, so that gradgradcheck stays quick: B=2, H=2, Tq=3, Tk=4 (Tq = Tk = 4 for 2D), Dh=4, Dv=3.
# (id, sizes, keyword arguments: name -> tensor (differentiated) or a plain value)
MASK = torch.tensor([[False, True, False, False], [True, True, True, True]])  # batch 1: every key padded
GRAD_CASES = [
    ("masks", (2, 2, 3, 4, 4, 3), lambda s: {"causal": True, "key_padding_mask": MASK}),
    ("causal-dead-row", (2, 2, 4, 4, 4, 3),
     lambda s: {"causal": True, "key_padding_mask": torch.tensor([[True, False, False, False]] * 2)}),
    ("alibi", (2, 2, 3, 4, 4, 3), lambda s: {"alibi_slopes": leaf(randn((2,), s).abs() + 0.1), "causal": True}),
    ("t5", (1, 2, 4, 4, 4, 3),
     lambda s: {"t5_table": leaf(randn((8, 2), s)), "t5_num_buckets": 8, "t5_max_distance": 6,
                "key_padding_mask": MASK[:1]}),
    ("shaw-shared", (2, 2, 3, 4, 4, 3),
     lambda s: {"rel_k": leaf(randn((3, 4), s)), "rel_v": leaf(randn((3, 3), s + 1)), "max_distance": 1,
                "key_padding_mask": MASK}),
    ("shaw-per-head", (1, 2, 3, 4, 4, 3),
     lambda s: {"rel_k": leaf(randn((2, 5, 4), s)), "rel_v": leaf(randn((2, 5, 3), s + 1)), "causal": True}),
    ("xl", (1, 2, 3, 4, 4, 3),
     lambda s: {"rel_k": leaf(randn((7, 4), s)), "xl_u": leaf(randn((2, 4), s + 1)),
                "xl_v": leaf(randn((2, 4), s + 2)), "causal": True}),
    ("rel2d", (1, 2, 4, 4, 4, 3),
     lambda s: {"rel_2d": (leaf(randn((3, 4), s)), leaf(randn((2, 3, 4), s + 1)), 2, 2)}),
    ("bias", (2, 2, 3, 4, 4, 3), lambda s: {"bias": leaf(randn((2, 3, 4), s)), "key_padding_mask": MASK}),
    ("rope", (1, 2, 3, 4, 4, 3), lambda s: {"rope": {}, "causal": True}),
    ("all", (1, 2, 3, 4, 4, 3),
     lambda s: {"causal": True, "key_padding_mask": MASK[:1], "alibi_slopes": leaf(randn((2,), s).abs()),
                "t5_table": leaf(randn((8, 2), s + 1)), "t5_num_buckets": 8, "t5_max_distance": 6,
                "rel_k": leaf(randn((2, 3, 4), s + 2)), "rel_v": leaf(randn((3, 3), s + 3)), "max_distance": 1,
                "xl_u": leaf(randn((2, 4), s + 4)), "xl_v": leaf(randn((2, 4), s + 5)),
                "bias": leaf(randn((1, 1, 3, 4), s + 6)), "rope": {}}),
]


def differentiated(kwargs):
    """(names, tensors) of the keyword tensors that require grad, rel_2d's tables included."""
    names, tensors = [], []
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor) and value.requires_grad:
            names.append(key)
            tensors.append(value)
        elif key == "rel_2d":
            names += ["rel_2d_h", "rel_2d_w"]
            tensors += [value[0], value[1]]
    return names, tensors


def as_function(kwargs, names, path):
    """f(q, k, v, *tables) -> out, the tables put back where they came from."""
    def f(q, k, v, *tables):
        args = dict(kwargs)
        for name, t in zip(names, tables):
            if name == "rel_2d_h":
                args["rel_2d"] = (t,) + tuple(args["rel_2d"][1:])
            elif name == "rel_2d_w":
                args["rel_2d"] = args["rel_2d"][:1] + (t,) + tuple(args["rel_2d"][2:])
            else:
                args[name] = t
        return posenc.attention(q, k, v, path=path, **args)
    return f


# Three seeds, the last with strided q, k, v (kept to three: gradgradcheck dominates the suite's time).
@pytest.mark.parametrize("seed, contiguous", [(0, True), (1, True), (2, False)],
                         ids=["seed0", "seed1", "seed2-strided"])
@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck_and_gradgradcheck(case, seed, contiguous):
    _, (b, h, tq, tk, dh, dv), make = case
    q, k, v = bhtd(b, h, tq, dh, seed, contiguous), bhtd(b, h, tk, dh, seed + 10, contiguous), \
        bhtd(b, h, tk, dv, seed + 20, contiguous)
    kwargs = make(seed + 30)
    names, tables = differentiated(kwargs)
    f = as_function(kwargs, names, "composed")
    inputs = (q, k, v, *tables)
    assert gradcheck(f, inputs)
    assert gradgradcheck(f, inputs)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_auto_path_gives_the_composed_gradient(case):
    _, (b, h, tq, tk, dh, dv), make = case
    q, k, v = bhtd(b, h, tq, dh, 3, True), bhtd(b, h, tk, dh, 4, True), bhtd(b, h, tk, dv, 5, True)
    kwargs = make(6)
    names, tables = differentiated(kwargs)
    inputs = (q, k, v, *tables)
    grad_out = randn((b, h, tq, dv), 7)
    grads = {}
    for path in ["composed", "auto"]:
        out = as_function(kwargs, names, path)(*inputs)
        grads[path] = torch.autograd.grad(out, inputs, grad_out)
    for a, c in zip(grads["composed"], grads["auto"]):
        assert torch.equal(a, c)
        assert torch.isfinite(a).all()


@pytest.mark.parametrize("sizes", [(0, 2, 3, 3, 2, 2), (1, 2, 0, 3, 2, 2), (1, 2, 3, 0, 2, 2)],
                         ids=["no-batch", "no-queries", "no-keys"])
def test_gradcheck_empty(sizes):
    b, h, tq, tk, dh, dv = sizes
    q, k, v = bhtd(b, h, tq, dh, 0, True), bhtd(b, h, tk, dh, 1, True), bhtd(b, h, tk, dv, 2, True)
    rel_k, rel_v = leaf(randn((3, dh), 3)), leaf(randn((3, dv), 4))
    f = as_function({"rel_k": rel_k, "rel_v": rel_v, "causal": tq <= tk}, ["rel_k", "rel_v"], "composed")
    assert gradcheck(f, (q, k, v, rel_k, rel_v))


def test_fully_masked_rows_have_zero_gradient():
    q, k, v = bhtd(2, 2, 3, 4, 0, True), bhtd(2, 2, 4, 4, 1, True), bhtd(2, 2, 4, 3, 2, True)
    out = posenc.attention(q, k, v, key_padding_mask=MASK)
    out.sum().backward()
    assert torch.all(q.grad[1] == 0) and torch.all(k.grad[1] == 0) and torch.all(v.grad[1] == 0)
    assert torch.isfinite(q.grad).all() and q.grad[0].abs().sum() > 0
