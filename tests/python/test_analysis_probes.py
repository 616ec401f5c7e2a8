"""posenc.probe and posenc.translation_residual on tables whose answers are
known from the math (the fits are cross-validated with the library's own
shuffles, so the properties, not the fold assignment, are what is checked):

* a table that holds p linearly (an index column, a sinusoid whose lowest
  frequencies are nearly linear over the table) gives an absolute error 0 and
  orders pairs; a constant table knows nothing: every prediction is a training
  mean, so the error is about E|p - n/2| = n/4, and pair order is chance
  (exactly 0.5: every pair is held out in both orders);
* a sinusoid is exactly linearly translatable (PE[p+d] = T(d) PE[p], a block
  rotation), so its fitted residual is ~0; a random table is not (~1);
* fields, defaults (deltas 1, 2, 4, ... up to n/4; pairs capped at n(n-1)/2),
  determinism for a seed, and any dtype.
"""

import numpy as np
import torch

import posenc


def index_table(n):
    """PE[p] = (p / n, 1): p is linear in the row."""
    p = torch.arange(n, dtype=torch.float64)
    return torch.stack([p / n, torch.ones(n, dtype=torch.float64)], dim=1)


def random_table(n, d, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)))


# ---------------------------------------------------------------- probes

def test_probe_fields_and_defaults():
    r = posenc.probe(index_table(40))
    assert list(r) == ["absolute_mae", "relative_error", "folds", "seed", "pairs", "protocol"]
    assert r["protocol"] == "default"
    assert isinstance(r["absolute_mae"], float) and isinstance(r["relative_error"], float)
    assert (r["folds"], r["seed"], r["pairs"]) == (5, 0, 40 * 39 // 2)  # 4096 capped at n (n - 1) / 2
    r = posenc.probe(index_table(200), folds=4, seed=7, pairs=100)
    assert (r["folds"], r["seed"], r["pairs"]) == (4, 7, 100)


def test_a_linear_table_is_probed_exactly():
    r = posenc.probe(index_table(64))
    assert r["absolute_mae"] == 0.0  # ridge (lambda 1e-8 trace / D) predicts within 0.5, rounded exactly
    assert r["relative_error"] <= 0.02  # i < j is linear in (PE[i], PE[j]); a few L-BFGS steps from 0


def test_a_sinusoidal_table_encodes_positions_linearly():
    r = posenc.probe(posenc.sinusoidal(128, 64, dtype=torch.float64))
    assert r["absolute_mae"] < 0.5
    assert r["relative_error"] < 0.1


def test_a_constant_table_knows_nothing():
    n = 100
    r = posenc.probe(torch.ones(n, 4), seed=3)
    # Predictions are training-fold means near (n-1)/2: E|p - n/2| = n/4 = 25, +-3 for the folds' means.
    assert 22 <= r["absolute_mae"] <= 28
    # (PE[i], PE[j]) is the same for every pair, and each held-out pair comes in both orders: one of
    # the two is always wrong, exactly half.
    assert r["relative_error"] == 0.5


def test_probe_is_deterministic_for_a_seed_and_dtype_free():
    table = random_table(48, 6, seed=1)
    first = posenc.probe(table, seed=11, pairs=300)
    assert posenc.probe(table, seed=11, pairs=300) == first
    # float32 values converted to float64 exactly: the same numbers as float64 input holding them.
    t32 = table.to(torch.float32)
    assert posenc.probe(t32, seed=11, pairs=300) == posenc.probe(t32.double(), seed=11, pairs=300)
    assert posenc.probe(t32.t().contiguous().t(), seed=11, pairs=300) == posenc.probe(t32, seed=11, pairs=300)


# ---------------------------------------------------------------- translation

def test_translation_residual_fields_and_default_deltas():
    r = posenc.translation_residual(random_table(64, 8))
    assert list(r) == ["method", "deltas", "residuals", "max_residual"]
    assert r["method"] == "least-squares"
    assert r["deltas"] == [1, 2, 4, 8, 16]  # 1, 2, 4, ... up to 64 / 4
    assert len(r["residuals"]) == 5 and r["max_residual"] == max(r["residuals"])
    assert posenc.translation_residual(random_table(10, 3))["deltas"] == [1, 2]
    assert posenc.translation_residual(random_table(3, 3), folds=2)["deltas"] == [1]
    assert posenc.translation_residual(random_table(30, 3), deltas=[5, 3])["deltas"] == [5, 3]


def test_a_sinusoid_is_linearly_translatable():
    table = posenc.sinusoidal(64, 16, dtype=torch.float64)
    r = posenc.translation_residual(table, deltas=[1, 3, 7, 16])
    # ~0: exact up to the ridge bias (lambda = 1e-10 trace / D) and float64 rounding.
    assert max(r["residuals"]) < 1e-5, r


def test_a_random_table_is_not_linearly_translatable():
    # Out of sample a D x D map fitted on unrelated rows predicts nothing: residual ~1.
    r = posenc.translation_residual(random_table(64, 8, seed=2), seed=1)
    assert min(r["residuals"]) > 0.6, r


def test_translation_residual_is_deterministic_for_a_seed():
    table = random_table(40, 4, seed=3)
    assert posenc.translation_residual(table, seed=5) == posenc.translation_residual(table, seed=5)
    assert posenc.translation_residual(table.to(torch.float32), seed=5) == \
        posenc.translation_residual(table.to(torch.float32).double(), seed=5)
