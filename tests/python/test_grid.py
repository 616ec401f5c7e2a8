"""posenc.sinusoidal_2d / sinusoidal_3d against references built from 1D
sinusoids per axis."""

import math

import numpy as np
import pytest
import torch

import posenc
import references as ref


def max_error(actual, expected):
    return float(np.max(np.abs(actual.double().numpy() - expected)))


@pytest.mark.parametrize("layout", ref.LAYOUTS)
@pytest.mark.parametrize("height,width,dim", [(14, 14, 768), (3, 5, 8), (1, 7, 4)])
def test_2d_matches_reference(height, width, dim, layout):
    out = posenc.sinusoidal_2d(height, width, dim, layout=layout)
    assert out.shape == (height * width, dim) and out.dtype == torch.float32
    assert max_error(out, ref.grid_2d(height, width, dim, layout=layout)) <= 5e-7  # float32 bound


@pytest.mark.parametrize("normalize_scale", [2 * math.pi, 1.0])
def test_2d_normalized_coordinates(normalize_scale):
    out = posenc.sinusoidal_2d(4, 6, 16, normalize=True, normalize_scale=normalize_scale, base=20.0,
                               dtype=torch.float64)
    expected = ref.grid_2d(4, 6, 16, base=20.0, normalize=True, normalize_scale=normalize_scale)
    assert max_error(out, expected) <= 1e-12


@pytest.mark.parametrize("layout", ref.LAYOUTS)
@pytest.mark.parametrize("frames,height,width,dim", [(2, 3, 4, 12), (4, 7, 7, 96), (1, 1, 1, 6)])
def test_3d_matches_reference(frames, height, width, dim, layout):
    out = posenc.sinusoidal_3d(frames, height, width, dim, layout=layout, dtype=torch.float64)
    assert out.shape == (frames * height * width, dim)
    assert max_error(out, ref.grid_3d(frames, height, width, dim, layout=layout)) <= 1e-12


def test_3d_normalized_in_bfloat16():
    out = posenc.sinusoidal_3d(3, 2, 5, 24, normalize=True, dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16
    # one rounding to bfloat16 of values in [-1, 1], plus the float32 error
    assert max_error(out, ref.grid_3d(3, 2, 5, 24, normalize=True)) <= 2.0 ** -9 + 5e-7
