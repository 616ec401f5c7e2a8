"""posenc.absolute: every kind against its plain reference, by count and by
tensor, plus the learned and learnable-frequency kinds."""

import numpy as np
import pytest
import torch

import posenc
import references as ref

KINDS = ["sinusoidal", "index", "normalized", "binary", "signed-binary", "sine-binary", "sine-only",
         "learned", "learnable-sinusoidal"]


def max_error(actual, expected):
    return float(np.max(np.abs(actual.double().numpy() - expected)))


def test_kinds_are_listed_in_order():
    assert posenc.absolute_kinds() == KINDS


# (kind, dim, params, reference, tolerance); tolerances are for float32 output:
# integers and bits are exact; p/(L-1) and sines are rounded once (float32 half
# ulp at the value, below 1e-6 relative).
NAIVE = [
    ("index", 5, {}, lambda p, d: ref.naive("index", p, d), 0.0),
    ("normalized", 4, {}, lambda p, d: ref.naive("normalized", p, d), 1e-7),
    ("normalized", 4, {"length": 1000}, lambda p, d: ref.naive("normalized", p, d, length=1000), 1e-7),
    ("binary", 12, {}, lambda p, d: ref.naive("binary", p, d), 0.0),
    ("signed-binary", 12, {}, lambda p, d: ref.naive("signed-binary", p, d), 0.0),
    ("sine-binary", 10, {}, lambda p, d: ref.naive("sine-binary", p, d), 2e-7),
    ("sine-only", 16, {"base": 100.0}, lambda p, d: ref.naive("sine-only", p, d, base=100.0), 2e-7),
]


@pytest.mark.parametrize("kind,dim,params,reference,tolerance", NAIVE, ids=[c[0] + str(c[2]) for c in NAIVE])
def test_naive_kinds_match_reference(kind, dim, params, reference, tolerance):
    positions = list(range(0, 130))
    by_count = posenc.absolute(kind, 130, dim, **params)
    by_tensor = posenc.absolute(kind, torch.tensor(positions), dim, **params)
    expected = reference(positions, dim)
    for out in (by_count, by_tensor):
        assert out.shape == (130, dim) and out.dtype == torch.float32
        assert max_error(out, expected) <= tolerance * max(1.0, float(np.max(np.abs(expected))))


def test_naive_kinds_with_scattered_positions_and_float64():
    positions = [9, 0, 513, 7, 7]
    out = posenc.absolute("binary", torch.tensor(positions).reshape(5, 1), 11, dtype=torch.float64)
    assert out.shape == (5, 1, 11) and out.dtype == torch.float64
    assert max_error(out.reshape(5, 11), ref.naive("binary", positions, 11)) == 0.0
    # normalized with explicit positions: L defaults to the number of positions
    out = posenc.absolute("normalized", torch.tensor([0, 2, 4]), 2, dtype=torch.float64)
    assert max_error(out, ref.naive("normalized", [0, 2, 4], 2)) <= 1e-16
    # a single position: L = 1 gives 0
    assert posenc.absolute("normalized", 1, 3).abs().sum().item() == 0.0


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_sinusoidal_kind_is_the_sinusoidal_encoding(layout):
    out = posenc.absolute("sinusoidal", 200, 32, layout=layout, scale=2.0, base=1000.0)
    assert max_error(out, ref.sinusoidal(range(200), 32, 1000.0, layout, 2.0)) <= 1e-6  # 2 x 5e-7 at scale 2
    assert torch.equal(out, posenc.sinusoidal(200, 32, layout=layout, scale=2.0, base=1000.0))


def test_learned_kind_looks_up_the_table():
    table = torch.randn(10, 6)
    out = posenc.absolute("learned", torch.tensor([[3, 9], [0, 3]]), 6, table=table)
    assert torch.equal(out, table[torch.tensor([[3, 9], [0, 3]])])
    assert torch.equal(posenc.absolute("learned", 4, 6, table=table), table[:4])
    assert posenc.absolute("learned", 4, 6, table=table, dtype=torch.float64).dtype == torch.float64


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_learnable_sinusoidal_kind(layout):
    # Default omega: the fixed frequencies, so the table is the sinusoidal one.
    default = posenc.absolute("learnable-sinusoidal", 100, 16, layout=layout, dtype=torch.float64)
    assert max_error(default, ref.sinusoidal(range(100), 16, layout=layout)) <= 1e-12
    omega = torch.tensor([0.5, 0.25, 0.125])
    out = posenc.absolute("learnable-sinusoidal", torch.arange(7), 6, omega=omega, layout=layout, scale=3.0)
    assert out.dtype == torch.float32
    assert max_error(out, ref.sinusoids(range(7), [0.5, 0.25, 0.125], layout, 3.0)) <= 3 * 5e-7


def test_learnable_sinusoidal_function():
    omega = torch.tensor([1.5, 0.01], dtype=torch.float64)
    positions = torch.tensor([[0, 5], [-3, 40]])
    out = posenc.learnable_sinusoidal(positions, omega, layout="half")
    assert out.shape == (2, 2, 4) and out.dtype == torch.float64
    assert max_error(out.reshape(4, 4), ref.sinusoids([0, 5, -3, 40], [1.5, 0.01], "half")) <= 1e-15


def test_learned_function():
    table = torch.randn(7, 3, dtype=torch.float64)
    positions = torch.tensor([6, 0, 6, 2])
    assert torch.equal(posenc.learned(table, positions), table[positions])
