"""Gradients of the differentiable ops, checked with torch.autograd.gradcheck
in float64 over several seeds, layouts, strides and empty inputs; plus the
low-precision tables and the refused double backward."""

import numpy as np
import pytest
import torch

import posenc
import references as ref

SEEDS = [0, 1, 2]


def omega_for(seed, half, contiguous):
    g = torch.Generator().manual_seed(seed)
    if contiguous:
        values = torch.rand(half, generator=g, dtype=torch.float64)
    else:
        values = torch.rand(half, 3, generator=g, dtype=torch.float64)[:, 1]  # stride 3
        assert not values.is_contiguous()
    return values.detach().requires_grad_()


POSITION_CASES = {
    "range": lambda: torch.arange(0, 12),
    "matrix-transposed": lambda: torch.arange(-6, 14).reshape(4, 5).t(),  # non-contiguous, negative
    "repeated": lambda: torch.tensor([3, 3, 0, 17, 3]),
    "empty": lambda: torch.empty(0, dtype=torch.long),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("layout", ref.LAYOUTS)
@pytest.mark.parametrize("positions_case", list(POSITION_CASES))
@pytest.mark.parametrize("contiguous", [True, False], ids=["omega-contiguous", "omega-strided"])
def test_learnable_sinusoidal_gradcheck(seed, layout, positions_case, contiguous):
    positions = POSITION_CASES[positions_case]()
    omega = omega_for(seed, 4, contiguous)
    fn = lambda w: posenc.learnable_sinusoidal(positions, w, layout=layout, scale=1.5)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (omega,))


def test_learnable_sinusoidal_gradient_formula():
    # dL/dw_i = sum_p p * s * (g[p, sin] cos(p w_i) - g[p, cos] sin(p w_i)), here with g = 1.
    omega = torch.tensor([0.3, 0.02], dtype=torch.float64, requires_grad=True)
    positions = torch.arange(0, 9)
    posenc.learnable_sinusoidal(positions, omega, scale=2.0).sum().backward()
    p = np.arange(0, 9, dtype=np.float64)
    expected = [np.sum(p * 2.0 * (np.cos(p * w) - np.sin(p * w))) for w in (0.3, 0.02)]
    np.testing.assert_allclose(omega.grad.numpy(), expected, rtol=1e-13)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("positions_case", ["range", "repeated", "empty", "matrix"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["table-contiguous", "table-transposed"])
def test_learned_gradcheck(seed, positions_case, contiguous):
    g = torch.Generator().manual_seed(seed)
    rows, dim = 20, 5
    if contiguous:
        table = torch.randn(rows, dim, generator=g, dtype=torch.float64)
    else:
        table = torch.randn(dim, rows, generator=g, dtype=torch.float64).t()
        assert not table.is_contiguous()
    table = table.detach().requires_grad_()
    positions = {
        "range": torch.arange(rows),
        "repeated": torch.tensor([4, 4, 4, 0, 19]),
        "empty": torch.empty(0, dtype=torch.long),
        "matrix": torch.randint(0, rows, (6, 3), generator=g).t(),  # non-contiguous
    }[positions_case]
    fn = lambda t: posenc.learned(t, positions)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (table,))
    # The gradient (a scatter-add) is linear in the incoming gradient; its own gradient is the gather.
    assert torch.autograd.gradgradcheck(fn, (table,))


def test_learned_gradient_counts_uses():
    table = torch.zeros(6, 2, requires_grad=True)
    posenc.learned(table, torch.tensor([[5, 1], [5, 5]])).sum().backward()
    assert table.grad[:, 0].tolist() == [0, 1, 0, 0, 0, 3]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_parameters(dtype):
    # learned: a gather is exact in any dtype; the gradient is summed in float32 and rounded once
    table = torch.randn(8, 4).to(dtype).requires_grad_()
    out = posenc.learned(table, torch.tensor([1, 1, 7]))
    assert out.dtype == dtype and torch.equal(out, table.detach()[[1, 1, 7]])
    out.backward(torch.full_like(out, 0.5))
    assert table.grad.dtype == dtype
    assert table.grad[1].tolist() == [1.0] * 4 and table.grad[7].tolist() == [0.5] * 4

    # learnable: computed in float32 from the rounded omega, rounded once to omega's dtype
    omega = torch.tensor([0.5, 0.0625]).to(dtype).requires_grad_()
    out = posenc.learnable_sinusoidal(torch.arange(20), omega)
    assert out.dtype == dtype
    expected = posenc.learnable_sinusoidal(torch.arange(20), omega.detach().float()).to(dtype)
    assert torch.equal(out, expected)
    out.float().sum().backward()
    assert omega.grad.dtype == dtype and torch.isfinite(omega.grad.float()).all()


def test_double_backward_of_learnable_sinusoidal_is_refused():
    omega = torch.tensor([0.5, 0.25], dtype=torch.float64, requires_grad=True)
    out = posenc.learnable_sinusoidal(torch.arange(4), omega)
    with pytest.raises(RuntimeError) as info:
        torch.autograd.grad(out.sum(), omega, create_graph=True)
    assert str(info.value) == ("[learnable-sinusoidal] the gradient is not differentiable: "
                               "double backward is not supported")


def test_absolute_kinds_stay_differentiable():
    table = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: posenc.absolute("learned", 5, 4, table=t), (table,))
    omega = torch.tensor([0.7, 0.1], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda w: posenc.absolute("learnable-sinusoidal", torch.arange(3, 9), 4, omega=w, layout="cos-sin"), (omega,))
