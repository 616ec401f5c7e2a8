"""posenc.indicators' violation-style readings (docs/analysis.md,
"Violation-style readings") against the plain numpy references of
violation_references.py, and their properties: 0 and 1 on Toeplitz matrices,
a low rate for the sinusoid, 0.5 for random tables within 3 standard errors."""

import numpy as np
import pytest
import torch

import posenc
from violation_references import reference_variance_share, reference_violation_rate


def toeplitz(n, f):
    return torch.tensor([[f(j - i) for j in range(n)] for i in range(n)], dtype=torch.float64)


@pytest.mark.parametrize("window", [None, 1, 6])
def test_match_the_references(window):
    rng = np.random.default_rng(9)
    for s in (rng.standard_normal((25, 25)), rng.integers(-2, 3, (25, 25)) * 0.5):  # the grid has ties
        got = posenc.indicators(torch.from_numpy(s), window)
        # The rate is a quotient of integers; the share sums <= 600 squares in another order.
        assert got["monotonicity_violation_rate"] == pytest.approx(reference_violation_rate(s, window), abs=1e-15)
        assert got["within_diagonal_variance_share"] == pytest.approx(reference_variance_share(s, window), abs=1e-12)
        assert got["within_diagonal_variance_share"] == pytest.approx(1 - got["translation_invariance"], abs=1e-15)


def test_toeplitz():
    falling = posenc.indicators(toeplitz(30, lambda m: 1.0 / (1.0 + abs(m))))
    assert falling["monotonicity_violation_rate"] == 0.0
    assert falling["within_diagonal_variance_share"] == 0.0
    rising = posenc.indicators(toeplitz(30, lambda m: float(abs(m))))
    assert rising["monotonicity_violation_rate"] == 1.0
    assert rising["within_diagonal_variance_share"] == 0.0


def test_sinusoid_has_few_violations():
    # Measured 0.131 (256 x 128): the ripples of sum_k cos(m w_k) beyond 11 offsets; random reads 0.5.
    got = posenc.indicators(posenc.proximity(posenc.sinusoidal(256, 128, dtype=torch.float64)))
    assert got["monotonicity_violation_rate"] < 0.15
    assert got["within_diagonal_variance_share"] < 1e-20  # constant diagonals up to float64 round-off


def test_random_tables_read_one_half():
    # 20 i.i.d. N(0, 1) tables (128 x 64): exchangeable rows, each pair inverted with probability 1/2.
    rates = []
    for seed in range(20):
        table = torch.from_numpy(np.random.default_rng(700 + seed).standard_normal((128, 64)))
        rates.append(posenc.indicators(posenc.proximity(table))["monotonicity_violation_rate"])
    mean, se = np.mean(rates), np.std(rates, ddof=1) / np.sqrt(len(rates))
    assert abs(mean - 0.5) < 3 * se, (mean, se)
