"""posenc.sinusoidal against float64 references: layouts, dtypes, shapes,
range vs list paths, and the precision claims near 2^24."""

import numpy as np
import pytest
import torch

import posenc
import references as ref

# Per output dtype: the largest error against the float64 reference, for values in [-1, 1].
TOLERANCE = {
    torch.float64: 1e-12,       # float64 sin/cos of the same angles
    torch.float32: 5e-7,        # the exact mode's documented bound
    # One rounding of the float32 value (itself within 5e-7) to an 8-bit / 11-bit
    # significand: half an ulp below 1, plus the float32 error.
    torch.bfloat16: 2.0 ** -9 + 5e-7,
    torch.float16: 2.0 ** -12 + 5e-7,
}

CASES = [
    # (dim, base, scale, layout, dtype): model widths (GPT-2 768, head 64, tiny 2)
    (768, 10000.0, 1.0, "interleaved", torch.float32),
    (64, 10000.0, 1.0, "half", torch.float32),
    (64, 10000.0, 1.0, "cos-sin", torch.float32),
    (2, 500.0, 1.0, "interleaved", torch.float32),
    (128, 10000.0, 1.0, "half", torch.float64),
    (64, 10000.0, 0.5, "cos-sin", torch.float64),
    (64, 10000.0, 1.0, "interleaved", torch.bfloat16),
    (64, 10000.0, 1.0, "half", torch.float16),
]


def max_error(actual, expected):
    return float(np.max(np.abs(actual.double().numpy() - expected))) if expected.size else 0.0


@pytest.mark.parametrize("dim,base,scale,layout,dtype", CASES)
def test_matches_reference_as_range_and_as_list(dim, base, scale, layout, dtype):
    expected = ref.sinusoidal(range(0, 300), dim, base, layout, scale)
    by_count = posenc.sinusoidal(300, dim, base=base, layout=layout, scale=scale, dtype=dtype)
    by_list = posenc.sinusoidal(torch.arange(300), dim, base=base, layout=layout, scale=scale, dtype=dtype)
    for out in (by_count, by_list):
        assert out.dtype == dtype and out.shape == (300, dim)
        assert max_error(out, expected) <= TOLERANCE[dtype] * scale


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_is_float32_rounded_once(dtype):
    low = posenc.sinusoidal(torch.arange(1000, 1100), 64, dtype=dtype)
    assert torch.equal(low, posenc.sinusoidal(torch.arange(1000, 1100), 64).to(dtype))


def test_positions_of_any_shape_and_strides():
    positions = torch.arange(40).reshape(5, 8).t()  # (8, 5), non-contiguous
    assert not positions.is_contiguous()
    out = posenc.sinusoidal(positions, 16)
    assert out.shape == (8, 5, 16)
    expected = ref.sinusoidal(positions.reshape(-1).tolist(), 16).reshape(8, 5, 16)
    assert max_error(out, expected) <= 5e-7
    # negative and unordered positions work too
    scattered = torch.tensor([[-7, 3], [1000000, 0]])
    assert max_error(posenc.sinusoidal(scattered, 8), ref.sinusoidal([-7, 3, 1000000, 0], 8).reshape(2, 2, 8)) <= 5e-7


def test_narrow_integer_positions_are_widened():
    out = posenc.sinusoidal(torch.arange(10, dtype=torch.int32), 8)
    assert torch.equal(out, posenc.sinusoidal(torch.arange(10), 8))


def test_empty_positions_give_an_empty_table():
    assert posenc.sinusoidal(torch.empty(0, dtype=torch.long), 8).shape == (0, 8)
    assert posenc.sinusoidal(torch.empty(3, 0, dtype=torch.long), 8).shape == (3, 0, 8)


def test_frequencies():
    assert posenc.sinusoidal_frequencies(16, base=100.0).dtype == torch.float64
    np.testing.assert_allclose(posenc.sinusoidal_frequencies(16, base=100.0).numpy(), ref.frequencies(16, 100.0),
                               rtol=4e-16)  # exp(log) vs pow: an ulp or two


# Positions just below 2^24, where float32 spacing of p is 1 and the naive product loses the angle.
NEAR_2_24 = [2 ** 24 - k for k in (0, 1, 2, 3, 77, 1000, 4097, 65536, 999983)]


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_exact_mode_is_within_5e7_near_2_24(layout):
    expected = ref.sinusoidal_exact(NEAR_2_24, 64, 10000.0, layout)
    out = posenc.sinusoidal(torch.tensor(NEAR_2_24), 64, layout=layout)
    assert max_error(out, expected) <= 5e-7


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_range_path_near_2_24(layout):
    # The rotation recurrence along a range (re-anchored every 64 rows) meets the same bound.
    start = 2 ** 24 - 300
    out = torch.ops.posenc.sinusoidal_range(start, 301, 64, 10000.0, 1.0, layout, "exact", None)
    assert max_error(out, ref.sinusoidal_exact(range(start, 2 ** 24 + 1), 64, 10000.0, layout)) <= 5e-7


def test_fp32_mode_reproduces_the_common_formula_and_drifts():
    positions = torch.tensor(NEAR_2_24)
    out = posenc.sinusoidal(positions, 64, precision="fp32")
    # Same float32 angles, sin/cos in float64, one rounding to float32: under one float32 ulp at 1.
    assert max_error(out, ref.sinusoidal_fp32_formula(NEAR_2_24, 64)) <= 1.2e-7
    # ...and far from the exact values: the float32 product has lost the angle.
    assert max_error(out, ref.sinusoidal_exact(NEAR_2_24, 64)) > 0.1
    # At small positions both modes agree to float32 accuracy.
    small = torch.arange(0, 64)
    assert torch.allclose(posenc.sinusoidal(small, 64, precision="fp32"), posenc.sinusoidal(small, 64), atol=2e-5)
