"""What an encoding does, measured: proximity matrices, the property
indicators of Wang et al. (ICLR 2021), the monotone range, how linearly
translatable a table is, the probes of Wang & Chen (EMNLP 2020), and
identical-word probing of a model trained with ``posenc train``.

Conventions:

* a table is [positions, dim] (one row per position), a matrix [n, n]; any
  real dtype (bool, integer, float16, bfloat16, float32, float64) and any
  strides; it is converted to float64 once and the analysis runs in float64
  on the CPU;
* results are float64 CPU tensors and plain Python numbers; analysis is
  measurement, not a model: nothing here is differentiable (outputs never
  require grad);
* a bad argument raises ValueError with the library's message, e.g.
  "[proximity] table must be 2-D, got shape (3,)"; a complex tensor raises
  TypeError.

Definitions (formulas, statistics, defaults): the headers
include/posenc/analysis/*.h and docs/python.md, "Analysis".
"""

import os

from ._library import load_analysis as _load_analysis

_ops = _load_analysis()

__all__ = [
    "identical_word_attention",
    "indicators",
    "monotone_range",
    "probe",
    "proximity",
    "translation_residual",
]


def proximity(table, kind="dot"):
    """S[i, j] between the rows of table [n, d]: float64 [n, n].

    kind "dot": PE[i] . PE[j]; "cosine": the dot product of the normalized
    rows (0 where a row is all zeros).
    """
    return _ops.proximity(table, kind)


def indicators(matrix, window=None):
    """Monotonicity, translation invariance and symmetry of a square matrix (a proximity, a bias, an attention map).

    Offsets 1 .. window (default n - 1). Returns a dict: monotonicity in [-1, 1]
    (minus the mean Spearman correlation of proximity with the offset, per row
    and direction), translation_invariance in [0, 1] (the share of variance
    explained by the offset), symmetry in [-1, 1] (concordance of S[x, x+m]
    with S[x, x-m]), monotonicity_violation_rate in [0, 1] (the share of
    offset pairs m < m' in a row and direction with S[x, x+-m'] > S[x, x+-m],
    ties counting one half: 0 when proximity falls everywhere, 0.5 for no
    trend), within_diagonal_variance_share in [0, 1] (the share of the
    variance lying within the diagonals, 1 - translation_invariance formed
    directly: 0 for a Toeplitz matrix), and the window used.
    """
    monotonicity, translation_invariance, symmetry, violation_rate, variance_share, used = _ops.indicators(
        matrix, window)
    return {
        "monotonicity": monotonicity,
        "translation_invariance": translation_invariance,
        "symmetry": symmetry,
        "monotonicity_violation_rate": violation_rate,
        "within_diagonal_variance_share": variance_share,
        "window": used,
    }


def monotone_range(table, kind="dot"):
    """How far proximity keeps falling: the monotone range of proximity(table, kind).

    Per row x, r(x) is the largest m with S[x, x+k] < S[x, x+k-1] for every
    k = 1 .. m; a row is censored when r(x) reaches the table's end. Returns a
    dict: range (the lower median of r over the uncensored rows, n - 1 when
    all_censored), all_censored, min, max, mean and uncensored_rows (over the
    uncensored rows, or all rows when every one is censored), and per_row
    (int64 [n]).
    """
    values = _ops.monotone_range(_ops.proximity(table, kind))
    keys = ("range", "all_censored", "min", "max", "mean", "uncensored_rows", "per_row")
    return dict(zip(keys, values))


def translation_residual(table, deltas=None, folds=5, seed=0):
    """How far table is from PE[p + delta] = T(delta) PE[p] for a linear T(delta).

    T(delta) is fitted by ridge least squares and judged out of sample
    (folds-fold over the pairs, shuffled by seed); the residual is
    ||Y - X T^T||_F / ||Y||_F. deltas None: 1, 2, 4, ... up to positions / 4.
    Returns a dict: method ("least-squares"), deltas, residuals (one per
    delta), max_residual.
    """
    method, used, residuals, worst = _ops.translation_residual(table, deltas, folds, seed)
    return {"method": method, "deltas": list(used), "residuals": list(residuals), "max_residual": worst}


def probe(table, folds=5, seed=0, pairs=None, protocol="default"):
    """The absolute and relative probes of Wang & Chen on table [n, d].

    absolute_mae: mean |round(p_hat) - p| of a ridge regression from a row to
    its position, folds-fold over positions shuffled by seed; relative_error:
    held-out error rate of a logistic regression on [PE[i], PE[j]] predicting
    i < j, over pairs drawn by seed (0.5 is chance).

    protocol "default": unordered pairs in both orders (pairs None: 4096,
    capped at n (n - 1) / 2), columns standardized, a light L2 penalty;
    "pe-study": as Wang & Chen's released relative.py, ordered pairs of the
    first min(n, 512) positions (pairs None: min(n, 512)), the table unscaled,
    sklearn's default penalty (C = 1), the mean of the folds' error rates.
    Returns a dict with absolute_mae, relative_error, folds, seed, pairs (the
    pairs used) and protocol.
    """
    absolute_mae, relative_error, used_folds, used_seed, used_pairs, used_protocol = _ops.probe(
        table, folds, seed, pairs, protocol)
    return {
        "absolute_mae": absolute_mae,
        "relative_error": relative_error,
        "folds": used_folds,
        "seed": used_seed,
        "pairs": used_pairs,
        "protocol": used_protocol,
    }


def identical_word_attention(run_dir, length=0, words=64):
    """First-layer attention of a trained run when every token is the same word: float64 [T, T].

    run_dir: a ``posenc train`` directory (its newest valid checkpoint) or one
    of its checkpoint directories. Each of `words` word ids (spread evenly over
    the task's ordinary tokens; no [CLS] in front) fills all T = length
    positions (0: the run's seq_len); the weights are averaged over the heads
    and the words. Rows sum to 1; a model without positional information gives
    uniform rows (1/T; over the past for a causal decoder).
    """
    return _ops.identical_word_attention(os.fspath(run_dir), length, words)
