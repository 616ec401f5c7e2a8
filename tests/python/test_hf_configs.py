"""posenc.hf.positional_scheme: Hugging Face config.json files as models publish them.

Each config below is written from the HF model code's semantics (config class, attention code,
modeling_rope_utils.py). For every one the scheme's values are checked against what HF reads, and for
rotary ones the module's float64 cos/sin against the HF frequency formula of that rope_type, evaluated
in float64 by rope_references.py with the parameters written here by hand (not read back from posenc).
"""

import json
import math

import pytest
import torch

import posenc
import posenc.hf
import posenc.nn as pnn
import rope_references as ref

# float64 tables vs float64 math here: the frequencies may differ in their last bit (posenc forms them in
# long double), which an angle of up to ~8e3 rad (position 8191) turns into ~1e-12; 5e-12 leaves room.
TOL = 5e-12


def scheme(config):
    return posenc.hf.positional_scheme(config)


def check_tables(module, inv_freq, attention_factor, positions):
    """module.cos_sin(positions) in float64 against cos/sin(p * inv_freq) * attention_factor."""
    inv = torch.as_tensor(inv_freq, dtype=torch.float64)
    p = torch.as_tensor(positions, dtype=torch.int64)
    cos, sin = module.cos_sin(p, dtype=torch.float64)
    angle = p.to(torch.float64)[:, None] * inv[None, :]
    torch.testing.assert_close(cos, torch.cos(angle) * attention_factor, rtol=0, atol=TOL)
    torch.testing.assert_close(sin, torch.sin(angle) * attention_factor, rtol=0, atol=TOL)


POS = list(range(0, 64)) + [1000, 4095, 8191]

# ---------------------------------------------------------------- rotary families

LLAMA31 = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
           "rope_theta": 500000.0, "vocab_size": 128256, "torch_dtype": "bfloat16",
           "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"}}


def test_llama31_llama3_scaling():
    s = scheme(LLAMA31)
    r = s.rotary
    assert isinstance(r, pnn.RotaryEmbedding)
    assert (r.head_dim, r.rotary_dim, r.base, r.layout) == (128, 128, 500000.0, "half")
    assert r.scaling == {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    assert s.bias is None and s.absolute is None and s.relative is None
    inv, af = ref.hf_llama3(128, 500000.0, 8.0, 1.0, 4.0, 8192)
    check_tables(r, inv, af, POS)


def test_mistral_explicit_head_dim():
    # Mistral-Nemo: head_dim 128 although hidden_size / heads = 160.
    s = scheme({"model_type": "mistral", "hidden_size": 5120, "num_attention_heads": 32, "head_dim": 128,
                "rope_theta": 1000000.0, "max_position_embeddings": 1024000, "sliding_window": None})
    assert (s.rotary.head_dim, s.rotary.rotary_dim, s.rotary.scaling) == (128, 128, None)
    check_tables(s.rotary, ref.default_inv_freq(128, 1e6), 1.0, POS)


def test_qwen25_yarn_legacy_type_key():
    s = scheme({"model_type": "qwen2", "hidden_size": 5120, "num_attention_heads": 40, "rope_theta": 1000000.0,
                "max_position_embeddings": 32768, "use_sliding_window": False, "max_window_layers": 70,
                "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}})
    r = s.rotary
    assert r.scaling == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    inv, af = ref.hf_yarn(128, 1e6, 4.0, 32768)
    check_tables(r, inv, af, POS)


def test_transformers_v5_rope_parameters():
    # v5: rope_theta and partial_rotary_factor inside rope_parameters.
    s = scheme({"model_type": "qwen3", "hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128,
                "max_position_embeddings": 40960,
                "rope_parameters": {"rope_type": "linear", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5,
                                    "factor": 2.0}})
    r = s.rotary
    assert (r.head_dim, r.rotary_dim, r.base) == (128, 64, 1e6)
    check_tables(r, ref.hf_linear(64, 1e6, 2.0)[0], 1.0, POS)


def test_yarn_beta_fast_equal_beta_slow():
    # HF only warns on beta_fast < beta_slow; equal betas give a 0.001-wide ramp, which posenc computes too.
    cfg = {"model_type": "qwen3", "hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128,
           "rope_theta": 1000000.0, "max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                            "beta_fast": 4, "beta_slow": 4}}
    for truncate in (True, False):
        cfg["rope_scaling"]["truncate"] = truncate
        r = scheme(cfg).rotary
        inv, af = ref.hf_yarn(128, 1e6, 4.0, 32768, beta_fast=4, beta_slow=4, truncate=truncate)
        check_tables(r, inv, af, POS)
    # The functional API accepts them as well.
    inv, af = posenc.rope_inv_freq(128, base=1e6, scaling=cfg["rope_scaling"])
    torch.testing.assert_close(inv, torch.tensor(ref.hf_yarn(128, 1e6, 4.0, 32768, beta_fast=4, beta_slow=4,
                                                             truncate=False)[0], dtype=torch.float64),
                               rtol=1e-14, atol=0)


def test_qwen2_vl_mrope_section():
    s = scheme({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1000000.0,
                "max_position_embeddings": 32768, "vision_config": {"depth": 32, "embed_dim": 1280},
                "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})
    r = s.rotary
    assert isinstance(r, pnn.MultimodalRotaryEmbedding)
    assert (r.head_dim, r.mrope_section, r.interleaved, r.base) == (128, [16, 24, 24], False, 1e6)
    torch.manual_seed(0)
    q = torch.randn(1, 2, 5, 128, dtype=torch.float64)
    pos3 = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 1, 1, 2], [0, 1, 0, 1, 0]])
    want = ref.qwen2vl_mrope(q, pos3[:, None, :], [16, 24, 24], torch.tensor(ref.default_inv_freq(128, 1e6)))
    got, _ = r(q, q, pos3)
    # 2e-6: apply_mrope rotates float64 x with float32 cos/sin (measured 2e-7 = ~1 float32 ulp times |q| ~ 3).
    torch.testing.assert_close(got, want, rtol=0, atol=2e-6)


def test_qwen3_vl_interleaved_in_text_config():
    s = scheme({"model_type": "qwen3_vl", "text_config": {
        "model_type": "qwen3_vl_text", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
        "rope_theta": 5000000, "max_position_embeddings": 262144,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"}}})
    r = s.rotary
    assert (r.mrope_section, r.interleaved, r.base) == ([24, 20, 20], True, 5e6)
    torch.manual_seed(1)
    q = torch.randn(1, 1, 4, 128, dtype=torch.float64)
    pos3 = torch.tensor([[0, 1, 2, 3], [0, 2, 1, 3], [0, 1, 3, 2]])
    want = ref.qwen3vl_mrope(q, pos3[:, None, :], [24, 20, 20], torch.tensor(ref.default_inv_freq(128, 5e6)))
    torch.testing.assert_close(r(q, q, pos3)[0], want, rtol=0, atol=2e-6)  # float32 tables, as above


def test_phi2_partial_rotary():
    s = scheme({"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4,
                "rope_theta": 10000.0, "max_position_embeddings": 2048})
    assert (s.rotary.head_dim, s.rotary.rotary_dim, s.rotary.layout) == (80, 32, "half")
    check_tables(s.rotary, ref.default_inv_freq(32, 10000.0), 1.0, POS)


SHORT = [1.0 + 0.01 * i for i in range(48)]
LONG = [1.0 + 0.5 * i for i in range(48)]
PHI3 = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "rope_theta": 10000.0,
        "original_max_position_embeddings": 4096, "max_position_embeddings": 131072, "sliding_window": 262144,
        "rope_scaling": {"type": "longrope", "short_factor": SHORT, "long_factor": LONG}}


def test_phi3_longrope_top_level_lengths():
    r = scheme(PHI3).rotary
    assert r.rotary_dim == 96
    assert r.scaling == {"rope_type": "longrope", "original_max_position_embeddings": 4096,
                         "max_position_embeddings": 131072, "short_factor": SHORT, "long_factor": LONG}
    # Short regime up to 4096 positions, long beyond; attention factor sqrt(1 + ln(32) / ln(4096)).
    inv, af = ref.hf_longrope(96, 10000.0, 4096, SHORT, LONG, seq_len=100, max_position_embeddings=131072)
    assert af == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)), rel=1e-15)
    check_tables(r, inv, af, list(range(100)))
    inv, af = ref.hf_longrope(96, 10000.0, 4096, SHORT, LONG, seq_len=5001, max_position_embeddings=131072)
    check_tables(r, inv, af, [0, 17, 5000])


def test_deepseek_v3_rope_part():
    s = scheme({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "kv_lora_rank": 512,
                "max_position_embeddings": 163840, "rope_theta": 10000,
                "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                 "original_max_position_embeddings": 4096, "type": "yarn"}})
    r = s.rotary
    assert (r.head_dim, r.rotary_dim, r.layout) == (64, 64, "interleaved")
    inv, af = ref.hf_yarn(64, 10000.0, 40.0, 4096, beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=1.0)
    assert af == 1.0
    check_tables(r, inv, af, POS)
    v2 = scheme({"model_type": "deepseek_v2", "hidden_size": 5120, "num_attention_heads": 128,
                 "qk_rope_head_dim": 64, "rope_theta": 10000, "max_position_embeddings": 2048})
    assert v2.rotary.layout == "interleaved" and v2.rotary.scaling is None


def test_gpt_oss_yarn_no_truncate():
    r = scheme({"model_type": "gpt_oss", "hidden_size": 2880, "num_attention_heads": 64, "head_dim": 64,
                "rope_theta": 150000, "max_position_embeddings": 131072, "initial_context_length": 4096,
                "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                 "original_max_position_embeddings": 4096, "rope_type": "yarn",
                                 "truncate": False}}).rotary
    assert r.scaling["truncate"] is False
    inv, af = ref.hf_yarn(64, 150000.0, 32.0, 4096, beta_fast=32.0, beta_slow=1.0, truncate=False)
    check_tables(r, inv, af, POS)


def test_gemma2_head_dim():
    r = scheme({"model_type": "gemma2", "hidden_size": 2304, "num_attention_heads": 8, "head_dim": 256,
                "rope_theta": 10000.0, "sliding_window": 4096, "query_pre_attn_scalar": 256}).rotary
    assert (r.head_dim, r.rotary_dim) == (256, 256)


GEMMA3 = {"model_type": "gemma3", "text_config": {
    "model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256,
    "num_hidden_layers": 34, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 1024,
    "sliding_window_pattern": 6, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}


def test_gemma3_per_layer_type():
    s = scheme(GEMMA3)
    assert len(s.layer_types) == 34
    assert [i for i, t in enumerate(s.layer_types) if t == "full_attention"] == [5, 11, 17, 23, 29]
    local, full = s.for_layer(0).rotary, s.for_layer(5).rotary
    assert (local.base, local.scaling) == (10000.0, None)
    assert (full.base, full.scaling) == (1e6, {"rope_type": "linear", "factor": 8.0})
    check_tables(local, ref.default_inv_freq(256, 10000.0), 1.0, POS)
    check_tables(full, ref.hf_linear(256, 1e6, 8.0)[0], 1.0, POS)
    assert s.for_layer("full_attention") is s.for_layer(11)
    assert "sliding_attention (29 layers)" in repr(s) and "full_attention (5 layers)" in repr(s)


def test_per_layer_type_rope_parameters_v5():
    s = scheme({"model_type": "gemma3_text", "hidden_size": 1152, "num_attention_heads": 4, "head_dim": 256,
                "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                    "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                       "rope_theta": 1000000.0}}})
    assert s.layer_types == ["sliding_attention", "full_attention", "sliding_attention"]
    assert s.for_layer(1).rotary.scaling == {"rope_type": "linear", "factor": 8.0}
    assert s.for_layer(2).rotary.base == 10000.0


def test_gemma4_proportional():
    layer_types = ["sliding_attention", "full_attention"]
    cfg = {"model_type": "gemma4_text", "hidden_size": 1536, "num_attention_heads": 8, "head_dim": 256,
           "global_head_dim": 512, "layer_types": layer_types,
           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 1.0,
                                                  "factor": 2.0, "rope_theta": 1000000.0}}}
    # partial_rotary_factor 1: every pair turns, divided by factor (linear scaling by another name).
    s = scheme(cfg)
    full = s.for_layer(1).rotary
    assert (full.head_dim, full.rotary_dim, full.scaling) == (512, 512, {"rope_type": "proportional", "factor": 2.0})
    check_tables(full, ref.hf_linear(512, 1e6, 2.0)[0], 1.0, POS)
    assert s.for_layer(0).rotary.head_dim == 256
    # Gemma 4 as released: partial_rotary_factor 0.25, no factor. 64 of the 256 pairs turn, with the
    # exponent over the whole head; pairs (i, i + 256) past them have frequency 0.
    cfg["rope_parameters"]["full_attention"] = {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                "rope_theta": 1000000.0}
    full = scheme(cfg).for_layer("full_attention").rotary
    assert (full.head_dim, full.rotary_dim, full.scaling) == \
        (512, 512, {"rope_type": "proportional", "partial_rotary_factor": 0.25})
    inv = [1e6 ** (-2.0 * i / 512) if i < 64 else 0.0 for i in range(256)]
    check_tables(full, inv, 1.0, POS)
    # The rotation itself: channels of the non-turning pairs come back unchanged, the turning ones
    # match the float64 rotate-half formula.
    q = torch.randn(1, 2, 5, 512, dtype=torch.float64)
    k = torch.randn(1, 2, 5, 512, dtype=torch.float64)
    pos = torch.tensor([0, 1, 7, 4095, 8191])
    q2, k2 = full(q, k, pos)
    idle = torch.cat([torch.arange(64, 256), torch.arange(320, 512)])
    assert torch.equal(q2[..., idle], q[..., idle]) and torch.equal(k2[..., idle], k[..., idle])
    angle = pos.to(torch.float64)[:, None] * torch.tensor(inv, dtype=torch.float64)[None, :]
    cos, sin = torch.cos(angle).repeat(1, 2), torch.sin(angle).repeat(1, 2)
    torch.testing.assert_close(q2, q * cos + ref.rotate_half(q) * sin, rtol=0, atol=1e-11)
    # A factor of 1 and p = 1 is plain RoPE.
    cfg["rope_parameters"]["full_attention"] = {"rope_type": "proportional", "partial_rotary_factor": 1.0,
                                                "factor": 1.0, "rope_theta": 1000000.0}
    assert scheme(cfg).for_layer(1).rotary.scaling is None


def test_gpt_neox_rotary_pct():
    r = scheme({"model_type": "gpt_neox", "hidden_size": 2048, "num_attention_heads": 8, "rotary_pct": 0.25,
                "rotary_emb_base": 10000, "max_position_embeddings": 2048, "use_parallel_residual": True}).rotary
    assert (r.head_dim, r.rotary_dim, r.layout, r.base) == (256, 64, "half", 10000.0)
    check_tables(r, ref.default_inv_freq(64, 10000.0), 1.0, POS)


def test_gptj_rotary_dim_interleaved():
    r = scheme({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048}).rotary
    assert (r.head_dim, r.rotary_dim, r.layout) == (256, 64, "interleaved")
    check_tables(r, ref.default_inv_freq(64, 10000.0), 1.0, POS)


# Families that read like Llama but for their config class's defaults and their layout (each default below
# is HF's: OLMo/Granite/StarCoder2 theta 10000; StableLM partial 0.25; Persimmon theta 25000 and partial 0.5;
# Nemotron partial 0.5; GLM/GLM-4 partial 0.5, head_dim 128, pairs; Cohere pairs, v5's theta 500000).
@pytest.mark.parametrize("config,head_dim,rotary_dim,base,layout", [
    ({"model_type": "olmo2", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000,
      "max_position_embeddings": 4096}, 128, 128, 500000.0, "half"),
    ({"model_type": "olmo", "hidden_size": 2048, "num_attention_heads": 16}, 128, 128, 10000.0, "half"),
    ({"model_type": "granite", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000000.0,
      "attention_multiplier": 0.0078125}, 128, 128, 1e7, "half"),
    ({"model_type": "granitemoe", "hidden_size": 1024, "num_attention_heads": 16}, 64, 64, 10000.0, "half"),
    ({"model_type": "starcoder2", "hidden_size": 3072, "num_attention_heads": 24, "rope_theta": 999999.4420358813,
      "sliding_window": 4096}, 128, 128, 999999.4420358813, "half"),
    ({"model_type": "stablelm", "hidden_size": 2560, "num_attention_heads": 32}, 80, 20, 10000.0, "half"),
    ({"model_type": "persimmon", "hidden_size": 4096, "num_attention_heads": 64}, 64, 32, 25000.0, "half"),
    ({"model_type": "nemotron", "hidden_size": 6144, "num_attention_heads": 48, "head_dim": None,
      "rope_theta": 10000}, 128, 64, 10000.0, "half"),
    ({"model_type": "glm4", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000}, 128, 64, 10000.0,
     "interleaved"),
    ({"model_type": "glm", "hidden_size": 4096, "num_attention_heads": 16, "head_dim": 128,
      "partial_rotary_factor": 0.5}, 128, 64, 10000.0, "interleaved"),
    ({"model_type": "cohere", "hidden_size": 8192, "num_attention_heads": 64, "rope_theta": 8000000.0,
      "use_qk_norm": True}, 128, 128, 8e6, "interleaved"),
    ({"model_type": "cohere", "hidden_size": 4096, "num_attention_heads": 32}, 128, 128, 500000.0, "interleaved"),
], ids=lambda v: v["model_type"] if isinstance(v, dict) else None)
def test_rotary_families_by_their_defaults(config, head_dim, rotary_dim, base, layout):
    s = scheme(config)
    r = s.rotary
    assert (r.head_dim, r.rotary_dim, r.base, r.layout, r.scaling) == (head_dim, rotary_dim, base, layout, None)
    assert s.layer_types == [] and s.bias is None and s.absolute is None
    check_tables(r, ref.default_inv_freq(rotary_dim, base), 1.0, POS)


def test_stablelm_scaling_over_its_rotary_channels():
    r = scheme({"model_type": "stablelm", "hidden_size": 2048, "num_attention_heads": 32,
                "partial_rotary_factor": 0.25, "rope_scaling": {"type": "linear", "factor": 2.0}}).rotary
    assert (r.head_dim, r.rotary_dim, r.scaling) == (64, 16, {"rope_type": "linear", "factor": 2.0})
    check_tables(r, ref.hf_linear(16, 10000.0, 2.0)[0], 1.0, POS)


def nope_layers(s):
    return [i for i in range(len(s.layer_types)) if s.for_layer(i).rotary is None]


def test_cohere2_rope_on_sliding_layers_only():
    cfg = {"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 999,
           "num_hidden_layers": 8, "rope_theta": 50000, "sliding_window": 4096, "sliding_window_pattern": 4,
           "position_embedding_type": "rope_gptj", "rotary_pct": 1.0}
    s = scheme(cfg)
    assert s.layer_types == ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3 + \
        ["full_attention"]
    assert nope_layers(s) == [3, 7]
    r = s.for_layer(0).rotary
    assert (r.head_dim, r.rotary_dim, r.base, r.layout) == (128, 128, 50000.0, "interleaved")  # hidden / heads
    check_tables(r, ref.default_inv_freq(128, 50000.0), 1.0, POS)
    assert "full_attention (2 layers): no positional encoding" in repr(s)
    # sliding_window null: HF applies RoPE on no layer at all.
    assert nope_layers(scheme({**cfg, "sliding_window": None})) == list(range(8))
    # layer_types given: they decide.
    assert nope_layers(scheme({**cfg, "layer_types": ["full_attention", "sliding_attention"],
                               "num_hidden_layers": 2})) == [0]


def test_exaone4_nope_on_full_layers_when_hybrid():
    cfg = {"model_type": "exaone4", "hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128,
           "num_hidden_layers": 8, "rope_theta": 1000000.0, "sliding_window": 4096, "sliding_window_pattern": 4}
    s = scheme(cfg)
    assert nope_layers(s) == [3, 7]
    assert s.for_layer(0).rotary.base == 1e6
    # No window: RoPE everywhere, one scheme.
    plain = scheme({**cfg, "sliding_window": None})
    assert plain.layer_types == [] and plain.rotary.head_dim == 128


def test_olmo3_scaling_on_full_layers_only():
    yarn = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192,
            "beta_fast": 32, "beta_slow": 1, "attention_factor": 1.2079441541679836}
    s = scheme({"model_type": "olmo3", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 8,
                "rope_theta": 500000, "max_position_embeddings": 65536, "sliding_window": 4096,
                "rope_scaling": yarn})
    assert [i for i, t in enumerate(s.layer_types) if t == "full_attention"] == [3, 7]
    assert s.for_layer(0).rotary.scaling is None and s.for_layer(0).rotary.base == 500000.0
    full = s.for_layer(3).rotary
    assert full.scaling["rope_type"] == "yarn" and full.scaling["factor"] == 8.0
    # Without rope_theta: v5's default, 500000.
    assert scheme({"model_type": "olmo3", "hidden_size": 256, "num_attention_heads": 4,
                   "num_hidden_layers": 4}).rotary.base == 500000.0


def test_smollm3_no_rope_layers():
    cfg = {"model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 8,
           "rope_theta": 5000000.0}
    s = scheme(cfg)
    assert s.layer_types == ["rope", "rope", "rope", "no_rope"] * 2
    assert nope_layers(s) == [3, 7]
    check_tables(s.for_layer(0).rotary, ref.default_inv_freq(128, 5e6), 1.0, POS)
    explicit = scheme({**cfg, "no_rope_layers": [1, 0, 1, 1, 1, 1, 1, 0]})
    assert nope_layers(explicit) == [1, 7]
    assert scheme({**cfg, "no_rope_layer_interval": 2}).layer_types == ["rope", "no_rope"] * 4
    assert scheme({"model_type": "smollm3", "hidden_size": 256, "num_attention_heads": 4,
                   "num_hidden_layers": 4}).rotary.base == 2e6  # the config class's default


# Llama-4-Scout-17B-16E's text_config as published (attn_temperature_tuning is the number 4 there, a truthy flag).
LLAMA4_SCOUT = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"], "text_config": {
    "model_type": "llama4_text", "attention_chunk_size": 8192, "attn_scale": 0.1, "attn_temperature_tuning": 4,
    "floor_scale": 8192, "for_llm_compressor": False, "head_dim": 128, "hidden_size": 5120,
    "interleave_moe_layer_step": 1, "max_position_embeddings": 262144, "no_rope_layers": [1, 1, 1, 0] * 12,
    "num_attention_heads": 40, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "use_qk_norm": True}}


def test_llama4_rope_layers_and_query_temperature():
    s = scheme(LLAMA4_SCOUT)
    assert s.layer_types == ["chunked_attention"] * 3 + ["full_attention"] + \
        (["chunked_attention"] * 3 + ["full_attention"]) * 11
    rope = s.for_layer(0).rotary
    assert (rope.head_dim, rope.rotary_dim, rope.base, rope.layout) == (128, 128, 500000.0, "interleaved")
    inv, af = ref.hf_llama3(128, 500000.0, 8.0, 1.0, 4.0, 8192)
    check_tables(rope, inv, af, POS)
    assert s.for_layer(0).query_temperature is None
    nope = s.for_layer(3)
    assert nope.rotary is None
    t = nope.query_temperature
    assert isinstance(t, pnn.QueryTemperature) and (t.floor_scale, t.attn_scale) == (8192.0, 0.1)
    assert "full_attention (12 layers): query temperature(floor_scale=8192, attn_scale=0.1)" in repr(s)
    # Without tuning the NoPE layers have nothing; the interval rule when no_rope_layers is empty.
    text = dict(LLAMA4_SCOUT["text_config"], attn_temperature_tuning=False, no_rope_layers=[], num_hidden_layers=8,
                no_rope_layer_interval=2)
    plain = scheme({"model_type": "llama4_text", **text})
    assert plain.layer_types == ["chunked_attention", "full_attention"] * 4
    assert plain.for_layer(1).query_temperature is None and plain.for_layer(1).rotary is None
    with pytest.raises(ValueError) as e:
        scheme({"model_type": "llama4_text", **dict(text, floor_scale=0)})
    assert str(e.value) == "[hf] config: floor_scale must be > 0, got 0"
    with pytest.raises(ValueError) as e:
        scheme({"model_type": "llama4_text", **dict(text, attn_temperature_tuning="yes")})
    assert str(e.value) == '[hf] config: attn_temperature_tuning must be true or false, got "yes"'


def test_query_temperature_module():
    t = pnn.QueryTemperature(8192, 0.1)
    p = [0, 1, 8190, 8191, 8192, 16383, 16384, 2 ** 20, 2 ** 40]
    expected = [math.log(math.floor((x + 1) / 8192) + 1) * 0.1 + 1 for x in p]
    got = t.scales(torch.tensor(p))
    assert got.dtype == torch.float64
    assert got.tolist() == pytest.approx(expected, rel=1e-15, abs=0)
    q = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    pos = torch.tensor([0, 8191, 16383, 40000, 99999])
    out = t(q, pos)
    torch.testing.assert_close(out, q * t.scales(pos)[:, None], rtol=0, atol=0)
    per_batch = torch.stack([pos, pos + 8192])
    torch.testing.assert_close(t(q, per_batch)[1], q[1] * t.scales(pos + 8192)[:, None], rtol=0, atol=0)
    assert t(q.float(), 5).dtype == torch.float32  # an int N: positions 0 .. N-1, all scaled by 1
    torch.testing.assert_close(t(q.float(), 5), q.float(), rtol=0, atol=0)
    qg = torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: t(x, pos), (qg,))
    with pytest.raises(ValueError, match=r"^\[QueryTemperature\] floor_scale must be > 0, got -1$"):
        pnn.QueryTemperature(-1)
    with pytest.raises(ValueError, match=r"^\[QueryTemperature\] positions must have shape \(T\) = \(5\) or "
                                         r"\(B, T\), got \(4\)$"):
        t(q, torch.arange(4))
    with pytest.raises(ValueError, match=r"^\[QueryTemperature\] positions must be >= 0, got -3$"):
        t(q, torch.tensor([-3, 0, 1, 2, 3]))
    with pytest.raises(TypeError, match=r"^\[QueryTemperature\] positions must be a signed integer tensor \(int64, "
                                        r"int32, int16 or int8\), got Float$"):
        t(q, torch.zeros(5))


def test_modernbert_global_and_local_theta():
    cfg = {"model_type": "modernbert", "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 22,
           "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
           "local_attention": 128, "max_position_embeddings": 8192}
    s = scheme(cfg)
    assert [i for i, t in enumerate(s.layer_types) if t == "full_attention"] == list(range(0, 22, 3))
    glob, local = s.for_layer(0).rotary, s.for_layer(1).rotary
    assert (glob.head_dim, glob.base, local.base) == (64, 160000.0, 10000.0)
    check_tables(glob, ref.default_inv_freq(64, 160000.0), 1.0, POS)
    check_tables(local, ref.default_inv_freq(64, 10000.0), 1.0, POS)
    # local_rope_theta null: the global one (HF v4's fallback).
    assert scheme({**cfg, "local_rope_theta": None}).for_layer(1).rotary.base == 160000.0


def test_hybrid_families_refuse_what_is_not_theirs():
    base = {"model_type": "smollm3", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 4}
    with pytest.raises(ValueError) as e:
        scheme({**base, "no_rope_layers": [1, 0, 1]})
    assert str(e.value) == "[hf] config: no_rope_layers must have one entry per layer (num_hidden_layers = 4), got 3"
    with pytest.raises(ValueError) as e:
        scheme({**base, "no_rope_layers": [1, 0, 2, 1]})
    assert str(e.value) == "[hf] config: no_rope_layers must hold 0 (NoPE) or 1 (RoPE), got 2"
    with pytest.raises(ValueError) as e:
        scheme({"model_type": "cohere2", "hidden_size": 256, "num_attention_heads": 4,
                "layer_types": ["sliding_attention", "chunked_attention"]})
    assert str(e.value) == ("[hf] config: layer_types must hold sliding_attention or full_attention, got "
                            "'chunked_attention'")
    with pytest.raises(ValueError) as e:
        scheme({"model_type": "cohere2", "hidden_size": 256, "num_attention_heads": 4})
    assert str(e.value) == "[hf] config: num_hidden_layers is required for model_type 'cohere2'"


def test_falcon_rotary_or_alibi():
    r = scheme({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "alibi": False,
                "rope_theta": 10000.0}).rotary
    assert (r.head_dim, r.rotary_dim) == (64, 64)
    s = scheme({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "alibi": True})
    assert s.rotary is None and isinstance(s.bias, pnn.AlibiBias) and s.bias.num_heads == 71


def press_slopes(n):
    """Press et al. / HF build_alibi_tensor, float64."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + power_of_2(2 * closest)[0::2][: n - closest]


def test_bloom_alibi():
    s = scheme({"model_type": "bloom", "n_head": 14, "hidden_size": 1024, "n_layer": 24})
    b = s.bias
    assert isinstance(b, pnn.AlibiBias) and not b.custom_slopes
    torch.testing.assert_close(b.slopes.to(torch.float64), torch.tensor(press_slopes(14), dtype=torch.float64),
                               rtol=1e-7, atol=0)  # float32 buffer: 1 ulp


def test_mpt_alibi_bias_max():
    s = scheme({"model_type": "mpt", "n_heads": 12, "d_model": 768, "max_seq_len": 2048,
                "attn_config": {"alibi": True, "alibi_bias_max": 16, "attn_impl": "torch"}})
    # HF build_mpt_alibi_tensor: n2 = 16, slope_k = 2^(-k * 16/16), odd-indexed first, cut to 12.
    base = [2.0 ** -(k * 16 / 16) for k in range(1, 17)]
    want = (base[1::2] + base[0::2])[:12]
    assert s.bias.custom_slopes
    torch.testing.assert_close(s.bias.slopes.to(torch.float64), torch.tensor(want, dtype=torch.float64),
                               rtol=1e-7, atol=0)


def test_t5_buckets():
    s = scheme({"model_type": "t5", "d_model": 512, "d_kv": 64, "num_heads": 8, "num_layers": 6,
                "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
                "is_encoder_decoder": True})
    enc, dec = s.bias, s.for_layer("decoder").bias
    assert isinstance(enc, pnn.T5Bias)
    assert (enc.num_heads, enc.num_buckets, enc.max_distance, enc.bidirectional) == (8, 32, 128, True)
    assert dec.bidirectional is False


def test_bert_absolute_and_relative():
    base = {"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12, "max_position_embeddings": 512,
            "type_vocab_size": 2}
    s = scheme(base)
    assert isinstance(s.absolute, pnn.LearnedEncoding)
    assert (s.absolute.max_positions, s.absolute.dim, s.relative) == (512, 768, None)
    rel = scheme({**base, "position_embedding_type": "relative_key"})
    assert rel.absolute is None and isinstance(rel.relative, pnn.ShawRelative)
    assert (rel.relative.max_distance, rel.relative.head_dim, rel.relative.values_enabled,
            rel.relative.key_logits) == (511, 64, False, False)
    kq = scheme({**base, "position_embedding_type": "relative_key_query"})
    assert kq.relative.key_logits is True


def test_gpt2_learned():
    s = scheme({"model_type": "gpt2", "n_positions": 1024, "n_embd": 768, "n_head": 12, "n_ctx": 1024})
    assert (s.absolute.max_positions, s.absolute.dim) == (1024, 768)
    assert repr(s) == "PositionalScheme(gpt2: learned(max_positions=1024, dim=768))"


def test_path_and_repr(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA31))
    s = posenc.hf.positional_scheme(path)
    assert s.source == str(path)
    assert repr(s) == ("PositionalScheme(llama: rotary(head_dim=128, rotary_dim=128, base=500000, layout=half, "
                       "scaling=llama3 x8))")


# ---------------------------------------------------------------- errors

def error(config):
    with pytest.raises(ValueError) as e:
        scheme(config)
    return str(e.value).splitlines()[0]


LLAMA_MIN = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1, "max_position_embeddings": 4096}


def test_errors_name_key_value_and_place():
    assert error({**LLAMA_MIN, "rope_scaling": {"rope_type": "linear", "factor": -2}}) == \
        "[hf] config: rope_scaling.factor must be > 0, got -2"
    assert error({**LLAMA_MIN, "rope_scaling": {"rope_type": "yarn", "factor": 4, "max_position_embeddings": 8}}) \
        == "[hf] config: rope_scaling.max_position_embeddings goes to the top level of config.json, not in " \
           "rope_scaling"
    assert error({**LLAMA_MIN, "rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": 1,
                                                "beta_slow": 2}}) == \
        "[hf] config: rope_scaling.beta_fast must be >= beta_slow (2), got 1"
    assert error({**LLAMA_MIN, "rope_scaling": {"rope_type": "su2"}}) == \
        "[hf] config: rope_scaling.rope_type must be one of default, linear, dynamic, yarn, longrope, llama3, " \
        "proportional (or mrope, su, ntk), got 'su2'"
    assert error({**LLAMA_MIN, "rope_scaling": {"rope_type": "default", "mrope_section": [8, 8, 8]}}) == \
        "[hf] config: rope_scaling.mrope_section must hold 3 sizes (t, h, w) summing to rotary_dim/2 = 32, " \
        "got [8,8,8]"
    assert error({**LLAMA_MIN, "rope_theta": "1e4"}) == "[hf] config: rope_theta must be a number, got \"1e4\""
    assert error({**LLAMA_MIN, "rope_theta": 0}) == "[hf] config: rope_theta must be > 0, got 0"
    assert error({**LLAMA_MIN, "partial_rotary_factor": 1.5}) == \
        "[hf] config: partial_rotary_factor must be in (0, 1], got 1.5"
    assert error({**LLAMA_MIN, "rotary_emb_fraction": 0.5}) == \
        "[hf] config: rotary_emb_fraction is a positional key posenc does not read (model_type 'llama'); " \
        "docs/hf_configs.md lists the keys read per family"
    assert error({"model_type": "llama", "hidden_size": 64}) == \
        "[hf] config: num_attention_heads is required for model_type 'llama'"
    assert error({**LLAMA_MIN, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 3,
                                                "long_factor": [1.0] * 32}}) == \
        "[hf] config: rope_scaling: longrope short_factor must have dim/2 = 32 values, got 3"


def test_unknown_model_type_refused():
    with pytest.raises(RuntimeError) as e:
        scheme({"model_type": "mamba", "hidden_size": 64})
    assert str(e.value).startswith("[hf] config: model_type 'mamba' is not one posenc reads (llama, mistral,")



def test_layer_and_file_errors(tmp_path):
    s = scheme(GEMMA3)
    with pytest.raises(ValueError, match=r"^\[hf\] config: layer 34 is out of range: the config has 34 layers "
                                         r"\(layer_types\)$"):
        s.for_layer(34)
    with pytest.raises(ValueError, match=r"^\[hf\] .*nope\.json: cannot read the file: No such file or directory$"):
        posenc.hf.positional_scheme(tmp_path / "nope.json")
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama",}')
    with pytest.raises(ValueError) as e:
        posenc.hf.positional_scheme(bad)
    assert str(e.value).startswith(f"[hf] {bad}: not valid JSON: parse error at line 1, column 24")


def test_functional_api_says_where_hf_keys_go():
    x = torch.zeros(4, 8)
    for key, value, message in [
        ("mrope_section", [1, 1, 2], "[rope] mrope_section goes to the multimodal rotary; use "
                                     "posenc.hf.positional_scheme or apply_mrope(..., mrope_section=...)"),
        ("rope_theta", 1e6, "[rope] rope_theta goes to the rotary base; use posenc.hf.positional_scheme or "
                            "apply_rope(..., base=...)"),
        ("partial_rotary_factor", 0.5, "[rope] partial_rotary_factor goes to the rotary dimension "
                                       "(int(head_dim * partial_rotary_factor)); use posenc.hf.positional_scheme "
                                       "or apply_rope(..., rotary_dim=...)"),
        ("foo", 1, "[rope] unknown rope_scaling key 'foo'"),
    ]:
        with pytest.raises(ValueError) as e:
            posenc.apply_rope(x, torch.arange(4), scaling={"rope_type": "default", key: value})
        assert str(e.value) == message
