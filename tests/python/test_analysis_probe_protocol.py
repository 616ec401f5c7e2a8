"""posenc.probe(..., protocol="pe-study"): Wang & Chen's released relative.py
(docs/analysis.md), against the plain numpy reference of
pe_study_reference.py (its own mt19937_64, folds and Newton solver), its
defaults, its dependence on scale, and its errors."""

import numpy as np
import pytest
import torch

import posenc
from pe_study_reference import pe_study_relative_error


def random_table(n, d, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)))


@pytest.mark.parametrize("seed", [0, 2])
@pytest.mark.parametrize("pairs", [None, 300])
def test_matches_the_reference(seed, pairs):
    table = random_table(60, 3, 5)
    r = posenc.probe(table, seed=seed, pairs=pairs, protocol="pe-study")
    want, used = pe_study_relative_error(table.numpy(), 5, seed, pairs)
    assert (r["pairs"], r["protocol"], r["folds"], r["seed"]) == (used, "pe-study", 5, seed)
    # Same pairs and folds; the optima differ by ~1e-10, so the predictions agree (one flip moves the rate by
    # >= 1 / 300) and the mean of five rates differs at most in its last bits.
    assert r["relative_error"] == pytest.approx(want, abs=1e-12)
    # The absolute probe does not depend on the protocol.
    assert r["absolute_mae"] == posenc.probe(table, seed=seed)["absolute_mae"]


def test_pairs_default_per_protocol():
    table = random_table(40, 3)
    assert posenc.probe(table)["pairs"] == 40 * 39 // 2  # default: 4096 capped at n (n - 1) / 2
    assert posenc.probe(table, protocol="pe-study")["pairs"] == 40  # min(n, 512), as relative.py's x.shape[0]
    assert posenc.probe(table, pairs=2000, protocol="pe-study")["pairs"] == 1600  # capped at 40^2
    assert posenc.probe(random_table(600, 2), protocol="pe-study")["pairs"] == 512


def test_depends_on_scale_where_the_default_does_not():
    # Unscaled features with sklearn's C = 1: a sinusoid times 2^-14 leaves the penalty in charge (about 0.5);
    # the default standardizes columns and gives the same number.
    table = posenc.sinusoidal(256, 64, dtype=torch.float64)
    small = table * 2.0 ** -14
    assert posenc.probe(table, protocol="pe-study")["relative_error"] < 0.15
    assert posenc.probe(small, protocol="pe-study")["relative_error"] > 0.4
    assert posenc.probe(small)["relative_error"] == posenc.probe(table)["relative_error"]


def test_errors():
    table = random_table(20, 3)
    for bad in ("x", "PE-study", ""):
        with pytest.raises(ValueError) as info:
            posenc.probe(table, protocol=bad)
        assert str(info.value) == f"[probe] protocol must be default or pe-study, got '{bad}'"
    with pytest.raises(ValueError) as info:
        posenc.probe(table, pairs=3, protocol="pe-study")
    assert str(info.value) == "[probe] pairs must be at least folds = 5, got 3"
