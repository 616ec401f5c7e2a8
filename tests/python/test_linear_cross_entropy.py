"""posenc.nn.functional.linear_cross_entropy: value and gradients against the cross-entropy written plainly
in float64 loops and against F.cross_entropy(F.linear(...)) (ignored rows, both reductions, leading
dimensions, every chunking), gradcheck, the grad-mode rules and the refusals word for word."""

import math

import pytest
import torch
import torch.nn.functional as F

import posenc.nn as pnn
from posenc.nn.functional import linear_cross_entropy


def make(n, d, v, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=g, dtype=dtype, requires_grad=True)
    weight = (torch.randn(v, d, generator=g, dtype=dtype) * 0.5).requires_grad_(True)
    bias = torch.randn(v, generator=g, dtype=dtype, requires_grad=True)
    target = torch.randint(0, v, (n,), generator=g)
    return hidden, weight, bias, target


def plain_loss(hidden, weight, bias, target, ignore_index=-100, reduction="mean"):
    """The loss as the formula reads, one row and one logit at a time, in float64."""
    total, count = 0.0, 0
    for i in range(hidden.shape[0]):
        t = int(target[i])
        if t == ignore_index:
            continue
        z = [float(bias[j]) + sum(float(hidden[i, k]) * float(weight[j, k]) for k in range(hidden.shape[1]))
             for j in range(weight.shape[0])]
        m = max(z)
        total += m + math.log(sum(math.exp(x - m) for x in z)) - z[t]
        count += 1
    if reduction == "sum":
        return total
    return total / count if count else math.nan


@pytest.mark.parametrize("chunk_rows", [0, 1, 3, 100])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_equals_the_plain_formula(chunk_rows, reduction):
    hidden, weight, bias, target = make(7, 5, 11, seed=1)
    target[2] = -100
    got = linear_cross_entropy(hidden, weight, target, bias, reduction=reduction, chunk_rows=chunk_rows)
    # 1e-13: a handful of roundings on terms of order 1.
    assert abs(got.item() - plain_loss(hidden.detach(), weight.detach(), bias.detach(), target,
                                       reduction=reduction)) < 1e-13


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_gradients_equal_linear_then_cross_entropy(reduction, ignore_index):
    hidden, weight, bias, target = make(12, 6, 9, seed=2)
    target[::4] = ignore_index
    hidden3 = hidden.detach().view(3, 4, 6).requires_grad_(True)
    got = linear_cross_entropy(hidden3, weight, target.view(3, 4), bias, ignore_index=ignore_index,
                               reduction=reduction, chunk_rows=5)
    ref_args = [t.detach().clone().requires_grad_(True) for t in (hidden3, weight, bias)]
    want = F.cross_entropy(F.linear(ref_args[0], ref_args[1], ref_args[2]).reshape(12, 9), target,
                           ignore_index=ignore_index, reduction=reduction)
    (got * 1.7).backward()
    (want * 1.7).backward()
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
    for mine, theirs in zip((hidden3, weight, bias), ref_args):
        assert mine.grad.shape == theirs.grad.shape
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-13, atol=1e-14)


def test_float32_equals_torch_and_leaves_out_the_logits():
    hidden, weight, bias, target = make(300, 64, 1000, dtype=torch.float32, seed=3)
    got = linear_cross_entropy(hidden, weight, target, bias)
    ref = [t.detach().clone().requires_grad_(True) for t in (hidden, weight, bias)]
    want = F.cross_entropy(F.linear(*ref), target)
    got.backward()
    want.backward()
    # float32 sums over 1000 logits in another order.
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    for mine, theirs in zip((hidden, weight, bias), ref):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=0, atol=1e-5 * theirs.grad.abs().max().item())


@pytest.mark.parametrize("with_bias", [True, False])
def test_gradcheck(with_bias):
    hidden, weight, bias, target = make(5, 3, 7, seed=4)
    target[1] = -100
    args = (hidden, weight, bias) if with_bias else (hidden, weight)

    def f(h, w, b=None):
        return linear_cross_entropy(h, w, target, b, chunk_rows=2)

    assert torch.autograd.gradcheck(f, args)


def test_no_counted_row_is_nan_for_the_mean_and_zero_for_the_sum():
    hidden, weight, bias, target = make(3, 4, 5, seed=5)
    target.fill_(-100)
    mean = linear_cross_entropy(hidden, weight, target, bias)
    assert math.isnan(mean.item())
    mean.backward()
    assert hidden.grad.abs().max() == 0 and weight.grad.abs().max() == 0
    assert linear_cross_entropy(hidden, weight, target, bias, reduction="sum").item() == 0.0


def test_grad_mode_rules():
    hidden, weight, bias, target = make(4, 3, 6, seed=6)
    with torch.no_grad():
        assert linear_cross_entropy(hidden, weight, target, bias).grad_fn is None
    hidden.requires_grad_(False)
    linear_cross_entropy(hidden, weight, target).backward()
    assert hidden.grad is None and bias.grad is None and weight.grad is not None
    # Its gradient is formed with the loss: a second derivative is refused, not silently 0.
    hidden.requires_grad_(True)
    loss = linear_cross_entropy(hidden, weight, target, bias)
    with pytest.raises(RuntimeError, match=r"\[linear_cross_entropy\] has no double backward"):
        torch.autograd.grad(loss, hidden, create_graph=True)


def test_reexported_from_posenc_nn():
    assert pnn.functional.linear_cross_entropy is linear_cross_entropy


REFUSALS = [
    (dict(target=torch.full((4,), 6)), ValueError,
     "[linear_cross_entropy] targets must be in [0, 6) or ignore_index (-100), got 6"),
    (dict(target=torch.zeros(3, dtype=torch.long)), ValueError,
     "[linear_cross_entropy] targets must be on the CPU with hidden's leading shape (4), got (3) on cpu"),
    (dict(target=torch.zeros(4, dtype=torch.int32)), TypeError,
     "[linear_cross_entropy] targets must be int64, got Int"),
    (dict(weight=torch.zeros(6, 2, dtype=torch.float64)), ValueError,
     "[linear_cross_entropy] weight must be (V, D) = (V, 3) with V >= 1, got (6, 2)"),
    (dict(weight=torch.zeros(6, 3)), TypeError,
     "[linear_cross_entropy] weight must have hidden's dtype float64, got float32"),
    (dict(bias=torch.zeros(5, dtype=torch.float64)), ValueError,
     "[linear_cross_entropy] bias must be (V) = (6), got (5)"),
    (dict(input=torch.zeros(4, 3, dtype=torch.float16)), TypeError,
     "[linear_cross_entropy] hidden must be float32 or float64, got float16"),
    (dict(reduction="none"), ValueError,
     "[linear_cross_entropy] reduction must be \"mean\" or \"sum\" (the gradient is formed with the loss; "
     "per-row losses need the logits: cross_entropy(linear(...))), got \"none\""),
    (dict(chunk_rows=-1), ValueError,
     "[linear_cross_entropy] chunk_rows must be >= 0 (0: max(256, 2^20 / V) rows), got -1"),
]


@pytest.mark.parametrize("change, error, message", REFUSALS)
def test_refusals(change, error, message):
    hidden, weight, bias, target = make(4, 3, 6, seed=7)
    args = dict(input=hidden, weight=weight, target=target, bias=bias)
    args.update(change)
    with pytest.raises(error) as raised:
        linear_cross_entropy(**args)
    assert str(raised.value).splitlines()[0] == message
