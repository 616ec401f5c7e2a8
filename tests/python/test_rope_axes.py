"""Multi-axis and derived rotations against plain references: axial 2D/3D
RoPE (per-axis blocks and scalings), M-RoPE against transcriptions of
Qwen2-VL's apply_multimodal_rotary_pos_emb and Qwen3-VL's interleaved
assignment, xPos against torchscale's formula, and re-rotation of cached keys."""

import pytest
import torch

import posenc
import rope_references as ref


def randn(*shape, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def grid_coords(height, width):
    ys, xs = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    return torch.stack((ys.flatten(), xs.flatten()), dim=-1)  # (H*W, 2), row-major patches


# ---------------------------------------------------------------------------
# Axial


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_axial_2d_matches_per_axis_blocks(layout):
    coords = grid_coords(4, 5)  # 20 patches
    x = randn(2, 3, 20, 64)
    out = posenc.apply_rope_axial(x, coords, layout=layout)
    theta = ref.axial_angles(coords, [32, 32])
    assert (out - ref.rotate_with_angles(x, theta, 1.0, layout)).abs().max() < 1e-13
    # uneven split, partial rotary, batch coordinates (B, T, n_axes)
    coords_b = torch.stack((coords, coords.flip(0)))
    out = posenc.apply_rope_axial(x, coords_b, dims_per_axis=[16, 32], rotary_dim=48, layout=layout)
    theta = ref.axial_angles(coords_b, [16, 32])
    assert (out - ref.rotate_with_angles(x, theta, 1.0, layout)).abs().max() < 1e-13
    assert torch.equal(out[..., 48:], x[..., 48:])


def test_axial_3d_video_and_float32():
    t, h, w = torch.meshgrid(torch.arange(2), torch.arange(3), torch.arange(4), indexing="ij")
    coords = torch.stack((t.flatten(), h.flatten(), w.flatten()), dim=-1)  # (24, 3)
    x = randn(1, 2, 24, 48, dtype=torch.float32)
    out = posenc.apply_rope_axial(x, coords)  # 16 channels per axis
    expected = ref.rotate_with_angles(x.double(), ref.axial_angles(coords, [16, 16, 16]), 1.0, "half")
    ref.assert_rounded_once(out, expected, 3e-6)  # float32 math, a few ulps of |x| < 6


def test_axial_per_axis_scaling():
    # a larger image at inference: interpolate only the x axis (linear, factor 2)
    coords = grid_coords(3, 8)
    x = randn(1, 24, 32)
    scaling = [None, {"rope_type": "linear", "factor": 2.0}]
    out = posenc.apply_rope_axial(x, coords, scaling=scaling)
    omega_y = ref.default_inv_freq(16, 10000.0)
    omega_x = [w / 2.0 for w in omega_y]
    theta = ref.axial_angles(coords, [16, 16], inv_freqs=[omega_y, omega_x])
    assert (out - ref.rotate_with_angles(x, theta, 1.0, "half")).abs().max() < 1e-13
    # one dict is shared by every axis
    shared = posenc.apply_rope_axial(x, coords, scaling={"rope_type": "linear", "factor": 2.0})
    theta = ref.axial_angles(coords, [16, 16], inv_freqs=[omega_x, omega_x])
    assert (shared - ref.rotate_with_angles(x, theta, 1.0, "half")).abs().max() < 1e-13


def test_axial_with_one_axis_is_plain_rope():
    x = randn(2, 2, 9, 16)
    positions = torch.arange(9) * 3
    assert (posenc.apply_rope_axial(x, positions[:, None]) - posenc.apply_rope(x, positions)).abs().max() < 1e-15


# ---------------------------------------------------------------------------
# M-RoPE


def qwen_positions(batch, text, grid_t, grid_h, grid_w):
    """Qwen2-VL style position_ids (3, B, T): text tokens, then an image grid, then text."""
    t, h, w = [], [], []
    for k in range(text):
        t.append(k), h.append(k), w.append(k)
    start = text
    for a in range(grid_t):
        for b in range(grid_h):
            for c in range(grid_w):
                t.append(start + a), h.append(start + b), w.append(start + c)
    nxt = start + max(grid_t, grid_h, grid_w)
    for k in range(text):
        t.append(nxt + k), h.append(nxt + k), w.append(nxt + k)
    ids = torch.tensor([t, h, w])
    return torch.stack([ids + 7 * b for b in range(batch)], dim=1)  # (3, B, T)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mrope_matches_qwen2vl(dtype):
    positions = qwen_positions(2, 3, 2, 3, 4)  # T = 30
    x = randn(2, 4, positions.shape[-1], 32, dtype=dtype)
    section = [4, 6, 6]  # sums to 16 = R/2
    out = posenc.apply_mrope(x, positions, section)
    inv_freq = torch.tensor(ref.default_inv_freq(32, 10000.0), dtype=torch.float64)
    expected = ref.qwen2vl_mrope(x, positions, section, inv_freq)
    ref.assert_rounded_once(out, expected, 1e-13 if dtype == torch.float64 else 3e-6)


def test_mrope_interleaved_matches_qwen3vl():
    positions = qwen_positions(1, 4, 1, 4, 6)
    x = randn(1, 2, positions.shape[-1], 64)
    section = [12, 10, 10]  # Qwen3-VL's [24, 20, 20] at half the width
    out = posenc.apply_mrope(x, positions, section, interleaved=True)
    inv_freq = torch.tensor(ref.default_inv_freq(64, 10000.0), dtype=torch.float64)
    assert (out - ref.qwen3vl_mrope(x, positions, section, inv_freq)).abs().max() < 1e-13
    # the contiguous split is a different assignment
    assert (out - posenc.apply_mrope(x, positions, section)).abs().max() > 1e-3


def test_mrope_on_text_is_plain_rope():
    positions = torch.arange(10)
    x = randn(1, 3, 10, 32)
    same = positions.expand(3, 10)
    for interleaved in (False, True):
        out = posenc.apply_mrope(x, same, [4, 6, 6], interleaved=interleaved)
        assert (out - posenc.apply_rope(x, positions)).abs().max() < 1e-15


# ---------------------------------------------------------------------------
# xPos


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_xpos_matches_torchscale(layout):
    positions = torch.arange(40, 52)
    q, k = randn(2, 2, 12, 32, seed=1), randn(2, 2, 12, 32, seed=2)
    q_out, k_out = posenc.apply_xpos(q, k, positions, scale_base=64, layout=layout)
    assert (q_out - ref.reference_xpos(q, positions, 64, keys=False, layout=layout)).abs().max() < 1e-13
    assert (k_out - ref.reference_xpos(k, positions, 64, keys=True, layout=layout)).abs().max() < 1e-13


def test_xpos_scores_decay_with_distance_and_center_cancels():
    q, k = randn(1, 1, 32, seed=3), randn(1, 1, 32, seed=4)

    def score(i, j, center=0.0):
        qi, _ = posenc.apply_xpos(q, k, torch.tensor([i]), scale_base=16, center=center)
        _, kj = posenc.apply_xpos(q, k, torch.tensor([j]), scale_base=16, center=center)
        return (qi * kj).sum().item()

    # q.k carries zeta^((i - j)/scale_base): depends on the offset only, whatever the center
    assert score(100, 90) == pytest.approx(score(10, 0), rel=1e-12)
    assert score(100, 90, center=95.0) == pytest.approx(score(100, 90), rel=1e-12)
    # against the same offset without xPos: every pair scaled by zeta_j^(10/16) < 1
    zeta = ref.xpos_zeta(32)
    rq = posenc.apply_rope(q, torch.tensor([10]))
    rk = posenc.apply_rope(k, torch.tensor([0]))
    pairs = (rq * rk).reshape(2, 16).sum(0)  # half layout: channel j and j + 16 share zeta_j
    assert score(10, 0) == pytest.approx((pairs * zeta ** (10 / 16)).sum().item(), rel=1e-12)


# ---------------------------------------------------------------------------
# Re-rotation


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rerotate_equals_rotating_the_raw_keys_at_the_new_positions(layout):
    k = randn(2, 3, 10, 64)
    src = torch.arange(5000, 5010)
    dst = torch.arange(10)  # context shift: the cache moves to the front
    cached = posenc.apply_rope(k, src, layout=layout)
    moved = posenc.rerotate(cached, src, dst, layout=layout)
    # one exact rotation by the angle difference: float64 round-off of two rotations
    assert (moved - posenc.apply_rope(k, dst, layout=layout)).abs().max() < 1e-12
    # in place, per batch positions
    src_b = torch.stack((src, src + 100))
    cached_b = posenc.apply_rope(k, src_b, layout=layout)
    posenc.rerotate(cached_b, src_b, torch.stack((dst, dst + 1)), layout=layout, inplace=True)
    assert (cached_b - posenc.apply_rope(k, torch.stack((dst, dst + 1)), layout=layout)).abs().max() < 1e-12


def test_rerotate_between_frequency_sets_and_regimes():
    k = randn(1, 2, 6, 32)
    positions = torch.arange(6) + 60
    # base change (e.g. after a rope_theta change) and a scaling switch, attention factor ratio included
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    cached = posenc.apply_rope(k, positions, base=10000.0)
    moved = posenc.rerotate(cached, positions, positions, base=10000.0, to_base=500000.0, to_scaling=yarn)
    assert (moved - posenc.apply_rope(k, positions, base=500000.0, scaling=yarn)).abs().max() < 1e-12
    # longrope: keys cached in the short regime move to the long one when the sequence grows past L0
    longrope = {"rope_type": "longrope", "original_max_position_embeddings": 64, "factor": 4.0,
                "short_factor": [1.0 + 0.1 * j for j in range(16)], "long_factor": [2.0 + j for j in range(16)]}
    short = posenc.apply_rope(k, positions, scaling=longrope, seq_len=64)
    long = posenc.rerotate(short, positions, positions, scaling=longrope, seq_len=64, to_seq_len=200)
    assert (long - posenc.apply_rope(k, positions, scaling=longrope, seq_len=200)).abs().max() < 1e-12


def test_rerotate_precision_near_2_24():
    # the angle difference is formed exactly, so moving keys by a large offset loses nothing
    k = randn(1, 4, 128, dtype=torch.float32)
    src = torch.tensor([(1 << 24) - 7, (1 << 24) - 3, 1 << 24, (1 << 24) + 9])
    dst = torch.tensor([3, 7, 10, 19])
    moved = posenc.rerotate(posenc.apply_rope(k, src), src, dst)
    direct = posenc.apply_rope(k, dst)
    assert (moved - direct).abs().max() < 5e-6  # two float32 rotations of |k| < 6, exact angles
