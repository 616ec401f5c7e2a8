"""posenc.proximity, posenc.indicators and posenc.monotone_range against plain
float64 numpy transcriptions (analysis_references.py) of the definitions in
include/posenc/analysis/{proximity,indicators,monotone_range}.h, written from
the formulas with loops and explicit ranks and sharing nothing with the
library; on constructed matrices with known answers (Toeplitz symmetric and
not, a sinusoidal table, ties) and random ones; every input dtype and
non-contiguous views. Also the public signatures of the analysis and file
functions (a contract). Tolerances: both sides sum in float64 in different
orders, so 1e-12 (relative to the values' scale) unless a case says otherwise.
"""

import inspect

import numpy as np
import pytest
import torch

import posenc

# name -> the exact signature users rely on (issue 6, section 4)
SIGNATURES = {
    "proximity": "(table, kind='dot')",
    "indicators": "(matrix, window=None)",
    "monotone_range": "(table, kind='dot')",
    "probe": "(table, folds=5, seed=0, pairs=None, protocol='default')",
    "translation_residual": "(table, deltas=None, folds=5, seed=0)",
    "identical_word_attention": "(run_dir, length=0, words=64)",
    "load_tensor": "(path, name=None)",
    "load_tensors": "(path)",
    "save_tensor": "(path, tensors, metadata=None)",
}

from analysis_references import reference_indicators, reference_monotone_range, reference_proximity  # noqa: E402



# ---------------------------------------------------------------- helpers

def random_table(n, d, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)))


def toeplitz(n, f):
    """S[i, j] = f(j - i): constant diagonals."""
    return torch.tensor([[f(j - i) for j in range(n)] for i in range(n)], dtype=torch.float64)


def assert_indicators_close(got, expected, tol=1e-12):
    assert set(got) == {"monotonicity", "translation_invariance", "symmetry", "monotonicity_violation_rate",
                        "within_diagonal_variance_share", "window"}
    assert got["window"] == expected["window"]
    for key in ("monotonicity", "translation_invariance", "symmetry"):
        assert isinstance(got[key], float), key
        assert abs(got[key] - expected[key]) <= tol, (key, got[key], expected[key])


# ---------------------------------------------------------------- the API

def test_public_signatures_and_docstrings():
    for name, signature in SIGNATURES.items():
        function = getattr(posenc, name)
        assert name in posenc.__all__, name
        assert str(inspect.signature(function)) == signature, name
        assert function.__doc__, name


def test_analysis_ops_are_registered_under_torch_ops():
    for op in ("proximity", "indicators", "monotone_range", "translation_residual", "probe", "load_tensors",
               "load_tensor", "save_tensors", "identical_word_attention"):
        assert getattr(torch.ops.posenc, op) is not None


# ---------------------------------------------------------------- proximity

@pytest.mark.parametrize("kind", ["dot", "cosine"])
def test_proximity_matches_the_definition(kind):
    table = random_table(9, 6, seed=1)
    s = posenc.proximity(table, kind)
    assert s.dtype == torch.float64 and s.shape == (9, 9) and s.device.type == "cpu"
    expected = reference_proximity(table.numpy(), kind)
    np.testing.assert_allclose(s.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_proximity_default_kind_is_dot():
    table = random_table(5, 3, seed=2)
    assert torch.equal(posenc.proximity(table), posenc.proximity(table, "dot"))


def test_cosine_is_zero_for_an_all_zero_row_and_one_on_the_diagonal():
    table = random_table(6, 4, seed=3)
    table[2] = 0
    s = posenc.proximity(table, kind="cosine")
    assert torch.all(s[2] == 0) and torch.all(s[:, 2] == 0)
    diagonal = torch.diagonal(s)
    assert torch.allclose(diagonal[[0, 1, 3, 4, 5]], torch.ones(5, dtype=torch.float64), atol=1e-15, rtol=0)


# Small integers are exact in every dtype, so the float64 result is exact too (bool is refused:
# test_analysis_errors.py).
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                                   torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_proximity_takes_every_real_dtype(dtype):
    rng = np.random.default_rng(4)
    low = 0 if dtype == torch.uint8 else -3
    high = 4
    values = rng.integers(low, high, size=(7, 5))
    table = torch.from_numpy(values).to(dtype)
    expected = reference_proximity(values.astype(np.float64), "dot")
    assert torch.equal(posenc.proximity(table), torch.from_numpy(expected))


def test_proximity_of_non_contiguous_views():
    big = random_table(10, 12, seed=5)
    for view in (big[:, ::3], big.t(), big[1::2]):
        assert not view.is_contiguous()
        expected = reference_proximity(view.numpy(), "cosine")
        np.testing.assert_allclose(posenc.proximity(view, "cosine").numpy(), expected, rtol=1e-12, atol=1e-12)


def test_analysis_is_not_differentiable():
    table = random_table(6, 4).requires_grad_()
    s = posenc.proximity(table)
    assert not s.requires_grad and s.grad_fn is None
    assert posenc.monotone_range(table)["per_row"].requires_grad is False


def test_sinusoidal_proximity_depends_on_the_offset_only():
    # S[i, j] = sum_k cos((i - j) w_k): Toeplitz and symmetric (up to float64 rounding of the table).
    s = posenc.proximity(posenc.sinusoidal(48, 16, dtype=torch.float64))
    for d in range(-47, 48):
        diagonal = torch.diagonal(s, d)
        assert float(diagonal.max() - diagonal.min()) < 1e-12
    assert torch.allclose(s, s.t(), atol=1e-13, rtol=0)


# ---------------------------------------------------------------- indicators

def test_symmetric_toeplitz_decaying_matrix_scores_one_everywhere():
    s = toeplitz(9, lambda d: np.exp(-abs(d) / 3))
    got = posenc.indicators(s)
    assert_indicators_close(got, reference_indicators(s.numpy()))
    assert_indicators_close(got, {"monotonicity": 1.0, "translation_invariance": 1.0, "symmetry": 1.0, "window": 8})


def test_rising_toeplitz_matrix_has_monotonicity_minus_one():
    s = toeplitz(7, lambda d: float(abs(d)))
    got = posenc.indicators(s)
    assert_indicators_close(got, {"monotonicity": -1.0, "translation_invariance": 1.0, "symmetry": 1.0, "window": 6})


def test_non_symmetric_toeplitz_matrix():
    # Forward offsets weigh 1.5 times the backward ones: still translation invariant, not symmetric.
    s = toeplitz(10, lambda d: np.exp(-abs(d) / 4) * (1.5 if d > 0 else 1.0))
    got = posenc.indicators(s)
    expected = reference_indicators(s.numpy())
    assert_indicators_close(got, expected)
    assert abs(got["translation_invariance"] - 1.0) < 1e-12
    assert got["symmetry"] < 0.99
    # S[x, y] = (y - x) c_x with c = (0, 1, 0, -1, 0): the pairs a = S[x, x+m], b = S[x, x-m] are
    # (1, -1), (0, 0), (0, 0), (-1, 1): a = -b with zero means, concordance exactly -1.
    c = [0.0, 1.0, 0.0, -1.0, 0.0]
    anti = torch.tensor([[(y - x) * c[x] for y in range(5)] for x in range(5)], dtype=torch.float64)
    assert abs(posenc.indicators(anti)["symmetry"] + 1.0) < 1e-12
    assert abs(reference_indicators(anti.numpy())["symmetry"] + 1.0) < 1e-12


@pytest.mark.parametrize("window", [None, 1, 3, 9])
def test_random_matrix_matches_the_reference(window):
    s = random_table(10, 10, seed=6)
    assert_indicators_close(posenc.indicators(s, window), reference_indicators(s.numpy(), window))


def test_ties_take_their_mean_rank():
    # Integers 0..2: many equal values in a row, and some constant rows (rho = 0).
    values = np.random.default_rng(7).integers(0, 3, size=(9, 9))
    values[4, :] = 1
    s = torch.from_numpy(values)
    assert_indicators_close(posenc.indicators(s, window=4), reference_indicators(values.astype(np.float64), 4))


def test_indicators_do_not_depend_on_scale():
    # Scale-free by design; S of a table times 1e80 (values ~1e160) overflowed
    # its squared deviations (NaN), times 1e-100 underflowed them (read as 1).
    table = np.random.default_rng(5).normal(size=(24, 6))
    want = reference_indicators(table @ table.T)
    for scale in (1e-100, 1e80):
        got = posenc.indicators(posenc.proximity(torch.from_numpy(table * scale)))
        assert_indicators_close(got, want, tol=1e-9)


# A constant matrix (the proximity of an all-zero or constant table) is refused:
# test_analysis_errors.py, test_degenerate_input_is_refused.


def test_sinusoidal_table_is_translation_invariant_and_symmetric_under_the_dot_product():
    s = posenc.proximity(posenc.sinusoidal(64, 32, dtype=torch.float64))
    got = posenc.indicators(s)
    assert abs(got["translation_invariance"] - 1.0) < 1e-12
    assert abs(got["symmetry"] - 1.0) < 1e-12
    assert_indicators_close(got, reference_indicators(s.numpy()), tol=1e-10)  # ranks of near-equal values


def test_indicators_of_a_float32_non_contiguous_matrix():
    s = random_table(12, 12, seed=8).to(torch.float32).t()
    assert_indicators_close(posenc.indicators(s, 5), reference_indicators(s.double().numpy(), 5))


# ---------------------------------------------------------------- monotone range

def assert_range_equal(got, expected):
    assert list(got) == ["range", "all_censored", "min", "max", "mean", "uncensored_rows", "per_row"]
    for key in ("range", "all_censored", "min", "max", "uncensored_rows"):
        assert got[key] == expected[key], key
    assert abs(got["mean"] - expected["mean"]) < 1e-12
    assert got["per_row"].dtype == torch.int64
    assert got["per_row"].tolist() == expected["per_row"]


@pytest.mark.parametrize("kind", ["dot", "cosine"])
def test_monotone_range_of_a_sinusoidal_table_by_brute_force(kind):
    table = posenc.sinusoidal(96, 16, dtype=torch.float64)
    got = posenc.monotone_range(table, kind=kind)
    expected = reference_monotone_range(reference_proximity(table.numpy(), kind))
    assert_range_equal(got, expected)
    assert not got["all_censored"] and got["uncensored_rows"] > 0


def test_monotone_range_of_random_tables_by_brute_force():
    for seed in range(3):
        table = random_table(20, 3, seed=seed)
        assert_range_equal(posenc.monotone_range(table), reference_monotone_range(reference_proximity(table, "dot")))


def test_monotone_range_when_every_row_is_censored():
    # Unit vectors at angles 0.01 p: cos((j - i) 0.01) falls over the whole table.
    angles = 0.01 * np.arange(30)
    table = torch.from_numpy(np.stack([np.cos(angles), np.sin(angles)], axis=1))
    got = posenc.monotone_range(table)
    assert_range_equal(got, reference_monotone_range(reference_proximity(table.numpy(), "dot")))
    assert got["all_censored"] and got["range"] == 29 and got["uncensored_rows"] == 0
    assert got["per_row"].tolist() == list(range(29, -1, -1))
