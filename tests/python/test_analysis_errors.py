"""Bad input to the analysis functions: ValueError (TypeError for a complex
tensor) with the library's message, word for word."""

import math

import pytest
import torch

import posenc


def raises(error, message, function, *args, **kwargs):
    with pytest.raises(error) as info:
        function(*args, **kwargs)
    assert str(info.value) == message


def test_tensor_arguments_must_be_real_and_2d():
    raises(ValueError, "[proximity] table must be 2-D, got shape (3,)", posenc.proximity, torch.zeros(3))
    raises(ValueError, "[proximity] table must be 2-D, got shape (2, 3, 4)", posenc.proximity, torch.zeros(2, 3, 4))
    raises(ValueError, "[proximity] table must be 2-D, got shape ()", posenc.proximity, torch.tensor(1.0))
    real = "must be a real tensor (integer or floating point; a bool one: convert it with .float())"
    raises(TypeError, f"[proximity] table {real}, got complex64", posenc.proximity,
           torch.zeros(3, 2, dtype=torch.complex64))
    # A bool table would read as 0 / 1 without anyone saying so (issue 18): refused, for every analysis.
    flags = torch.rand(6, 4) > 0.5
    raises(TypeError, f"[proximity] table {real}, got bool", posenc.proximity, flags)
    raises(TypeError, f"[proximity] table {real}, got bool", posenc.monotone_range, flags)
    raises(TypeError, f"[translation] table {real}, got bool", posenc.translation_residual, flags)
    raises(TypeError, f"[probe] table {real}, got bool", posenc.probe, flags)
    raises(TypeError, f"[indicators] matrix {real}, got bool", posenc.indicators, torch.eye(4, dtype=torch.bool))
    # Integer tables are numbers (the index encoding, a binary table as 0 / 1): accepted, read exactly.
    ints = torch.arange(24).view(6, 4) % 5
    assert torch.equal(posenc.proximity(ints), posenc.proximity(ints.double()))
    raises(ValueError, "[indicators] matrix must be 2-D, got shape (4,)", posenc.indicators, torch.zeros(4))
    raises(TypeError, f"[indicators] matrix {real}, got complex128", posenc.indicators,
           torch.zeros(3, 3, dtype=torch.complex128))
    raises(ValueError, "[probe] table must be 2-D, got shape (8,)", posenc.probe, torch.zeros(8))
    raises(ValueError, "[translation] table must be 2-D, got shape (8,)", posenc.translation_residual, torch.zeros(8))
    # monotone_range computes the proximity first.
    raises(ValueError, "[proximity] table must be 2-D, got shape (4,)", posenc.monotone_range, torch.zeros(4))
    raises(ValueError, "[monotone range] matrix must be 2-D, got shape (4,)", torch.ops.posenc.monotone_range,
           torch.zeros(4))


def test_proximity_errors():
    raises(ValueError, "[proximity] kind must be dot or cosine, got 'x'", posenc.proximity, torch.zeros(3, 2), "x")
    raises(ValueError, "[proximity] table must have at least 1 row and 1 column, got 0 x 4", posenc.proximity,
           torch.zeros(0, 4))
    table = torch.zeros(5, 8)
    table[3, 7] = math.nan
    raises(ValueError, "[proximity] table has a non-finite value at (3, 7): nan", posenc.proximity, table)
    table[3, 7] = -math.inf
    raises(ValueError, "[proximity] table has a non-finite value at (3, 7): -inf", posenc.proximity, table)


def test_indicator_errors():
    raises(ValueError, "[indicators] window must be in [1, 7] for an 8 x 8 matrix, got 9", posenc.indicators,
           torch.zeros(8, 8), 9)
    raises(ValueError, "[indicators] window must be in [1, 7] for an 8 x 8 matrix, got 0", posenc.indicators,
           torch.zeros(8, 8), window=0)
    raises(ValueError, "[indicators] matrix must be at least 2 x 2, got 1 x 1", posenc.indicators, torch.zeros(1, 1))
    raises(ValueError, "[indicators] matrix must be square, got 3 x 4", posenc.indicators, torch.zeros(3, 4))


def test_monotone_range_errors():
    raises(ValueError, "[monotone range] matrix must be at least 2 x 2, got 1 x 1", posenc.monotone_range,
           torch.ones(1, 4))
    raises(ValueError, "[proximity] kind must be dot or cosine, got 'l2'", posenc.monotone_range, torch.ones(3, 4),
           kind="l2")
    raises(ValueError, "[monotone range] matrix must be square, got 3 x 4", torch.ops.posenc.monotone_range,
           torch.zeros(3, 4))


def test_probe_errors():
    table = torch.randn(8, 3, dtype=torch.float64)
    # Too few positions for the folds: the message says what to change (it read "folds must be in [2, 1]").
    raises(ValueError, "[probe] the table has 8 positions; 9 folds need at least 9 (one held-out position per fold): "
           "use 2 .. 8 folds or a table of at least 9 positions", posenc.probe, table, folds=9)
    raises(ValueError, "[probe] folds must be >= 2, got 1", posenc.probe, table, folds=1)
    raises(ValueError, "[probe] the table has 1 position; the probes need at least 2 (cross-validation holds out "
           "positions in at least 2 folds)", posenc.probe, table[:1])
    raises(ValueError, "[probe] pairs must be >= 1, got 0", posenc.probe, table, pairs=0)
    raises(ValueError, "[probe] seed must be >= 0, got -1", posenc.probe, table, seed=-1)


def test_translation_errors():
    table = torch.randn(8, 3, dtype=torch.float64)
    raises(ValueError, "[translation] delta must be in [1, 7] for a table of 8 positions, got 8",
           posenc.translation_residual, table, deltas=[1, 8])
    raises(ValueError, "[translation] delta must be in [1, 7] for a table of 8 positions, got 0",
           posenc.translation_residual, table, deltas=[0])
    raises(ValueError, "[translation] folds must be in [2, 7] for delta 1 on a table of 8 positions, got 9",
           posenc.translation_residual, table, deltas=[1], folds=9)
    raises(ValueError, "[translation] seed must be >= 0, got -2", posenc.translation_residual, table, seed=-2)


def test_degenerate_input_is_refused():
    # Each read as perfect before: invariance 1, symmetry 1, residual 0.
    raises(ValueError, "[indicators] matrix must vary over the offsets 1 .. 4 (1 <= |y - x| <= 4), got S[x, y] = 2 "
           "there to within 1e-12 (relative): the indicators are undefined", posenc.indicators, torch.full((5, 5), 2.0))
    raises(ValueError, "[indicators] matrix must vary over the offsets 1 .. 7 (1 <= |y - x| <= 7), got S[x, y] = 0 "
           "there to within 1e-12 (relative): the indicators are undefined", posenc.indicators,
           posenc.proximity(torch.zeros(8, 3)))
    raises(ValueError, "[translation] the targets of delta 1 (rows 1 .. 7 of the table) must not all be zero, got all "
           "zeros: the relative residual is undefined", posenc.translation_residual, torch.zeros(8, 3), deltas=[1],
           folds=2)
    raises(ValueError, "[proximity] dot proximity must fit in float64, got products beyond 1.8e308 for a table whose "
           "largest |value| is 1.0000000000000001e+300 (use cosine proximity, which does not depend on scale)",
           posenc.proximity, torch.full((3, 2), 1e300, dtype=torch.float64))
