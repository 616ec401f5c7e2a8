"""The translation operator of the sinusoidal encoding: PE[p + d] = T(d) PE[p]
and T(a) T(b) = T(a + b), in every layout."""

import pytest
import torch

import posenc
import references as ref


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_translation_moves_the_table(layout):
    positions = torch.arange(-20, 200)
    table = posenc.sinusoidal(positions, 32, layout=layout, base=500.0, dtype=torch.float64)
    for delta in (1, 17, -5, 1000):
        moved = posenc.sinusoidal(positions + delta, 32, layout=layout, base=500.0, dtype=torch.float64)
        t = posenc.translation_matrix(float(delta), 32, layout=layout, base=500.0)
        assert t.dtype == torch.float64 and t.shape == (32, 32)
        # a 32-term float64 dot product of values <= 1: a few 1e-16, times the angle error of delta*omega
        assert torch.allclose(table @ t.T, moved, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_translations_compose_and_are_rotations(layout):
    t = lambda d: posenc.translation_matrix(d, 64, layout=layout)  # noqa: E731
    assert torch.allclose(t(3.0) @ t(4.5), t(7.5), rtol=0, atol=1e-14)
    assert torch.allclose(t(-12.0) @ t(12.0), torch.eye(64, dtype=torch.float64), rtol=0, atol=1e-14)
    assert torch.allclose(t(0.0), torch.eye(64, dtype=torch.float64), rtol=0, atol=0)
    rot = t(123.25)
    assert torch.allclose(rot.T @ rot, torch.eye(64, dtype=torch.float64), rtol=0, atol=1e-14)


def test_translation_blocks_follow_the_reference():
    # interleaved: the block of frequency i sits at rows/cols 2i, 2i+1 and rotates by delta*omega_i
    t = posenc.translation_matrix(2.0, 8)
    omega = ref.frequencies(8)
    for i in range(4):
        c, s = torch.cos(torch.tensor(2.0 * omega[i])), torch.sin(torch.tensor(2.0 * omega[i]))
        block = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        assert torch.allclose(t[2 * i:2 * i + 2, 2 * i:2 * i + 2], block, rtol=0, atol=1e-15)
