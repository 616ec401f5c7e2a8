"""Dynamic position biases from Python: the ops' rows / grid against the sources written with torch.nn in
float64 (x-transformers' DynamicPositionBias: Linear(1, dim) [+ LayerNorm] + SiLU, depth - 1 hidden layers,
Linear(dim, heads), read at i - j; Swin V2's cpb_mlp on log-spaced coordinates, 16 sigmoid), gradcheck on every
weight (non-contiguous and empty inputs too), the modules in posenc.attention on both paths, and the refusals
word for word."""

import math

import pytest
import torch
from torch import nn

import posenc  # noqa: F401
import posenc.nn as pnn

ops = torch.ops.posenc


def xtransformers_mlp(m):
    """x-transformers' mlp (a ModuleList of Sequentials) holding the module's weights, float64."""
    layers = []
    for layer in range(m.depth):
        linear = nn.Linear(1 if layer == 0 else m.hidden, m.hidden).double()
        with torch.no_grad():
            linear.weight.copy_(m.in_weight if layer == 0 else m.hidden_weight[layer - 1])
            linear.bias.copy_(m.in_bias if layer == 0 else m.hidden_bias[layer - 1])
        norm = nn.Identity()
        if m.norm:
            norm = nn.LayerNorm(m.hidden).double()
            with torch.no_grad():
                norm.weight.copy_(m.norm_weight[layer])
                norm.bias.copy_(m.norm_bias[layer])
        layers.append(nn.Sequential(linear, norm, nn.SiLU()))
    out = nn.Linear(m.hidden, m.num_heads).double()
    with torch.no_grad():
        out.weight.copy_(m.out_weight)
        out.bias.copy_(m.out_bias)
    return nn.ModuleList(layers + [out])


def xtransformers_bias(m, i, j):
    """DynamicPositionBias.forward(i, j) of x-transformers (i queries, the last of j keys)."""
    mlp = xtransformers_mlp(m)
    indices = torch.arange(j - i, j).unsqueeze(1) - torch.arange(j).unsqueeze(0) + (j - 1)
    pos = torch.arange(-j + 1, j, dtype=torch.float64).unsqueeze(-1)
    if m.log_distance:
        pos = torch.sign(pos) * torch.log(pos.abs() + 1)
    with torch.no_grad():
        for layer in mlp:
            pos = layer(pos)
    return pos[indices].permute(2, 0, 1)


def swin_v2_bias(m):
    """WindowAttention's relative_position_bias of Swin V2 (window = the grid, >= 2 per axis)."""
    wh, ww = m.height, m.width
    nh, nw = m.pretrained_height or wh, m.pretrained_width or ww
    dh, dw = torch.meshgrid(torch.arange(-(wh - 1), wh, dtype=torch.float64),
                            torch.arange(-(ww - 1), ww, dtype=torch.float64), indexing="ij")
    table = torch.stack([dh / (nh - 1), dw / (nw - 1)], -1) * 8
    table = torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8)
    mlp = nn.Sequential(nn.Linear(2, m.hidden), nn.ReLU(), nn.Linear(m.hidden, m.num_heads, bias=False)).double()
    with torch.no_grad():
        mlp[0].weight.copy_(m.fc1_weight)
        mlp[0].bias.copy_(m.fc1_bias)
        mlp[2].weight.copy_(m.fc2_weight)
        values = mlp(table).view(-1, m.num_heads)
    coords = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij")).flatten(1)
    rel = coords[:, :, None] - coords[:, None, :]
    index = (rel[0] + wh - 1) * (2 * ww - 1) + (rel[1] + ww - 1)
    return 16 * torch.sigmoid(values[index.flatten()].view(wh * ww, wh * ww, -1).permute(2, 0, 1))


def dpb_module(heads=3, hidden=6, depth=2, log_distance=False, norm=False, causal=False, seed=0):
    torch.manual_seed(seed)
    m = pnn.DynamicPositionBias(heads, hidden, depth=depth, log_distance=log_distance, norm=norm,
                                causal=causal).double()
    if norm:  # away from gamma 1, beta 0
        with torch.no_grad():
            m.norm_weight.add_(0.3 * torch.randn_like(m.norm_weight))
            m.norm_bias.add_(0.3 * torch.randn_like(m.norm_bias))
    return m


@pytest.mark.parametrize("depth, log_distance, norm", [(2, False, False), (1, True, False), (3, True, True),
                                                       (2, False, True)])
@pytest.mark.parametrize("q_len, k_len", [(6, 6), (2, 7), (1, 1)])
def test_dpb_matches_xtransformers(depth, log_distance, norm, q_len, k_len):
    m = dpb_module(depth=depth, log_distance=log_distance, norm=norm)
    want = xtransformers_bias(m, q_len, k_len)
    # 1e-13: the same float64 sums in another order.
    torch.testing.assert_close(m(q_len, k_len), want, rtol=0, atol=1e-13)
    rows = m.offset_rows(q_len, k_len)
    assert rows.shape == (3, q_len + k_len - 1)
    m32 = m.float()
    got32 = m32(q_len, k_len)
    assert got32.dtype == torch.float32
    # float32 weights: formed in double from them, rounded once.
    torch.testing.assert_close(got32.double(), xtransformers_bias(m32.double(), q_len, k_len), rtol=4e-7, atol=4e-7)


def dpb_args(m):
    norm = (m.norm_weight, m.norm_bias) if m.norm else (None, None)
    return m.in_weight, m.in_bias, m.hidden_weight, m.hidden_bias, *norm, m.out_weight, m.out_bias


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("depth, log_distance, norm", [(2, False, False), (1, True, True), (3, True, True)])
def test_dpb_gradcheck(seed, depth, log_distance, norm):
    m = dpb_module(heads=2, hidden=4, depth=depth, log_distance=log_distance, norm=norm, seed=seed)
    tensors = tuple(t for t in dpb_args(m) if t is not None)

    def rows(*ts):
        it = iter(ts)
        args = [next(it) if t is not None else None for t in dpb_args(m)]
        return ops.dpb_offset_bias(*args, 4, 6, log_distance)

    # gradcheck's default nondet_tol 0: two identical backward calls must agree bit for bit (they differed by
    # 1 ulp, about once in 100, while FMA contraction depended on the buffers' addresses; kernels CMakeLists).
    assert torch.autograd.gradcheck(rows, tensors)
    # Non-contiguous: out_weight as a transpose, in_bias every other element of a longer vector.
    out_t = m.out_weight.detach().t().contiguous().requires_grad_()
    wide = torch.stack([m.in_bias.detach(), m.in_bias.detach()], 1).flatten().requires_grad_()
    args = list(dpb_args(m))
    assert torch.autograd.gradcheck(
        lambda o, b: ops.dpb_offset_bias(args[0], b[::2], *args[2:6], o.t(), args[7], 3, 5, log_distance),
        (out_t, wide))
    # Empty: no column, zero gradients.
    out = ops.dpb_offset_bias(*dpb_args(m), 0, 5, log_distance)
    assert out.shape == (2, 0)
    out.sum().backward()
    assert torch.equal(m.out_weight.grad, torch.zeros_like(m.out_weight))


def test_dpb_log_distance_is_odd_and_monotone():
    # in (1, -1), out (1, -1), no biases: SiLU(u) - SiLU(-u) = u, the MLP is the identity and the rows show phi.
    for log_distance in (False, True):
        m = pnn.DynamicPositionBias(1, 2, depth=1, log_distance=log_distance).double()
        with torch.no_grad():
            m.in_weight.copy_(torch.tensor([[1.0], [-1.0]]))
            m.out_weight.copy_(torch.tensor([[1.0, -1.0]]))
            m.in_bias.zero_()
            m.out_bias.zero_()
        n = 100
        phi = m.offset_rows(n, n)[0].flip(0)  # phi[r + n - 1] for r = i' - j = -(n - 1) .. n - 1
        r = torch.arange(-(n - 1), n, dtype=torch.float64)
        want = torch.sign(r) * torch.log1p(r.abs()) if log_distance else r
        torch.testing.assert_close(phi.detach(), want, rtol=1e-15, atol=1e-15)
        assert torch.equal(phi.detach(), -phi.detach().flip(0))  # odd
        assert bool((phi[1:] > phi[:-1]).all())  # increasing


def test_dpb_depends_only_on_the_offset():
    m = dpb_module(log_distance=True, norm=True)
    ref = m(9, 9)
    for q_len, k_len in ((3, 9), (9, 4), (6, 6)):
        b = m(q_len, k_len)
        for i in range(q_len):
            for j in range(k_len):
                r = i + k_len - q_len - j
                want = ref[:, 8, 8 - r] if r >= 0 else ref[:, 8 + r, 8]
                assert torch.equal(b[:, i, j], want)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_len, k_len", [(4, 7), (5, 5)])
def test_dpb_attention_paths_agree(causal, q_len, k_len):
    m = dpb_module(norm=True, causal=causal)
    q = torch.randn(2, 3, q_len, 8, dtype=torch.float64)
    k, v = torch.randn(2, 3, k_len, 8, dtype=torch.float64), torch.randn(2, 3, k_len, 8, dtype=torch.float64)
    results = []
    for path in ("fused", "composed"):
        m.zero_grad()
        out = posenc.attention(q, k, v, path=path, **m.attention_kwargs(q_len, k_len))
        out.sum().backward()
        results.append([out.detach()] + [p.grad.clone() for p in m.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)  # the same sums in another order, float64
    if causal:
        assert bool(torch.isinf(m(q_len, k_len)[:, 0, k_len - q_len + 1:]).all())


def cpb_module(heads=3, height=4, width=4, hidden=512, pretrained=0, seed=0):
    torch.manual_seed(seed)
    m = pnn.ContinuousPositionBias2d(heads, height, width, hidden=hidden, pretrained_height=pretrained,
                                     pretrained_width=pretrained, init_std=0.5).double()
    with torch.no_grad():
        m.fc1_bias.normal_(0.0, 0.3)
    return m


@pytest.mark.parametrize("height, width, hidden, pretrained", [(4, 4, 512, 0), (3, 5, 64, 0), (2, 3, 16, 8)])
def test_cpb_matches_swin_v2(height, width, hidden, pretrained):
    m = cpb_module(height=height, width=width, hidden=hidden, pretrained=pretrained)
    n = height * width
    want = swin_v2_bias(m)
    # 1e-13 of 16: log2 and sums of <= 512 terms in another order, float64.
    torch.testing.assert_close(m(n, n), want, rtol=0, atol=16e-13)
    assert float(want.std()) > 0.1
    assert m.grid().shape == (3, 2 * height - 1, 2 * width - 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cpb_gradcheck(seed):
    m = cpb_module(heads=2, height=3, width=2, hidden=5, seed=seed)
    args = (m.fc1_weight, m.fc1_bias, m.fc2_weight)
    assert torch.autograd.gradcheck(lambda a, b, c: ops.cpb_grid_bias(a, b, c, 3, 2), args)
    assert torch.autograd.gradcheck(lambda a, b, c: ops.cpb_grid_bias(a, b, c, 2, 2, 5, 6), args)
    # Non-contiguous fc1_weight (a transpose).
    w_t = m.fc1_weight.detach().t().contiguous().requires_grad_()
    assert torch.autograd.gradcheck(lambda w: ops.cpb_grid_bias(w.t(), m.fc1_bias, m.fc2_weight, 2, 3), (w_t,))


def test_cpb_attention_paths_agree_and_swin_init():
    m = cpb_module(heads=2, height=3, width=3, hidden=32)
    q, k, v = (torch.randn(2, 2, 9, 8, dtype=torch.float64) for _ in range(3))
    results = []
    for path in ("fused", "composed"):
        m.zero_grad()
        out = posenc.attention(q, k, v, path=path, **m.attention_kwargs(9, 9))
        out.sum().backward()
        results.append([out.detach()] + [p.grad.clone() for p in m.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    torch.manual_seed(0)
    swin = pnn.ContinuousPositionBias2d(6, 8, 8)
    assert [n for n, _ in swin.named_parameters()] == ["fc1_weight", "fc1_bias", "fc2_weight"]
    assert abs(float(swin.fc2_weight.std()) - 0.02) < 0.002 and float(swin.fc1_bias.abs().max()) == 0
    assert abs(float(swin(64, 64).mean()) - 8.0) < 0.1  # 16 sigmoid(~0)


@pytest.mark.parametrize("call, error, message", [
    (lambda: pnn.DynamicPositionBias(2, 0), ValueError, "[DynamicPositionBias] hidden must be >= 1, got 0"),
    (lambda: pnn.DynamicPositionBias(2, 4, depth=0), ValueError, "[DynamicPositionBias] depth must be >= 1, got 0"),
    (lambda: pnn.DynamicPositionBias(0, 4), ValueError, "[DynamicPositionBias] num_heads must be >= 1, got 0"),
    (lambda: pnn.DynamicPositionBias(1, 4, causal=True)(4, 3), ValueError,
     "[DynamicPositionBias] causal attention needs every query to see a key: q_len must be <= k_len, got 4 and 3"),
    (lambda: pnn.ContinuousPositionBias2d(2, 3, 3, pretrained_height=1), ValueError,
     "[ContinuousPositionBias2d] pretrained_height must be 0 (the grid's) or >= 2, got 1"),
    (lambda: pnn.ContinuousPositionBias2d(2, 0, 3), ValueError,
     "[ContinuousPositionBias2d] height must be >= 1, got 0"),
    (lambda: pnn.ContinuousPositionBias2d(2, 3, 3)(9, 8), ValueError,
     "[ContinuousPositionBias2d] q_len and k_len must both be height*width = 9, got 9 and 8"),
    (lambda: ops.dpb_offset_bias(torch.ones(4, 1), torch.ones(3), torch.ones(1, 4, 4), torch.ones(1, 4), None, None,
                                 torch.ones(2, 4), torch.ones(2), 2, 2), ValueError,
     "[dpb_offset_bias] in_bias must be [hidden] = (4), got (3)"),
    (lambda: ops.dpb_offset_bias(torch.ones(4, 1), torch.ones(4), torch.ones(1, 4, 4), torch.ones(1, 4),
                                 torch.ones(2, 4), None, torch.ones(2, 4), torch.ones(2), 2, 2), ValueError,
     "[dpb_offset_bias] norm_weight and norm_bias must be given together (LayerNorm) or both be None"),
    (lambda: ops.dpb_offset_bias(torch.ones(4, 1), torch.ones(4), torch.ones(1, 4, 4), torch.ones(1, 4), None, None,
                                 torch.ones(2, 4), torch.ones(2), 2, -1), ValueError,
     "[dpb_offset_bias] k_len must be >= 0, got -1"),
    (lambda: ops.dpb_offset_bias(torch.ones(4, 1), torch.ones(4, dtype=torch.float64), torch.ones(1, 4, 4),
                                 torch.ones(1, 4), None, None, torch.ones(2, 4), torch.ones(2), 2, 2), TypeError,
     "[dpb_offset_bias] in_bias must have in_weight's dtype (float32), got float64"),
    (lambda: ops.cpb_grid_bias(torch.ones(4, 3), torch.ones(4), torch.ones(2, 4), 2, 2), ValueError,
     "[cpb_grid_bias] fc1_weight must be [hidden, 2] with hidden >= 1, got (4, 3)"),
    (lambda: ops.cpb_grid_bias(torch.ones(4, 2), torch.ones(4), torch.ones(2, 4), 2, 2, 1, 0), ValueError,
     "[cpb_grid_bias] pretrained_height must be 0 (the grid's) or >= 2, got 1"),
])
def test_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value).splitlines()[0] == message


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dpb_backward_does_not_depend_on_buffer_addresses(seed):
    # 500 backward pairs through fresh allocations: before FMA contraction was turned off for the kernel
    # (src/kernels/CMakeLists.txt) about 1 pair in 100 differed by 1 ulp at this depth, with the norm.
    m = dpb_module(heads=2, hidden=4, depth=3, log_distance=True, norm=True, seed=seed)
    tensors = [t.detach().clone().requires_grad_() for t in dpb_args(m)]
    out = ops.dpb_offset_bias(*tensors, 4, 6, True)
    for trial in range(500):
        g = torch.zeros_like(out)
        g.view(-1)[trial % out.numel()] = 1.0
        first = torch.autograd.grad(ops.dpb_offset_bias(*tensors, 4, 6, True), tensors, g)
        padding = torch.empty(trial % 7 + 1, dtype=torch.float64)  # shifts the next allocations
        second = torch.autograd.grad(ops.dpb_offset_bias(*tensors, 4, 6, True), tensors, g)
        del padding
        assert all(torch.equal(a, b) for a, b in zip(first, second)), f"trial {trial}"
