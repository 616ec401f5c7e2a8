"""Gradients of posenc.attention on both paths: torch.autograd.gradcheck in
float64 (finite differences, the independent reference) with respect to q, k,
v and every table (ALiBi slopes, T5 table, Shaw rel_k / rel_v,
Transformer-XL u / v, 2D tables, dense bias), with causal and padding masks
(a fully masked row included: its gradient is 0, not NaN), over several
seeds, contiguous and strided inputs, and empty inputs; gradgradcheck on the
composed path (the fused backward is not differentiable again). The fused
backward (the default path) against the composed one at sizes that cross
its query and key tiles, in float64 and float32."""

import re

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


@pytest.mark.parametrize("seed, contiguous", [(0, True), (2, False)], ids=["seed0", "seed2-strided"])
@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_fused_gradcheck(case, seed, contiguous):
    _, (b, h, tq, tk, dh, dv), make = case
    q, k, v = bhtd(b, h, tq, dh, seed, contiguous), bhtd(b, h, tk, dh, seed + 10, contiguous), \
        bhtd(b, h, tk, dv, seed + 20, contiguous)
    kwargs = make(seed + 30)
    names, tables = differentiated(kwargs)
    assert gradcheck(as_function(kwargs, names, "fused"), (q, k, v, *tables))


def gradients(kwargs, names, inputs, path, grad_out):
    out = as_function(kwargs, names, path)(*inputs)
    return torch.autograd.grad(out, inputs, grad_out)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_auto_path_gives_the_fused_gradient_and_it_is_the_composed_one(case):
    _, (b, h, tq, tk, dh, dv), make = case
    q, k, v = bhtd(b, h, tq, dh, 3, True), bhtd(b, h, tk, dh, 4, True), bhtd(b, h, tk, dv, 5, True)
    kwargs = make(6)
    names, tables = differentiated(kwargs)
    inputs = (q, k, v, *tables)
    grad_out = randn((b, h, tq, dv), 7)
    grads = {path: gradients(kwargs, names, inputs, path, grad_out) for path in ["composed", "fused", "auto"]}
    for composed, fused, auto in zip(grads["composed"], grads["fused"], grads["auto"]):
        assert torch.equal(auto, fused)
        assert torch.isfinite(fused).all()
        torch.testing.assert_close(fused, composed, rtol=0, atol=1e-12)


# Sizes that cross the backward's tiles (48 queries, 64 keys) with partial tiles at the ends,
# Tq != Tk, and relative tables both short (K = 3: most pairs clipped) and longer than any offset.
TILE_CASES = [
    ("plain", (2, 3, 70, 150, 20, 12), lambda s: {}),
    ("causal-shaw-clipped", (1, 2, 100, 130, 16, 24),
     lambda s: {"causal": True, "rel_k": leaf(randn((2, 7, 16), s)), "rel_v": leaf(randn((7, 24), s + 1))}),
    ("xl-long-table", (1, 2, 97, 97, 8, 8),
     lambda s: {"rel_k": leaf(randn((2 * 120 + 1, 8), s)), "xl_u": leaf(randn((2, 8), s + 1)),
                "xl_v": leaf(randn((2, 8), s + 2)), "causal": True}),
    ("alibi-t5-padding", (2, 2, 66, 129, 8, 8),
     lambda s: {"alibi_slopes": leaf(randn((2,), s).abs()), "t5_table": leaf(randn((32, 2), s + 1)),
                "key_padding_mask": torch.rand(2, 129, generator=torch.Generator().manual_seed(s)) < 0.3}),
    ("rel2d-bias", (1, 2, 99, 99, 8, 8),
     lambda s: {"rel_2d": (leaf(randn((17, 8), s)), leaf(randn((2, 21, 8), s + 1)), 9, 11),
                "bias": leaf(randn((2, 99, 1), s + 2))}),
]


@pytest.mark.parametrize("case", TILE_CASES, ids=[c[0] for c in TILE_CASES])
def test_fused_gradient_across_tiles(case):
    _, (b, h, tq, tk, dh, dv), make = case
    q, k, v = bhtd(b, h, tq, dh, 1, False), bhtd(b, h, tk, dh, 2, True), bhtd(b, h, tk, dv, 3, False)
    kwargs = make(4)
    names, tables = differentiated(kwargs)
    inputs = (q, k, v, *tables)
    grad_out = randn((b, h, tq, dv), 5)
    composed = gradients(kwargs, names, inputs, "composed", grad_out)
    fused = gradients(kwargs, names, inputs, "fused", grad_out)
    for name, c, f in zip(["q", "k", "v", *names], composed, fused):
        assert c.abs().sum() > 0, name
        torch.testing.assert_close(f, c, rtol=0, atol=1e-11, msg=name)
    # float32: the same inputs rounded; the fused path runs in float32, the reference in float64.
    inputs32 = tuple(leaf(t.detach().float()) for t in inputs)
    kwargs32 = {key: (leaf(val.detach().float()) if isinstance(val, torch.Tensor) and val.requires_grad else val)
                for key, val in kwargs.items()}
    if "rel_2d" in kwargs:
        h2d, w2d, height, width = kwargs["rel_2d"]
        kwargs32["rel_2d"] = (inputs32[3], inputs32[4], height, width)
    for key, t in zip(names, inputs32[3:]):
        if key in kwargs32:
            kwargs32[key] = t
    fused32 = gradients(kwargs32, names, inputs32, "fused", grad_out.float())
    composed64 = gradients(kwargs, names, inputs, "composed", grad_out)
    for name, c, f in zip(["q", "k", "v", *names], composed64, fused32):
        scale = c.abs().max().item()
        assert (f.double() - c).abs().max().item() <= 2e-5 * max(scale, 1.0), name


def test_fused_backward_is_deterministic_and_independent_of_the_thread_count():
    q, k, v = bhtd(2, 3, 70, 16, 0, True), bhtd(2, 3, 90, 16, 1, True), bhtd(2, 3, 90, 16, 2, True)
    rel_k, xl_u = leaf(randn((9, 16), 3)), leaf(randn((3, 16), 5))  # a table shared by the heads, a shift per head
    grad_out = randn((2, 3, 70, 16), 4)
    kwargs = {"rel_k": rel_k, "xl_u": xl_u, "alibi_slopes": leaf(randn((3,), 6).abs())}
    names, tables = differentiated(kwargs)
    threads = torch.get_num_threads()
    runs = []
    try:
        for n in [1, 2, 2]:
            torch.set_num_threads(n)
            runs.append(gradients(kwargs, names, (q, k, v, *tables), "fused", grad_out))
    finally:
        torch.set_num_threads(threads)
    for one, two, again in zip(*runs):
        assert torch.equal(one, two) and torch.equal(two, again)


def test_fused_backward_refuses_create_graph_and_its_weights_carry_no_gradient():
    q, k, v = bhtd(1, 2, 3, 4, 0, True), bhtd(1, 2, 4, 4, 1, True), bhtd(1, 2, 4, 3, 2, True)
    out = posenc.attention(q, k, v, path="fused")
    message = ("[attention] the fused backward has no backward of its own (create_graph); use path='composed' "
               "for higher derivatives")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        torch.autograd.grad(out.sum(), q, create_graph=True)
    _, weights = posenc.attention(q, k, v, path="fused", return_weights=True)
    assert not weights.requires_grad
    _, weights = posenc.attention(q, k, v, return_weights=True)  # auto: the composed path gives them a gradient
    assert weights.requires_grad


def test_grid_bias_gradient_of_the_fused_op():
    # The 2D bias row (2D ALiBi, 2D T5) reaches the fused op only from modules: gradcheck it there.
    q, k, v = bhtd(1, 2, 6, 4, 0, True), bhtd(1, 2, 6, 4, 1, True), bhtd(1, 2, 6, 3, 2, True)
    grid_bias = leaf(randn((2, 3, 5), 3))
    bias = leaf(randn((2, 6, 6), 4))

    def f(q, k, v, grid_bias, bias):
        spec = torch.classes.posenc.TermSpec().grid_rows(2, 3).dense_bias()
        return torch.ops.posenc.attention_fused(q, k, v, [grid_bias, bias], spec)[0]
    assert gradcheck(f, (q, k, v, grid_bias, bias))


@pytest.mark.parametrize("path", ["composed", "fused"])
@pytest.mark.parametrize("sizes", [(0, 2, 3, 3, 2, 2), (1, 2, 0, 3, 2, 2), (1, 2, 3, 0, 2, 2)],
                         ids=["no-batch", "no-queries", "no-keys"])
def test_gradcheck_empty(sizes, path):
    b, h, tq, tk, dh, dv = sizes
    q, k, v = bhtd(b, h, tq, dh, 0, True), bhtd(b, h, tk, dh, 1, True), bhtd(b, h, tk, dv, 2, True)
    rel_k, rel_v = leaf(randn((3, dh), 3)), leaf(randn((3, dv), 4))
    f = as_function({"rel_k": rel_k, "rel_v": rel_v, "causal": tq <= tk}, ["rel_k", "rel_v"], path)
    assert gradcheck(f, (q, k, v, rel_k, rel_v))


def test_fully_masked_rows_have_zero_gradient():
    q, k, v = bhtd(2, 2, 3, 4, 0, True), bhtd(2, 2, 4, 4, 1, True), bhtd(2, 2, 4, 3, 2, True)
    out = posenc.attention(q, k, v, key_padding_mask=MASK)
    out.sum().backward()
    assert torch.all(q.grad[1] == 0) and torch.all(k.grad[1] == 0) and torch.all(v.grad[1] == 0)
    assert torch.isfinite(q.grad).all() and q.grad[0].abs().sum() > 0
