"""Gradients of the RoPE ops: torch.autograd.gradcheck in float64 over
seeds, layouts, (T) and (B, T) positions, strided and empty inputs, for x,
learned frequencies omega, xPos (q, k), re-rotation, axial and M-RoPE; the
learned-frequency gradient against autograd through a plain torch
reference; the rotation by given tables wrt cos and sin; the refusals."""

import pytest
import torch

import posenc
import rope_references as ref

SEEDS = [0, 1, 2]


def leaf(*shape, seed, strided=False):
    g = torch.Generator().manual_seed(seed)
    if strided:  # (B, T, H, D) viewed as (B, H, T, D), HF's q
        b, h, t, d = shape
        x = torch.randn(b, t, h, d, generator=g, dtype=torch.float64).transpose(1, 2)
        assert not x.is_contiguous()
    else:
        x = torch.randn(*shape, generator=g, dtype=torch.float64)
    return x.detach().requires_grad_()


POSITIONS = {
    "shared": lambda t: torch.arange(3, 3 + t),
    "batch": lambda t: torch.arange(2 * t).reshape(2, t) * 3 - 4,  # negative too
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_apply_rope_gradcheck_x(seed, layout, positions, strided):
    x = leaf(2, 2, 3, 10, seed=seed, strided=strided)
    p = POSITIONS[positions](3)
    fn = lambda t: posenc.apply_rope(t, p, layout=layout, rotary_dim=8)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    # the gradient (the inverse rotation) is linear in the incoming gradient: differentiable again
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_apply_rope_gradcheck_empty_and_scaled():
    empty = torch.zeros(2, 3, 0, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: posenc.apply_rope(t, torch.zeros(0, dtype=torch.long)), (empty,))
    x = leaf(1, 2, 4, 8, seed=5)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
    assert torch.autograd.gradcheck(lambda t: posenc.apply_rope(t, torch.arange(4), scaling=yarn), (x,))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("positions", list(POSITIONS))
def test_learned_frequencies_gradcheck(seed, layout, positions):
    x = leaf(2, 2, 4, 8, seed=seed, strided=seed == 1)
    g = torch.Generator().manual_seed(seed + 10)
    omega = torch.rand(3, generator=g, dtype=torch.float64).requires_grad_()  # rotary_dim 6 of 8
    p = POSITIONS[positions](4)
    fn = lambda t, w: posenc.apply_rope(t, p, layout=layout, rotary_dim=6, omega=w)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, omega))
    # only omega, and the empty sequence
    assert torch.autograd.gradcheck(lambda w: fn(x.detach(), w), (omega,))
    empty = torch.zeros(1, 2, 0, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t, w: posenc.apply_rope(t, torch.zeros(0, dtype=torch.long), rotary_dim=6, omega=w), (empty, omega))


def test_learned_frequency_gradient_matches_autograd_of_the_reference():
    x = leaf(2, 3, 5, 16, seed=7)
    omega = torch.tensor(ref.default_inv_freq(16, 100.0), dtype=torch.float64, requires_grad=True)
    p = torch.tensor([[0, 4, 9, 200, 31], [1, 1, 2, 3, 5]])
    weight = torch.randn(2, 3, 5, 16, dtype=torch.float64)
    (posenc.apply_rope(x, p, omega=omega) * weight).sum().backward()
    ours_x, ours_w = x.grad.clone(), omega.grad.clone()
    x.grad, omega.grad = None, None
    theta = p.double()[..., None] * omega  # differentiable plain torch
    (ref.rotate_with_angles(x, theta, 1.0, "half") * weight).sum().backward()
    assert torch.allclose(ours_x, x.grad, rtol=0, atol=1e-13)
    assert torch.allclose(ours_w, omega.grad, rtol=1e-11, atol=1e-11)  # sums of ~30 terms of size ~200


def test_learned_frequencies_in_float32_train():
    # a float32 parameter gets a float32 gradient; a step changes the rotation
    omega = torch.nn.Parameter(posenc.rope_inv_freq(8)[0].float())
    x = torch.randn(2, 6, 8)
    loss = posenc.apply_rope(x, torch.arange(6), omega=omega).pow(2).mean() + (
        posenc.apply_rope(x, torch.arange(6), omega=omega)[..., 0].sum())
    loss.backward()
    assert omega.grad.dtype == torch.float32 and torch.isfinite(omega.grad).all() and omega.grad.abs().sum() > 0


def test_double_backward_of_learned_frequencies_is_refused():
    x = leaf(1, 4, 8, seed=0)
    omega = torch.tensor([0.5, 0.25, 0.1, 0.01], dtype=torch.float64, requires_grad=True)
    out = posenc.apply_rope(x, torch.arange(4), omega=omega)
    with pytest.raises(RuntimeError) as info:
        torch.autograd.grad(out.sum(), omega, create_graph=True)
    assert str(info.value).startswith("[rope] the gradient of the learned-frequency rotation is not "
                                      "differentiable: double backward is not supported")


@pytest.mark.parametrize("seed", SEEDS)
def test_rotation_by_given_tables_gradcheck_wrt_cos_and_sin(seed):
    # torch.ops.posenc.rope_rotate: the tables may come from the user's own differentiable code
    g = torch.Generator().manual_seed(seed)
    x = leaf(2, 2, 3, 6, seed=seed)
    for shape in [(3, 2), (2, 3, 2), (1, 3, 2)]:
        cos = torch.rand(*shape, generator=g, dtype=torch.float64).requires_grad_()
        sin = torch.rand(*shape, generator=g, dtype=torch.float64).requires_grad_()
        for layout in ("half", "interleaved"):
            for inverse in (False, True):
                fn = lambda t, c, s: torch.ops.posenc.rope_rotate(t, c, s, layout, inverse)  # noqa: E731
                assert torch.autograd.gradcheck(fn, (x, cos, sin))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_xpos_gradcheck(seed, layout):
    q = leaf(2, 2, 3, 8, seed=seed, strided=seed == 2)
    k = leaf(2, 2, 3, 8, seed=seed + 20)
    fn = lambda a, b: posenc.apply_xpos(a, b, torch.arange(10, 13), scale_base=8, layout=layout)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k))


@pytest.mark.parametrize("seed", SEEDS)
def test_rerotate_gradcheck(seed):
    k = leaf(2, 2, 4, 8, seed=seed, strided=seed == 0)
    src = torch.tensor([[10, 11, 12, 13], [40, 41, 42, 43]])
    fn = lambda t: posenc.rerotate(t, src, src - 10, to_base=100.0)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (k,))


def test_empty_sequences_gradcheck():
    q = torch.zeros(2, 2, 0, 8, dtype=torch.float64, requires_grad=True)
    k = torch.zeros(2, 2, 0, 8, dtype=torch.float64, requires_grad=True)
    none = torch.zeros(0, dtype=torch.long)
    assert torch.autograd.gradcheck(lambda a, b: posenc.apply_xpos(a, b, none), (q, k))
    assert torch.autograd.gradcheck(lambda t: posenc.rerotate(t, none, none), (k,))
    assert torch.autograd.gradcheck(lambda t: posenc.apply_rope_axial(t, torch.zeros(0, 2, dtype=torch.long)), (q,))
    assert torch.autograd.gradcheck(
        lambda t: posenc.apply_mrope(t, torch.zeros(3, 0, dtype=torch.long), [2, 1, 1]), (q,))


@pytest.mark.parametrize("seed", SEEDS)
def test_axial_and_mrope_gradcheck(seed):
    x = leaf(2, 2, 6, 12, seed=seed, strided=seed == 1)
    coords = torch.tensor([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]])
    assert torch.autograd.gradcheck(lambda t: posenc.apply_rope_axial(t, coords, dims_per_axis=[4, 8]), (x,))
    positions3 = torch.stack((torch.arange(6), coords[:, 0] + 3, coords[:, 1] + 3))
    for interleaved in (False, True):
        assert torch.autograd.gradcheck(
            lambda t: posenc.apply_mrope(t, positions3, [2, 2, 2], interleaved=interleaved), (x,))
