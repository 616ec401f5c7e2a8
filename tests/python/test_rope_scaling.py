"""Every rope_scaling type through posenc.rope_inv_freq, rope_cos_sin and
apply_rope against Hugging Face's formulas transcribed in rope_references.py,
with the model configs people use; the regime that seq_len selects (dynamic,
longrope) and its default, max position + 1."""

import math

import pytest
import torch

import posenc
import rope_references as ref

PHI3_SHORT = [1.0 + 0.01 * k for k in range(48)]
PHI3_LONG = [1.0 + 0.5 * k for k in range(48)]

# (id, dim, base, scaling, seq_len) -- shapes and values of real configs
CONFIGS = [
    ("default", 128, 10000.0, None, None),
    ("linear", 128, 10000.0, {"rope_type": "linear", "factor": 4.0}, None),
    ("legacy key 'type'", 128, 10000.0, {"type": "linear", "factor": 2}, None),
    ("ntk", 64, 10000.0, {"rope_type": "ntk", "factor": 8.0}, None),
    ("dynamic, short", 128, 10000.0,
     {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}, 1000),
    ("dynamic, long", 128, 10000.0,
     {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}, 10000),
    ("yarn (qwen2.5)", 128, 1000000.0,
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, None),
    ("yarn (deepseek-v3)", 64, 10000.0,
     {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
      "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}, None),
    ("yarn, no truncate, mscale", 64, 10000.0,
     {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048, "truncate": False,
      "mscale": 0.707, "mscale_all_dim": 1.0}, None),
    ("yarn, attention_factor", 32, 10000.0,
     {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 512, "attention_factor": 1.5}, None),
    ("longrope (phi-3), short", 96, 10000.0,
     {"rope_type": "longrope", "original_max_position_embeddings": 4096, "max_position_embeddings": 131072,
      "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG}, 4096),
    ("longrope (phi-3), long", 96, 10000.0,
     {"type": "longrope", "original_max_position_embeddings": 4096, "max_position_embeddings": 131072,
      "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG}, 4097),
    ("llama3 (llama 3.1)", 128, 500000.0,
     {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}, None),
]


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_inv_freq_and_attention_factor_match_hugging_face(config):
    _, dim, base, scaling, seq_len = config
    inv_freq, factor = posenc.rope_inv_freq(dim, base=base, scaling=scaling, seq_len=seq_len)
    expected, expected_factor = ref.reference_frequencies(dim, base, scaling, seq_len)
    assert inv_freq.dtype == torch.float64 and inv_freq.shape == (dim // 2,)
    # float64 Python math against long double rounded once: a few float64 ulps
    assert torch.allclose(inv_freq, expected, rtol=2e-14, atol=0), (inv_freq - expected).abs().max()
    assert factor == pytest.approx(expected_factor, rel=1e-14)


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_cos_sin_and_apply_use_the_scaled_frequencies(config):
    _, dim, base, scaling, seq_len = config
    positions = torch.tensor([0, 1, 2, 999, 4095, 4096, 70000])
    expected_freq, factor = ref.reference_frequencies(dim, base, scaling, seq_len)
    theta = positions.double()[:, None] * expected_freq
    cos, sin = posenc.rope_cos_sin(positions, dim, base=base, scaling=scaling, seq_len=seq_len,
                                   dtype=torch.float64)
    # float64 tables; the reference angle is rounded once and its frequencies ~2 ulps off: ~4e-16 * 70000
    assert (cos - factor * theta.cos()).abs().max() < 1e-10
    assert (sin - factor * theta.sin()).abs().max() < 1e-10
    x = torch.randn(2, 3, len(positions), dim, dtype=torch.float64)
    for layout in ("half", "interleaved"):
        out = posenc.apply_rope(x, positions, base=base, scaling=scaling, seq_len=seq_len, layout=layout)
        expected = ref.rotate_with_angles(x, theta, factor, layout)
        assert (out - expected).abs().max() < 1e-9  # the same angle error as the tables, times |x| < 6
        # float32 and bfloat16: float32 math (a few float32 ulps of factor * |x|), then one rounding
        for dtype in (torch.float32, torch.bfloat16):
            low = x.to(dtype)
            out = posenc.apply_rope(low, positions, base=base, scaling=scaling, seq_len=seq_len, layout=layout)
            ref.assert_rounded_once(out, ref.rotate_with_angles(low.double(), theta, factor, layout), 4e-6 * factor)


def test_golden_attention_factors():
    # YaRN (Peng et al. 2023): 0.1 ln s + 1; Phi-3-mini-128k: sqrt(1 + ln 32 / ln 4096) = sqrt(17/12)
    _, yarn4 = posenc.rope_inv_freq(64, scaling={"rope_type": "yarn", "factor": 4.0,
                                                 "original_max_position_embeddings": 4096})
    assert yarn4 == pytest.approx(1.1386294361119891, rel=1e-15)
    _, phi3 = posenc.rope_inv_freq(96, scaling={"rope_type": "longrope", "original_max_position_embeddings": 4096,
                                                "max_position_embeddings": 131072, "short_factor": PHI3_SHORT,
                                                "long_factor": PHI3_LONG})
    assert phi3 == pytest.approx(math.sqrt(17 / 12), rel=1e-15)


def test_seq_len_defaults_to_max_position_plus_one():
    # dynamic: positions up to 8191 select the base of L = 8192 (twice the original 4096)
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}
    x = torch.randn(1, 2, 3, 32, dtype=torch.float64)
    long_positions = torch.tensor([0, 100, 8191])
    by_default = posenc.apply_rope(x, long_positions, scaling=scaling)
    explicit = posenc.apply_rope(x, long_positions, scaling=scaling, seq_len=8192)
    assert torch.equal(by_default, explicit)
    unscaled = posenc.apply_rope(x, long_positions)
    assert (by_default - unscaled).abs().max() > 1e-3  # the regime changed
    # within the original length: the default spectrum exactly
    short_positions = torch.tensor([0, 5, 4095])
    assert torch.equal(posenc.apply_rope(x, short_positions, scaling=scaling), posenc.apply_rope(x, short_positions))
    # the same rule for the tables, the range form included (N positions: L = N)
    cos_range, _ = posenc.rope_cos_sin(8192, 32, scaling=scaling)
    cos_list, _ = posenc.rope_cos_sin(torch.tensor([8191]), 32, scaling=scaling)
    assert (cos_range[-1] - cos_list[0]).abs().max() < 5e-7  # recurrence vs direct, float32


def test_longrope_switches_factors_at_the_original_length():
    scaling = {"rope_type": "longrope", "original_max_position_embeddings": 64, "factor": 4.0,
               "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}
    short, _ = posenc.rope_inv_freq(16, scaling=scaling, seq_len=64)
    long, _ = posenc.rope_inv_freq(16, scaling=scaling, seq_len=65)
    unset, _ = posenc.rope_inv_freq(16, scaling=scaling)
    assert torch.equal(short, unset) and torch.allclose(long * 2, short, rtol=1e-15, atol=0)


def test_scaling_object_and_dict_agree():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    built = torch.classes.posenc.RopeScaling(**scaling)
    assert built.rope_type() == "llama3"
    a, _ = posenc.rope_inv_freq(128, base=500000.0, scaling=scaling)
    b, _ = posenc.rope_inv_freq(128, base=500000.0, scaling=built)
    assert torch.equal(a, b)
    # None values are unset keys, as in configs that list every key
    with_nones = dict(scaling, mscale=None, beta_fast=None)
    assert torch.equal(posenc.rope_inv_freq(128, base=500000.0, scaling=with_nones)[0], a)
