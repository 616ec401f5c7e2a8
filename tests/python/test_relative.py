"""Relative position vectors (posenc.relative_logits, relative_values,
relative_logits_2d, sinusoidal_relative_table and the ops behind their
gradients) against the plain float64 references of relative_references.py:
Shaw et al.'s clipped tables, Transformer-XL (no clipping, memory keys),
query offsets, shared and per-head tables, strided inputs, 16-bit dtypes,
the eager gather-then-einsum formulation users write, and Shaw's attention
(eq. 3-5) end to end."""

import math

import numpy as np
import pytest
import torch

import posenc
import relative_references as ref

ops = torch.ops.posenc


def randn(shape, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def table_for(k, dim, heads, per_head, seed, dtype=torch.float64):
    return randn((heads, 2 * k + 1, dim) if per_head else (2 * k + 1, dim), seed, dtype)


def q_for(b, heads, t, dim, seed, layout, dtype=torch.float64):
    """(B, H, T, D) as a model has it: contiguous, or the transpose of a (B, T, H, D) projection."""
    if layout == "contiguous":
        return randn((b, heads, t, dim), seed, dtype)
    q = randn((b, t, heads, dim), seed, dtype).transpose(1, 2)
    assert not q.is_contiguous() or b * heads * t * dim == 0 or heads == 1 or t == 1
    return q


def probs_for(b, heads, tq, tk, seed, layout, dtype=torch.float64):
    """(B, H, Tq, Tk): contiguous, a slice of wider rows (unit column stride, row stride Tk + 3),
    or a transpose (column stride Tq)."""
    if layout == "contiguous":
        return randn((b, heads, tq, tk), seed, dtype)
    if layout == "sliced":
        return randn((b, heads, tq, tk + 3), seed, dtype)[..., 1:tk + 1]
    return randn((b, heads, tk, tq), seed, dtype).transpose(-1, -2)


def check_close(actual, expected, tolerance, reason):
    actual = actual.detach().to(torch.float64).numpy()
    assert actual.shape == expected.shape
    worst = float(np.max(np.abs(actual - expected))) if actual.size else 0.0
    assert worst <= tolerance, f"max |diff| {worst} > {tolerance} ({reason})"


# One table of cases, from real uses. (id, B, H, Tq, Tk, D, k, query_offset, per_head)
CASES = [
    ("shaw-k2", 2, 3, 7, 7, 8, 2, 0, False),
    ("shaw-k16-per-head", 1, 4, 20, 20, 16, 16, 0, True),
    ("xl-no-clip", 2, 2, 6, 6, 8, 6, 0, False),         # k >= T: every offset has its own row
    ("xl-memory", 1, 2, 5, 9, 8, 12, 4, True),          # 4 memory keys: query i is key i + 4
    ("more-queries", 1, 2, 9, 4, 8, 3, 0, False),       # Tq > Tk
    ("negative-offset", 2, 2, 5, 7, 4, 3, -2, False),
    ("head-dim-64", 1, 2, 12, 12, 64, 4, 0, True),
    ("k0-one-row", 1, 1, 3, 3, 2, 0, 0, False),         # k = 0: a single vector for every pair
    ("one-head-per-head", 2, 1, 4, 4, 4, 1, 0, True),   # [1, 2k+1, D] with H = 1
]
IDS = [c[0] for c in CASES]

# 1e-12: float64 sums of at most 64 products of unit-variance values, far below any real error.
F64 = 1e-12


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_logits_match_reference(case, layout):
    _, b, heads, tq, tk, dim, k, offset, per_head = case
    q = q_for(b, heads, tq, dim, 1, layout)
    table = table_for(k, dim, heads, per_head, 2)
    k_len = None if tk == tq else tk
    out = posenc.relative_logits(q, table, k, k_len=k_len, query_offset=offset)
    assert out.dtype == torch.float64 and out.shape == (b, heads, tq, tk)
    check_close(out, ref.relative_logits(q, table, k, tk, offset), F64, "float64")


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("layout", ["contiguous", "sliced", "transposed"])
def test_values_match_reference(case, layout):
    _, b, heads, tq, tk, dim, k, offset, per_head = case
    probs = probs_for(b, heads, tq, tk, 3, layout)
    table = table_for(k, dim, heads, per_head, 4)
    out = posenc.relative_values(probs, table, k, query_offset=offset)
    assert out.dtype == torch.float64 and out.shape == (b, heads, tq, dim)
    check_close(out, ref.relative_values(probs, table, k, offset), F64, "float64")


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("shared", [True, False], ids=["tables-1", "tables-H"])
def test_table_grad_matches_reference(case, shared):
    _, b, heads, tq, tk, dim, k, offset, _ = case
    weights = probs_for(b, heads, tq, tk, 5, "sliced")
    x = q_for(b, heads, tq, dim, 6, "transposed")
    tables = 1 if shared else heads
    grad = ops.relative_table_grad(weights, x, k, tables, offset)
    assert grad.shape == (tables, 2 * k + 1, dim)
    check_close(grad, ref.relative_table_grad(weights, x, k, tables, offset), F64, "float64")


def test_rows_beyond_the_longest_offset_get_zero_gradient():
    # Tq = Tk = 3 reaches offsets -2..2 only: with k = 5 the rows of |offset| > 2 are never used.
    weights, x = randn((1, 1, 3, 3), 0), randn((1, 1, 3, 4), 1)
    grad = ops.relative_table_grad(weights, x, 5, 1, 0)[0]
    assert torch.all(grad[:3] == 0) and torch.all(grad[8:] == 0)
    assert torch.all(grad[3:8].abs().sum(-1) > 0)


def test_k_len_defaults_to_q_len():
    q, table = randn((1, 2, 5, 4), 0), randn((5, 4), 1)
    assert torch.equal(posenc.relative_logits(q, table, 2), posenc.relative_logits(q, table, 2, k_len=5))


def test_clipped_offsets_share_the_edge_rows():
    # Shaw et al.: beyond k the offset is clipped, so q_i . a(j - i) stops changing with j.
    q, table = randn((1, 1, 1, 4), 0), randn((5, 4), 1)
    out = posenc.relative_logits(q, table, 2, k_len=8)[0, 0, 0]
    assert torch.all(out[2:] == out[2])  # offsets 2..7 all use row 4
    check_close(out[:3], (table[2:5] @ q[0, 0, 0]).numpy(), F64, "float64")


@pytest.mark.parametrize("shape", [(0, 2, 4, 4), (2, 0, 4, 4), (1, 2, 0, 4), (1, 2, 4, 0)],
                         ids=["B=0", "H=0", "Tq=0", "Tk=0"])
def test_empty_inputs(shape):
    b, heads, tq, tk = shape
    table = randn((5, 3), 0)
    q = randn((b, heads, tq, 3), 1)
    logits = posenc.relative_logits(q, table, 2, k_len=tk)
    assert logits.shape == (b, heads, tq, tk)
    probs = randn((b, heads, tq, tk), 2)
    values = posenc.relative_values(probs, table, 2)
    assert values.shape == (b, heads, tq, 3)
    check_close(values, ref.relative_values(probs, table, 2), F64, "float64")  # zeros when Tk = 0
    grad = ops.relative_table_grad(probs, q, 2, 1, 0)
    assert grad.shape == (1, 5, 3) and torch.all(grad == 0)


def test_zero_head_dim():
    q, table = randn((1, 2, 3, 0), 0), randn((5, 0), 1)
    assert torch.all(posenc.relative_logits(q, table, 2) == 0)
    assert posenc.relative_values(randn((1, 2, 3, 3), 2), table, 2).shape == (1, 2, 3, 0)


# Low precision: the reference is computed from the inputs as rounded to the dtype, so the only
# errors are the float32 sums and the one rounding of the output. A float32 sum of n products is
# within n * 2^-24 * sum |products| of the exact one (the standard dot-product bound, gamma_n).
LOW = [
    # 2^-8 relative: one round-to-nearest to bfloat16's 8-bit significand.
    (torch.bfloat16, 2.0 ** -8),
    # 2^-11 relative: one round-to-nearest to float16's 11-bit significand.
    (torch.float16, 2.0 ** -11),
    # float32: no output rounding, only the sums.
    (torch.float32, 0.0),
]
LOW_IDS = [str(d[0]) for d in LOW]


def check_low(out, expected, magnitude, terms, rel):
    """|out - expected| <= rel |expected| + (1 + rel) (terms + 1) 2^-24 magnitude, elementwise."""
    out = out.to(torch.float64).numpy()
    bound = rel * np.abs(expected) + (1 + rel) * (terms + 1) * 2.0 ** -24 * magnitude
    assert np.all(np.abs(out - expected) <= bound), float(np.max(np.abs(out - expected) - bound))


@pytest.mark.parametrize("dtype,rel", LOW, ids=LOW_IDS)
@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[6]], ids=[IDS[1], IDS[3], IDS[6]])
def test_low_precision(dtype, rel, case):
    _, b, heads, tq, tk, dim, k, offset, per_head = case
    q = q_for(b, heads, tq, dim, 1, "transposed", dtype)
    table = table_for(k, dim, heads, per_head, 2, dtype)
    probs = torch.softmax(randn((b, heads, tq, tk), 3), -1).to(dtype)
    logits = posenc.relative_logits(q, table, k, k_len=tk, query_offset=offset)
    values = posenc.relative_values(probs, table, k, query_offset=offset)
    assert logits.dtype == dtype and values.dtype == dtype
    check_low(logits, ref.relative_logits(q, table, k, tk, offset),
              ref.relative_logits(q.abs(), table.abs(), k, tk, offset), dim, rel)
    check_low(values, ref.relative_values(probs, table, k, offset),
              ref.relative_values(probs.abs(), table.abs(), k, offset), tk, rel)


def eager_rows(tq, tk, k, offset):
    """The index matrix users build: clamp(j - i - offset, -k, k) + k, (Tq, Tk)."""
    i = torch.arange(tq)[:, None]
    j = torch.arange(tk)[None, :]
    return torch.clamp(j - i - offset, -k, k) + k


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_equals_the_eager_gather_then_einsum(case):
    # What a PyTorch user writes (Shaw et al. / Huang et al. implementations): gather a
    # (Tq, Tk, D) tensor table[idx], then einsum. Ours never forms it; the numbers are the same.
    _, b, heads, tq, tk, dim, k, offset, per_head = case
    q = q_for(b, heads, tq, dim, 7, "contiguous")
    probs = probs_for(b, heads, tq, tk, 8, "contiguous")
    table = table_for(k, dim, heads, per_head, 9)
    idx = eager_rows(tq, tk, k, offset)
    if per_head:
        rel = table[:, idx]  # (H, Tq, Tk, D)
        logits = torch.einsum("bhid,hijd->bhij", q, rel)
        values = torch.einsum("bhij,hijd->bhid", probs, rel)
    else:
        rel = table[idx]  # (Tq, Tk, D)
        logits = torch.einsum("bhid,ijd->bhij", q, rel)
        values = torch.einsum("bhij,ijd->bhid", probs, rel)
    torch.testing.assert_close(posenc.relative_logits(q, table, k, k_len=tk, query_offset=offset), logits,
                               rtol=0, atol=F64)
    torch.testing.assert_close(posenc.relative_values(probs, table, k, query_offset=offset), values,
                               rtol=0, atol=F64)


@pytest.mark.parametrize("k,per_head", [(2, False), (3, True), (16, False)])
def test_shaw_attention_end_to_end(k, per_head):
    # Shaw et al. 2018, eq. (3)-(5) written naively, against the composition a model uses:
    # softmax((q.k^T + relative_logits(q, a^K)) / sqrt(d)) then p.v + relative_values(p, a^V).
    b, heads, t, d = 2, 3, 9, 8
    q, key, value = randn((b, heads, t, d), 1), randn((b, heads, t, d), 2), randn((b, heads, t, d), 3)
    table_k, table_v = table_for(k, d, heads, per_head, 4), table_for(k, d, heads, per_head, 5)
    logits = (q @ key.transpose(-1, -2) + posenc.relative_logits(q, table_k, k)) / math.sqrt(d)
    p = torch.softmax(logits, -1)
    z = p @ value + posenc.relative_values(p, table_v, k)
    check_close(z, ref.shaw_attention(q, key, value, table_k, table_v, k), F64, "float64")


# ---- 2D (BoTNet) -----------------------------------------------------------------------------

GRIDS = [(3, 5), (1, 4), (4, 1), (2, 2), (1, 1)]


@pytest.mark.parametrize("height,width", GRIDS, ids=[f"{h}x{w}" for h, w in GRIDS])
@pytest.mark.parametrize("per_head", [False, True], ids=["shared", "per-head"])
def test_logits_2d_match_the_four_loops(height, width, per_head):
    b, heads, dim = 2, 3, 6
    q = q_for(b, heads, height * width, dim, 1, "transposed")
    table_h = table_for(height - 1, dim, heads, per_head, 2)  # 2*height-1 rows
    table_w = table_for(width - 1, dim, heads, per_head, 3)
    out = posenc.relative_logits_2d(q, table_h, table_w, height, width)
    assert out.dtype == torch.float64 and out.shape == (b, heads, height * width, height * width)
    check_close(out, ref.relative_logits_2d(q, table_h, table_w, height, width), F64, "float64")


@pytest.mark.parametrize("dtype,rel", LOW, ids=LOW_IDS)
def test_logits_2d_low_precision(dtype, rel):
    height, width, heads, dim = 3, 5, 2, 32
    q = randn((1, heads, height * width, dim), 1, dtype)
    table_h, table_w = randn((heads, 2 * height - 1, dim), 2, dtype), randn((2 * width - 1, dim), 3, dtype)
    out = posenc.relative_logits_2d(q, table_h, table_w, height, width)
    assert out.dtype == dtype
    expected = ref.relative_logits_2d(q, table_h, table_w, height, width)
    magnitude = ref.relative_logits_2d(q.abs(), table_h.abs(), table_w.abs(), height, width)
    # Two float32 sums of Dh products, then their sum: within the bound for Dh + 1 terms.
    check_low(out, expected, magnitude, dim + 1, rel)


@pytest.mark.parametrize("height,width", GRIDS, ids=[f"{h}x{w}" for h, w in GRIDS])
def test_expand_and_reduce_match_reference_and_are_adjoint(height, width):
    b, heads, cells = 2, 2, height * width
    rel_h = randn((b, heads, cells, 2 * height - 1), 1)
    rel_w = randn((b, heads, cells, 2 * width + 2), 2)[..., 1:2 * width]  # strided rows
    out = ops.relative_2d_expand(rel_h, rel_w, height, width)
    check_close(out, ref.relative_2d_expand(rel_h, rel_w, height, width), F64, "float64")
    grad = randn((b, heads, cells, cells), 3).transpose(-1, -2)  # column stride HW: copied
    gh, gw = ops.relative_2d_reduce(grad, height, width)
    eh, ew = ref.relative_2d_reduce(grad, height, width)
    check_close(gh, eh, F64, "float64")
    check_close(gw, ew, F64, "float64")
    # <expand(a, b), g> = <a, reduce_h(g)> + <b, reduce_w(g)>
    lhs = float((out * grad).sum())
    rhs = float((rel_h * gh).sum() + (rel_w * gw).sum())
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs))  # float64 sums of ~10^3 terms of size ~1


# ---- sinusoidal tables (NEZHA, Wang et al. 2021) ---------------------------------------------


@pytest.mark.parametrize("k,dim", [(0, 2), (3, 8), (50, 64), (200, 16)])
def test_sinusoidal_table_is_nezha(k, dim):
    table = posenc.sinusoidal_relative_table(k, dim)
    assert table.dtype == torch.float32 and table.shape == (2 * k + 1, dim)
    # 5e-7: the exact mode's documented float32 bound (angles reduced in double first).
    check_close(table, ref.nezha_table(k, dim), 5e-7, "float32 exact mode")
    table64 = posenc.sinusoidal_relative_table(k, dim, base=500.0, dtype=torch.float64)
    # 1e-13: float64 sin/cos of angles |o w| <= 200, whose own rounding is ~200 * 2^-53.
    check_close(table64, ref.nezha_table(k, dim, base=500.0), 1e-13, "float64")


def test_sinusoidal_table_symmetry():
    # Row k+o and row k-o: sin(-o w) = -sin(o w) (odd), cos(-o w) = cos(o w) (even).
    k = 10
    table = posenc.sinusoidal_relative_table(k, 12, dtype=torch.float64)
    forward, backward = table[k:], table.flip(0)[k:]
    assert torch.equal(forward[:, 0::2], -backward[:, 0::2])
    assert torch.equal(forward[:, 1::2], backward[:, 1::2])
    assert torch.all(table[k, 0::2] == 0) and torch.all(table[k, 1::2] == 1)


def test_sinusoidal_table_half_layout():
    table = posenc.sinusoidal_relative_table(4, 8, layout="half", dtype=torch.float64)
    expected = ref.nezha_table(4, 8)
    check_close(table, np.concatenate([expected[:, 0::2], expected[:, 1::2]], axis=1), 1e-15, "float64")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_sinusoidal_table_with_omega(dtype):
    omega = torch.tensor([1.3, 0.25, 0.01], dtype=dtype)
    table = posenc.sinusoidal_relative_table(6, 6, omega=omega)
    assert table.dtype == dtype and table.shape == (13, 6)
    # float64: 1e-14 (angles <= 7.8 rounded once); float32: 5e-7 (omega exact in float32, angle in double).
    check_close(table, ref.nezha_table(6, 6, omega=omega), 1e-14 if dtype == torch.float64 else 5e-7, str(dtype))
    assert posenc.sinusoidal_relative_table(6, 6, omega=omega, dtype=torch.bfloat16).dtype == torch.bfloat16


def test_sinusoidal_table_fixed_frequencies_as_omega_give_the_fixed_table():
    omega = torch.tensor([10000.0 ** (-2.0 * i / 16) for i in range(8)], dtype=torch.float64)
    fixed = posenc.sinusoidal_relative_table(30, 16, dtype=torch.float64)
    learnable = posenc.sinusoidal_relative_table(30, 16, omega=omega)
    # 1e-14: the same angles, formed from omega_i rounded to float64 in both (|angle| <= 30).
    torch.testing.assert_close(learnable, fixed, rtol=0, atol=1e-14)


def test_sinusoidal_table_omega_gradient():
    omega = torch.tensor([0.7, 0.05], dtype=torch.float64, requires_grad=True)
    posenc.sinusoidal_relative_table(3, 4, omega=omega).sum().backward()
    # d/dw sum_o (sin(o w) + cos(o w)) = sum_o o (cos(o w) - sin(o w)), o = -3..3.
    o = np.arange(-3, 4, dtype=np.float64)
    expected = [np.sum(o * (np.cos(o * w) - np.sin(o * w))) for w in (0.7, 0.05)]
    np.testing.assert_allclose(omega.grad.numpy(), expected, rtol=1e-13)


def test_sinusoidal_table_in_relative_logits():
    # NEZHA: a fixed table used as the key-side relative vectors.
    q = randn((1, 2, 6, 8), 0, torch.float32)
    table = posenc.sinusoidal_relative_table(3, 8)
    out = posenc.relative_logits(q, table, 3)
    # 1e-5: float32 sums of 8 products of values ~1 (table entries within 5e-7 of exact).
    check_close(out, ref.relative_logits(q, ref.nezha_table(3, 8), 3), 1e-5, "float32")
