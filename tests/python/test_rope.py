"""posenc.apply_rope, rope_cos_sin and rope_inv_freq against the plain
float64 references of rope_references.py (Hugging Face's formulation), in
both layouts, every dtype, partial rotary, (T) and (B, T) positions, strided
views and in place; and the properties: norms kept, inverse undoes, q.k
depends only on j - i (even near 2^24 in exact mode, visibly not in fp32)."""

import inspect
import math

import pytest
import torch

import posenc
import rope_references as ref

LAYOUTS = ["half", "interleaved"]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

# Slack before the final rounding, per dtype of x (x ~ N(0, 1), |x| < 6): float32 math on
# float32 tables (a few float32 ulps of 6); float64 math (a few float64 ulps of 6).
SLACK = {torch.float64: 1e-14, torch.float32: 3e-6, torch.bfloat16: 3e-6, torch.float16: 3e-6}


def slack(dtype, positions, x):
    """SLACK, plus for float64 the reference's own error: its frequencies (float64 pow) and
    ours (long double, rounded once) differ by ~2 ulps, its angle p*omega is rounded once,
    so its angles are off by up to ~4e-16 * |p|."""
    if dtype != torch.float64 or positions.numel() == 0:
        return SLACK[dtype]
    return SLACK[dtype] + 4e-16 * positions.abs().max().item() * x.abs().max().item()


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


# (name, x shape, positions, rotary_dim) -- real head dims, GQA-like head counts, partial rotary
CASES = [
    ("llama-like", (2, 4, 9, 64), torch.arange(9), None),
    ("batch-positions", (2, 3, 7, 32), torch.tensor([[5, 6, 7, 8, 9, 10, 11], [0, 3, 3, 1, 40, 2, 100]]), None),
    ("partial-rotary", (1, 2, 6, 80), torch.arange(100, 106), 32),   # phi-2: rotary_dim 32 of 80
    ("2-D x", (12, 16), torch.arange(12) * 1000, None),
    ("5-D x", (2, 2, 3, 5, 8), torch.arange(5), None),
    ("3-D x, (B, T)", (2, 5, 8), torch.arange(10).reshape(2, 5), None),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_apply_rope_matches_reference(case, dtype, layout):
    _, shape, positions, rotary_dim = case
    x = randn(*shape, dtype=dtype)
    out = posenc.apply_rope(x, positions, layout=layout, rotary_dim=rotary_dim)
    assert out.dtype == dtype and out.shape == x.shape
    expected = ref.reference_rope(x.double(), positions, dim=rotary_dim, layout=layout)
    ref.assert_rounded_once(out, expected, slack(dtype, positions, x))
    if rotary_dim is not None:
        assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])  # the rest copied exactly


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cos_sin_tables_match_hugging_face(layout):
    # HF: emb = cat(freqs, freqs); our tables hold the R/2 distinct values
    positions = torch.tensor([0, 1, 7, 4095, 123456])
    cos, sin = posenc.rope_cos_sin(positions, 64, base=500000.0)
    inv_freq = torch.tensor(ref.default_inv_freq(64, 500000.0), dtype=torch.float64)
    theta = positions.double()[:, None] * inv_freq
    assert cos.dtype == torch.float32 and cos.shape == (5, 32)
    # 2 float32 ulps of 1: exact angles, one rounding of cos/sin
    assert (cos.double() - theta.cos()).abs().max() < 2.4e-7
    assert (sin.double() - theta.sin()).abs().max() < 2.4e-7
    # an int N is the range 0 .. N-1, the same values
    cos_n, sin_n = posenc.rope_cos_sin(10, 16)
    cos_t, sin_t = posenc.rope_cos_sin(torch.arange(10), 16)
    assert cos_n.shape == (10, 8)
    assert (cos_n - cos_t).abs().max() < 3e-7 and (sin_n - sin_t).abs().max() < 3e-7  # recurrence vs direct
    # any shape S gives S + [dim/2]; float64 on request
    cos64, _ = posenc.rope_cos_sin(torch.arange(6).reshape(2, 3), 8, dtype=torch.float64)
    assert cos64.shape == (2, 3, 4) and cos64.dtype == torch.float64


def test_inv_freq_default():
    inv_freq, factor = posenc.rope_inv_freq(128, base=10000.0)
    assert inv_freq.dtype == torch.float64 and inv_freq.shape == (64,) and factor == 1.0
    expected = ref.reference_frequencies(128, 10000.0)[0]
    assert torch.allclose(inv_freq, expected, rtol=1e-15, atol=0)  # a float64 pow, one rounding each


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotation_keeps_norms_and_inverse_undoes(layout):
    x = randn(2, 4, 33, 64, dtype=torch.float64)
    positions = torch.arange(1000, 1033)
    y = posenc.apply_rope(x, positions, layout=layout)
    pair_norm = lambda t: (t[..., :32] ** 2 + t[..., 32:] ** 2) if layout == "half" else (  # noqa: E731
        t[..., 0::2] ** 2 + t[..., 1::2] ** 2)
    assert torch.allclose(pair_norm(y), pair_norm(x), rtol=1e-13, atol=1e-13)  # each pair's norm, float64
    back = posenc.apply_rope(y, positions, layout=layout, inverse=True)
    assert (back - x).abs().max() < 1e-13
    # float32: the inverse undoes to float32 accuracy (two roundings of ~|x| ulps)
    x32 = x.float()
    back32 = posenc.apply_rope(posenc.apply_rope(x32, positions, layout=layout), positions, layout=layout,
                               inverse=True)
    assert (back32 - x32).abs().max() < 4e-6


def test_inverse_is_the_negative_angle():
    x = randn(3, 8, 16, dtype=torch.float64)
    positions = torch.arange(8)
    assert torch.allclose(posenc.apply_rope(x, positions, inverse=True), posenc.apply_rope(x, -positions),
                          rtol=0, atol=1e-14)


def scores(q, k, i, j, precision):
    qi = posenc.apply_rope(q, torch.tensor([i]), precision=precision)
    kj = posenc.apply_rope(k, torch.tensor([j]), precision=precision)
    return (qi * kj).sum().item()


def test_scores_depend_on_offset_only_near_2_24_in_exact_mode():
    q = randn(1, 128, seed=1)
    k = randn(1, 128, seed=2)
    near = 1 << 24
    for offset in (0, 1, 17, 1000):
        small = scores(q, k, 5, 5 + offset, "exact")
        big = scores(q, k, near - 3, near - 3 + offset, "exact")
        # float32 tables within a few ulps at any position: the score changes by ~1e-6 * |q||k|
        assert abs(big - small) < 2e-4, (offset, small, big)


def test_fp32_mode_drifts_near_2_24_and_exact_mode_does_not():
    q = randn(1, 128, seed=3)
    k = randn(1, 128, seed=4)
    near = (1 << 24) - 5
    exact = ref.reference_rope(q.double(), torch.tensor([near]))
    fp32 = posenc.apply_rope(q, torch.tensor([near]), precision="fp32").double()
    ours = posenc.apply_rope(q, torch.tensor([near]), precision="exact").double()
    # exact angles: float32 accuracy; the float32 formula p*omega in float32 is off by up to ~1 radian
    assert (ours - exact).abs().max() < 3e-6
    assert (fp32 - exact).abs().max() > 0.1
    drift = [abs(scores(q, k, near, near + d, "fp32") - scores(q, k, 0, d, "fp32")) for d in (1, 7)]
    assert max(drift) > 0.1


def test_fp32_mode_reproduces_the_float32_formula():
    # The float32 formula (kernels/rope.h): omega rounded to float32, p to float32, the product in float32.
    positions = torch.arange(0, 3000, 7)
    inv_freq = ref.reference_frequencies(64)[0].float()
    freqs = positions.float()[:, None] * inv_freq[None, :]  # float32 angles
    cos, sin = posenc.rope_cos_sin(positions, 64, precision="fp32")
    # cos/sin of that float32 angle, rounded once (2 float32 ulps of 1)
    assert (cos.double() - freqs.double().cos()).abs().max() < 2.4e-7
    assert (sin.double() - freqs.double().sin()).abs().max() < 2.4e-7
    # and far from the exact angles: 3000 * omega in float32 is off by up to ~1e-4 rad
    exact_cos, _ = posenc.rope_cos_sin(positions, 64)
    assert (exact_cos - cos).abs().max() > 1e-5


@pytest.mark.parametrize("layout", LAYOUTS)
def test_strided_views(layout):
    # HF: q = proj(x).view(B, T, H, D).transpose(1, 2) -> (B, H, T, D), not contiguous
    base = randn(2, 7, 4, 32, dtype=torch.float64)
    q = base.transpose(1, 2)
    assert not q.is_contiguous()
    positions = torch.arange(7) + 50
    expected = ref.reference_rope(q, positions, layout=layout)
    assert (posenc.apply_rope(q, positions, layout=layout) - expected).abs().max() < 1e-13
    # a view no single stride describes (heads of a permuted 5-D tensor), and a strided last dim
    five = torch.arange(5)
    odd = randn(3, 2, 2, 5, 8, dtype=torch.float64).permute(1, 0, 2, 3, 4)
    assert (posenc.apply_rope(odd, five) - ref.reference_rope(odd, five)).abs().max() < 1e-13
    sliced = randn(2, 5, 16, dtype=torch.float64)[..., ::2]
    assert (posenc.apply_rope(sliced, five) - ref.reference_rope(sliced, five)).abs().max() < 1e-13
    # expanded (stride 0) heads are read fine
    shared = randn(1, 1, 5, 8, dtype=torch.float64).expand(2, 3, 5, 8)
    assert (posenc.apply_rope(shared, five) - ref.reference_rope(shared, five)).abs().max() < 1e-13


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_in_place(dtype):
    x = randn(2, 3, 6, 16, dtype=dtype)
    positions = torch.tensor([[3, 4, 5, 6, 7, 8], [0, 0, 1, 1, 2, 2]])
    expected = posenc.apply_rope(x, positions, layout="interleaved")
    y = x.clone()
    version = y._version
    out = posenc.apply_rope(y, positions, layout="interleaved", inplace=True)
    assert out is y and torch.equal(y, expected) and y._version > version
    # in place through a non-contiguous view writes back into the base tensor
    base = x.transpose(1, 2).contiguous()  # (B, T, H, D)
    view = base.transpose(1, 2)
    posenc.apply_rope(view, positions, layout="interleaved", inplace=True)
    assert torch.equal(base.transpose(1, 2), expected)


def test_in_place_is_refused_while_x_requires_grad():
    x = randn(1, 4, 8, dtype=torch.float64).requires_grad_()
    with pytest.raises(RuntimeError) as info:
        posenc.apply_rope(x.clone(), torch.arange(4), inplace=True)
    assert str(info.value).startswith(
        "[rope] inplace=True is not differentiable, but x requires grad: use inplace=False, or run under "
        "torch.no_grad()")
    with torch.no_grad():
        y = x.clone()
        posenc.apply_rope(y, torch.arange(4), inplace=True)
    assert torch.equal(y, posenc.apply_rope(x.detach(), torch.arange(4)))


def test_empty_sequence():
    x = torch.zeros(2, 3, 0, 8)
    out = posenc.apply_rope(x, torch.zeros(0, dtype=torch.long))
    assert out.shape == (2, 3, 0, 8)
    cos, sin = posenc.rope_cos_sin(torch.zeros(0, dtype=torch.long), 8)
    assert cos.shape == (0, 4) and sin.shape == (0, 4)


def test_integer_positions_of_other_widths():
    x = randn(1, 5, 8)
    assert torch.equal(posenc.apply_rope(x, torch.arange(5, dtype=torch.int32)), posenc.apply_rope(x, torch.arange(5)))


def test_attention_factor_multiplies_cos_and_sin():
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    cos, sin = posenc.rope_cos_sin(torch.arange(16), 16, scaling=scaling, dtype=torch.float64)
    _, factor = posenc.rope_inv_freq(16, scaling=scaling)
    assert factor == pytest.approx(0.1 * math.log(4) + 1, rel=1e-15)  # YaRN's sqrt(1/t), Peng et al. 2023
    assert torch.allclose(cos ** 2 + sin ** 2, torch.full_like(cos, factor ** 2), rtol=1e-14, atol=0)
    x = randn(1, 16, 16, dtype=torch.float64)
    y = posenc.apply_rope(x, torch.arange(16), scaling=scaling)
    assert torch.allclose(y.norm(dim=-1), factor * x.norm(dim=-1), rtol=1e-13, atol=0)


# The Python names and signatures are a contract (issue 3).
SIGNATURES = {
    "rope_inv_freq": "(dim, *, base=10000.0, scaling=None, seq_len=None)",
    "rope_cos_sin": "(positions, dim, *, base=10000.0, scaling=None, seq_len=None, precision='exact', "
                    "dtype=torch.float32)",
    "apply_rope": "(x, positions, *, base=10000.0, layout='half', rotary_dim=None, scaling=None, seq_len=None, "
                  "inverse=False, precision='exact', inplace=False, omega=None)",
    "apply_rope_axial": "(x, coords, *, dims_per_axis=None, base=10000.0, layout='half', rotary_dim=None, "
                        "scaling=None, seq_len=None, inverse=False, precision='exact')",
    "apply_mrope": "(x, positions3, mrope_section, *, interleaved=False, base=10000.0, layout='half', "
                   "rotary_dim=None, scaling=None, seq_len=None, inverse=False, precision='exact')",
    "apply_xpos": "(q, k, positions, *, scale_base=512, gamma=0.4, base=10000.0, layout='half', rotary_dim=None, "
                  "precision='exact', center=0.0)",
    "rerotate": "(k, from_positions, to_positions, *, base=10000.0, layout='half', rotary_dim=None, scaling=None, "
                "seq_len=None, to_base=None, to_scaling=None, to_seq_len=None, precision='exact', inplace=False)",
}


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_rope_names_and_signatures(name):
    function = getattr(posenc, name)
    assert name in posenc.__all__
    assert str(inspect.signature(function)) == SIGNATURES[name]
    assert function.__doc__
