"""posenc.nn encoding modules against float64 references written plainly (tests/python/*_references.py)
and against the functional ops they wrap (bit for bit where the module promises it), plus the module
contract: state_dict round trip, .to(float64), torch.jit.trace, copy.deepcopy."""

import copy
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch
from torch.nn.utils.stateless import functional_call

import posenc
import posenc.nn as pnn
import references as ref
from bias_references import alibi_bias, grid_alibi, hf_compute_bias, mpt_alibi, mpt_gen_slopes, t5_bias_2d_naive, \
    t5_bias_naive
from relative_references import nezha_table, relative_logits, relative_logits_2d, relative_values
from rope_references import axial_angles, default_inv_freq, qwen2vl_mrope, reference_frequencies, reference_rope, \
    reference_xpos, rotate_with_angles

F64 = torch.float64


def T(array):
    """A numpy reference as a float64 tensor."""
    return torch.as_tensor(array, dtype=F64)


def _qk(shape=(2, 3, 7, 16), dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype)


# ---------------------------------------------------------------------------
# The module contract, one row per module: (factory, inputs)

def _q4(t=6, dh=8, h=2):
    g = torch.Generator().manual_seed(1)
    return torch.randn(2, h, t, dh, generator=g), torch.randn(2, h, t, dh, generator=g)


CONTRACT = {
    "SinusoidalEncoding": (lambda: pnn.SinusoidalEncoding(8), lambda: (torch.arange(5),)),
    "SinusoidalEncoding2d": (lambda: pnn.SinusoidalEncoding2d(8), lambda: (torch.tensor(2), torch.tensor(3))),
    "SinusoidalEncoding3d": (lambda: pnn.SinusoidalEncoding3d(12),
                             lambda: (torch.tensor(2), torch.tensor(2), torch.tensor(3))),
    "LearnedEncoding": (lambda: pnn.LearnedEncoding(10, 4), lambda: (torch.tensor([0, 3, 9]),)),
    "LearnableSinusoidalEncoding": (lambda: pnn.LearnableSinusoidalEncoding(8), lambda: (torch.arange(5),)),
    "RotaryEmbedding": (lambda: pnn.RotaryEmbedding(8), lambda: _q4() + (torch.arange(6),)),
    "RotaryEmbedding-learned": (lambda: pnn.RotaryEmbedding(8, learned_frequencies=True),
                                lambda: _q4() + (torch.arange(6),)),
    "RotaryEmbedding-xpos": (lambda: pnn.RotaryEmbedding(8, xpos_scale_base=16.0), lambda: _q4() + (torch.arange(6),)),
    "RotaryEmbeddingAxial": (lambda: pnn.RotaryEmbeddingAxial(8),
                             lambda: _q4() + (torch.tensor([[y, x] for y in range(2) for x in range(3)]),)),
    "MultimodalRotaryEmbedding": (lambda: pnn.MultimodalRotaryEmbedding(8, [2, 1, 1]),
                                  lambda: _q4() + (torch.arange(18).view(3, 6) % 4,)),
    "AlibiBias": (lambda: pnn.AlibiBias(4, causal=True), lambda: (torch.tensor(3), torch.tensor(5))),
    "T5Bias": (lambda: pnn.T5Bias(4, num_buckets=8, max_distance=20), lambda: (torch.tensor(3), torch.tensor(5))),
    "AlibiBias2d": (lambda: pnn.AlibiBias2d(2, 2, 3), lambda: (torch.tensor(6), torch.tensor(6))),
    "T5Bias2d": (lambda: pnn.T5Bias2d(2, 2, 3, num_buckets=8, max_distance=20),
                 lambda: (torch.tensor(6), torch.tensor(6))),
    "ShawRelative": (lambda: pnn.ShawRelative(3, 8, num_heads=2), lambda: _q4()),
    "SinusoidalRelative": (lambda: pnn.SinusoidalRelative(3, 8, learnable=True), lambda: _q4()),
    "TransformerXLRelative": (lambda: pnn.TransformerXLRelative(2, 8), lambda: _q4()),
    "Relative2d": (lambda: pnn.Relative2d(2, 3, 8, num_heads=2), lambda: _q4()),
}


def _outputs(module, inputs):
    out = module(*inputs)
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_state_dict_round_trips_into_a_fresh_module(name):
    factory, inputs = CONTRACT[name]
    torch.manual_seed(0)
    first = factory()
    with torch.no_grad():
        for p in first.parameters():
            p.add_(0.25)  # differ from any fresh initialisation
    torch.manual_seed(1)
    second = factory()
    second.load_state_dict(first.state_dict())
    for a, b in zip(_outputs(first, inputs()), _outputs(second, inputs())):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_to_float64_runs_in_float64(name):
    factory, inputs = CONTRACT[name]
    module = factory()
    expected = _outputs(module, inputs())
    module = module.to(F64)
    args = tuple(a.to(F64) if a.is_floating_point() else a for a in inputs())
    for out, want in zip(_outputs(module, args), expected):
        assert out.dtype == F64
        finite = torch.isfinite(want)
        # 1e-5: the float32 result, rounded once from the same float64 math
        assert torch.allclose(out[finite].float(), want[finite], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_jit_trace_matches_eager(name):
    factory, inputs = CONTRACT[name]
    module = factory()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings: int sizes and positions become constants
        traced = torch.jit.trace(module, inputs(), check_trace=False)
    for a, b in zip(_outputs(traced, inputs()), _outputs(module, inputs())):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_deepcopy_is_equal_and_independent(name):
    factory, inputs = CONTRACT[name]
    module = factory()
    clone = copy.deepcopy(module)
    for a, b in zip(_outputs(module, inputs()), _outputs(clone, inputs())):
        assert torch.equal(a, b)
    for p, c in zip(module.parameters(), clone.parameters()):
        assert p.data_ptr() != c.data_ptr()


# ---------------------------------------------------------------------------
# Input point

@pytest.mark.parametrize("layout", ["interleaved", "half", "cos-sin"])
def test_sinusoidal_encoding_matches_reference(layout):
    module = pnn.SinusoidalEncoding(16, base=100.0, layout=layout, scale=2.0)
    want = T(ref.sinusoidal(range(40), 16, base=100.0, layout=layout, scale=2.0))
    assert torch.allclose(module(40).double(), want, atol=2e-6)  # float32 rounding of values <= 2
    assert torch.allclose(module.to(F64)(torch.arange(40)), want, atol=1e-12)


def test_grid_encodings_match_reference():
    assert torch.allclose(pnn.SinusoidalEncoding2d(8)(3, 4).double(), T(ref.grid_2d(3, 4, 8)), atol=1e-6)
    module = pnn.SinusoidalEncoding2d(8, normalize=True)
    assert torch.allclose(module(3, 4).double(), T(ref.grid_2d(3, 4, 8, normalize=True)), atol=1e-6)
    assert torch.allclose(pnn.SinusoidalEncoding3d(12)(2, 3, 2).double(), T(ref.grid_3d(2, 3, 2, 12)), atol=1e-6)


def test_learned_encoding_rows_and_range_error():
    module = pnn.LearnedEncoding(10, 4, init_std=0.5)
    assert module.weight.shape == (10, 4)
    positions = torch.tensor([[0, 9], [4, 4]])
    assert torch.equal(module(positions), module.weight.detach()[positions])
    assert torch.equal(module(3), module.weight.detach()[:3])
    with pytest.raises(ValueError, match=r"^\[learned\] position 10 is outside the table of 10 rows \(valid 0\.\.9\)$"):
        module(torch.tensor([10]))


def test_learned_encoding_init_std():
    torch.manual_seed(0)
    weight = pnn.LearnedEncoding(512, 64).weight.detach()
    assert abs(weight.std().item() - 0.02) < 0.001  # 32768 draws: std error ~ 0.02/sqrt(2*32768)


def test_learned_encoding_from_pretrained_weight():
    wpe = torch.randn(1024, 12)  # GPT-2's wpe.weight layout
    module = pnn.LearnedEncoding.from_pretrained_weight(wpe)
    assert (module.max_positions, module.dim) == (1024, 12)
    assert torch.equal(module(torch.tensor([5, 1023])), wpe[[5, 1023]])
    assert module.weight.requires_grad and module.weight.data_ptr() != wpe.data_ptr()
    frozen = pnn.LearnedEncoding.from_pretrained_weight(wpe, freeze=True)
    assert not frozen.weight.requires_grad
    assert list(frozen.state_dict()) == ["weight"]


def test_learnable_sinusoidal_encoding():
    module = pnn.LearnableSinusoidalEncoding(16, base=100.0)
    omega = T(ref.frequencies(16, 100.0))
    assert torch.allclose(module.omega.double(), omega, rtol=1e-7)  # float32 rounding
    with torch.no_grad():
        module.omega.mul_(1.5)
    want = T(ref.sinusoids(range(9), module.omega.detach().double().numpy()))
    assert torch.allclose(module(9).double(), want, atol=2e-6)
    module = module.to(F64)
    assert torch.autograd.gradcheck(lambda w: posenc.learnable_sinusoidal(torch.arange(5), w), (module.omega,))
    module(torch.arange(5)).sum().backward()
    assert module.omega.grad is not None and module.omega.grad.abs().sum() > 0


# ---------------------------------------------------------------------------
# Query/key point

SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 16},
]


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: "default" if s is None else s["rope_type"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rotary_equals_apply_rope_bit_for_bit(scaling, layout, rotary_dim, dtype):
    module = pnn.RotaryEmbedding(16, rotary_dim=rotary_dim, layout=layout, scaling=scaling)
    q, k = _qk(dtype=dtype)
    options = dict(layout=layout, rotary_dim=rotary_dim, scaling=scaling)
    for positions in (torch.arange(7), torch.arange(3, 10), torch.tensor([[0, 1, 2, 3, 4, 5, 6], [9, 4, 2, 20, 7, 1, 0]])):
        q_out, k_out = module(q, k, positions)
        assert torch.equal(q_out, posenc.apply_rope(q, positions, **options))
        assert torch.equal(k_out, posenc.apply_rope(k, positions, **options))


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: "default" if s is None else s["rope_type"])
def test_rotary_matches_float64_reference(scaling):
    module = pnn.RotaryEmbedding(16, scaling=scaling)
    q, k = _qk(dtype=F64)
    positions = torch.arange(5, 12)
    q_out, _ = module(q, k, positions)
    assert torch.allclose(q_out, reference_rope(q, positions, scaling=scaling), atol=1e-12)


def test_rotary_positions_none_means_arange():
    module = pnn.RotaryEmbedding(16)
    q, k = _qk()
    for a, b in zip(module(q, k), module(q, k, torch.arange(7))):
        assert torch.equal(a, b)


def test_rotary_cache_grows_and_is_never_stale():
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}
    module = pnn.RotaryEmbedding(16, scaling=scaling)
    q, k = _qk(shape=(1, 2, 40, 16))
    assert not module.state_dict() and not list(module.buffers())  # the tables are shared, not the module's
    for length in (4, 40, 6, 30, 30):  # short (original regime), long (rescaled), short again ...
        positions = torch.arange(length)
        q_out, _ = module(q[:, :, :length], k[:, :, :length], positions)
        assert torch.equal(q_out, posenc.apply_rope(q[:, :, :length], positions, scaling=scaling))
        cos, _ = module.cos_sin(positions)
        assert torch.equal(cos, posenc.rope_cos_sin(positions, 16, scaling=scaling)[0])
    plain = pnn.RotaryEmbedding(16)
    for length in (5, 40, 3):
        positions = torch.arange(length)
        assert torch.equal(plain(q[:, :, :length], k[:, :, :length], positions)[0],
                           posenc.apply_rope(q[:, :, :length], positions))


@pytest.mark.parametrize("precision", ["exact", "fp32"])
def test_rotary_longrope_regimes_and_precision(precision):
    scaling = {"rope_type": "longrope", "original_max_position_embeddings": 8, "short_factor": [1.0] * 8,
               "long_factor": [2.0] * 8, "max_position_embeddings": 64}
    module = pnn.RotaryEmbedding(16, precision=precision, scaling=scaling)
    q, k = _qk(shape=(1, 2, 40, 16))
    for length in (5, 40, 7):  # short factors, long factors, short again
        positions = torch.arange(length)
        want = posenc.apply_rope(q[:, :, :length], positions, precision=precision, scaling=scaling)
        assert torch.equal(module(q[:, :, :length], k[:, :, :length], positions)[0], want)


def test_rotary_cache_follows_the_dtype():
    module = pnn.RotaryEmbedding(16)
    q, k = _qk()
    module(q, k, torch.arange(7))
    module = module.to(F64)  # the float32 tables cast to float64 must not be used
    q64, k64 = q.double(), k.double()
    q_out, _ = module(q64, k64, torch.arange(7))
    assert torch.equal(q_out, posenc.apply_rope(q64, torch.arange(7)))
    q_out, _ = module(q, k, torch.arange(7))  # and back to float32 input
    assert torch.equal(q_out, posenc.apply_rope(q, torch.arange(7)))


def test_rotary_bypasses_the_cache_outside_it():
    module = pnn.RotaryEmbedding(16, seq_len=8)
    q, k = _qk()
    for positions in (torch.tensor([-3, -2, -1, 0, 1, 2, 3]), torch.arange(5, 12)):
        q_out, _ = module(q, k, positions)
        assert torch.equal(q_out, posenc.apply_rope(q, positions, seq_len=8))


def test_rotary_learned_frequencies_and_xpos_equal_the_ops():
    q, k = _qk(dtype=F64)
    positions = torch.arange(2, 9)
    learned = pnn.RotaryEmbedding(16, learned_frequencies=True, layout="interleaved").to(F64)
    assert torch.allclose(learned.omega, torch.tensor(default_inv_freq(16, 10000.0), dtype=F64), rtol=1e-7)
    with torch.no_grad():
        learned.omega.mul_(1.1)
    q_out, _ = learned(q, k, positions)
    assert torch.equal(q_out, posenc.apply_rope(q, positions, layout="interleaved", omega=learned.omega))
    want = reference_rope(q, positions, layout="interleaved", inv_freq=learned.omega.detach())
    assert torch.allclose(q_out, want, atol=1e-12)
    xpos = pnn.RotaryEmbedding(16, xpos_scale_base=32.0, xpos_gamma=0.3, xpos_center=4.0)
    q_out, k_out = xpos(q, k, positions)
    want_q, want_k = posenc.apply_xpos(q, k, positions, scale_base=32.0, gamma=0.3, center=4.0)
    assert torch.equal(q_out, want_q) and torch.equal(k_out, want_k)
    assert torch.allclose(q_out, reference_xpos(q, positions, 32.0, False, gamma=0.3, center=4.0), atol=1e-12)
    assert torch.allclose(k_out, reference_xpos(k, positions, 32.0, True, gamma=0.3, center=4.0), atol=1e-12)


def test_rotary_learned_frequencies_gradcheck():
    module = pnn.RotaryEmbedding(8, learned_frequencies=True).to(F64)
    q, k = _qk(shape=(1, 2, 5, 8), dtype=F64)
    omega = module.omega.detach().clone().requires_grad_(True)

    def f(q, k, omega):  # through the module, omega swapped in for its parameter
        return functional_call(module, {"omega": omega}, (q, k, torch.arange(5)))

    assert torch.autograd.gradcheck(f, (q.requires_grad_(True), k.requires_grad_(True), omega))


def test_rotary_attention_scaling_overrides_the_factor():
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    module = pnn.RotaryEmbedding(16, scaling=scaling, attention_scaling=1.25)
    assert module.attention_factor == 1.25
    q, k = _qk(dtype=F64)
    positions = torch.arange(7)
    inv_freq, _ = reference_frequencies(16, 10000.0, scaling, 7)
    want = rotate_with_angles(q, positions.double()[:, None] * inv_freq, 1.25, "half")
    assert torch.allclose(module(q, k, positions)[0], want, atol=1e-12)
    q32 = q.float()
    assert torch.allclose(module(q32, q32, positions)[0].double(), want, atol=3e-6)  # float32 tables and rotation


def test_rotary_inv_freq_and_cos_sin():
    scaling = {"rope_type": "linear", "factor": 2.0}
    module = pnn.RotaryEmbedding(16, rotary_dim=12, scaling=scaling)
    inv_freq = module.inv_freq
    assert inv_freq.dtype == F64
    assert torch.equal(inv_freq, posenc.rope_inv_freq(12, scaling=scaling)[0])
    assert torch.allclose(inv_freq, reference_frequencies(12, 10000.0, scaling)[0], rtol=1e-15)
    positions = torch.tensor([[3, 1], [0, 7]])
    for dtype in (torch.float32, F64):
        cos, sin = module.cos_sin(positions, dtype)
        want_cos, want_sin = posenc.rope_cos_sin(positions, 12, scaling=scaling, dtype=dtype)
        assert torch.equal(cos, want_cos) and torch.equal(sin, want_sin)


def test_rotary_axial_and_mrope():
    q, k = _qk(shape=(2, 3, 6, 16), dtype=F64)
    coords = torch.tensor([[y, x] for y in range(2) for x in range(3)])
    axial = pnn.RotaryEmbeddingAxial(16, dims_per_axis=[8, 8])
    q_out, k_out = axial(q, k, coords)
    assert torch.equal(q_out, posenc.apply_rope_axial(q, coords, dims_per_axis=[8, 8]))
    want = rotate_with_angles(q, axial_angles(coords, [8, 8]), 1.0, "half")
    assert torch.allclose(q_out, want, atol=1e-12)
    positions3 = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1]])
    mrope = pnn.MultimodalRotaryEmbedding(16, [4, 2, 2])
    q_out, k_out = mrope(q, k, positions3)
    assert torch.equal(k_out, posenc.apply_mrope(k, positions3, [4, 2, 2]))
    inv_freq = torch.tensor(default_inv_freq(16, 10000.0), dtype=F64)
    want = qwen2vl_mrope(q, positions3.unsqueeze(1).expand(3, 2, 6), [4, 2, 2], inv_freq)
    assert torch.allclose(q_out, want, atol=1e-12)


# ---------------------------------------------------------------------------
# Logit bias

@pytest.mark.parametrize("causal", [False, True])
def test_alibi_bias(causal):
    module = pnn.AlibiBias(6, causal=causal)
    assert torch.equal(module(4, 9).double(), alibi_bias(6, 4, 9, causal).float().double())
    assert torch.equal(module.to(F64)(4, 9), alibi_bias(6, 4, 9, causal))
    kwargs = module.attention_kwargs(4, 9, dtype=F64)
    assert kwargs.get("causal", False) == causal
    assert torch.allclose(kwargs["alibi_slopes"], torch.tensor(__import__("bias_references").get_slopes(6),
                                                                dtype=F64), rtol=1e-15)


def test_alibi_custom_slopes_mpt():
    slopes = mpt_gen_slopes(6, alibi_bias_max=16).view(6)
    module = pnn.AlibiBias(6, slopes=slopes)
    assert torch.allclose(module(5, 5), mpt_alibi(6, 5, alibi_bias_max=16)[0], atol=0)
    assert torch.equal(module.state_dict()["slopes"], slopes)


def test_t5_bias_and_hf_weight():
    table = torch.randn(32, 4)  # HF relative_attention_bias.weight
    module = pnn.T5Bias.from_pretrained_weight(table)
    assert (module.num_buckets, module.num_heads, module.max_distance) == (32, 4, 128)
    assert torch.equal(module(9, 9), hf_compute_bias(table, 9, 9))
    decoder = pnn.T5Bias.from_pretrained_weight(table, bidirectional=False, max_distance=64)
    assert torch.allclose(decoder(3, 11).double(), t5_bias_naive(table, 3, 11, False, 64), atol=0)
    kwargs = decoder.attention_kwargs(3, 11)
    assert kwargs["t5_bidirectional"] is False and kwargs["t5_max_distance"] == 64 and kwargs["t5_num_buckets"] == 32


def test_grid_biases():
    alibi = pnn.AlibiBias2d(4, 2, 3, distance="manhattan")
    assert torch.allclose(alibi(6, 6).double(), grid_alibi(4, 2, 3, "manhattan"), atol=1e-6)
    t5 = pnn.T5Bias2d(4, 2, 3, num_buckets=8, max_distance=20)
    want = t5_bias_2d_naive(t5.table_h.detach(), t5.table_w.detach(), 2, 3, True, 20)
    assert torch.allclose(t5(6, 6).double(), want, atol=1e-7)
    assert torch.equal(t5.attention_kwargs(6, 6)["bias"], t5(6, 6))


@pytest.mark.parametrize("make", [
    lambda: pnn.AlibiBias(4, causal=True),
    lambda: pnn.T5Bias(4, num_buckets=8, max_distance=20, init_std=1.0),
    lambda: pnn.AlibiBias2d(4, 2, 3),
    lambda: pnn.T5Bias2d(4, 2, 3, num_buckets=8, max_distance=20, init_std=1.0),
], ids=["alibi", "t5", "alibi2d", "t52d"])
def test_bias_attention_kwargs_equal_the_dense_bias(make):
    module = make().to(F64)
    q, k = _qk(shape=(2, 4, 6, 8), dtype=F64)
    v = torch.randn(2, 4, 6, 8, dtype=F64)
    kwargs = module.attention_kwargs(6, 6, dtype=F64)
    causal = kwargs.pop("causal", False)
    fused = posenc.attention(q, k, v, causal=causal, **kwargs)
    dense = module(6, 6)
    logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(8) + dense
    want = torch.matmul(torch.softmax(logits, -1), v)
    assert torch.allclose(fused, want, atol=1e-12)


# ---------------------------------------------------------------------------
# Relative vectors

def test_shaw_logits_and_values():
    module = pnn.ShawRelative(2, 8, num_heads=3, init_std=1.0).to(F64)
    q, k = _qk(shape=(2, 3, 4, 8), dtype=F64)
    k = torch.randn(2, 3, 7, 8, dtype=F64)
    want = relative_logits(q, module.key_table.detach(), 2, k_len=7, query_offset=3)
    assert torch.allclose(module(q, k), torch.from_numpy(want), atol=1e-12)
    probs = torch.softmax(torch.randn(2, 3, 4, 7, dtype=F64), -1)
    want = relative_values(probs, module.value_table.detach(), 2, query_offset=3)
    assert torch.allclose(module.values(probs), torch.from_numpy(want), atol=1e-12)


def test_sinusoidal_relative_table_and_values():
    module = pnn.SinusoidalRelative(3, 8, base=100.0)
    assert torch.allclose(module.table(F64), torch.as_tensor(nezha_table(3, 8, 100.0), dtype=F64), atol=1e-7)
    assert "omega" in module.state_dict() and not list(module.parameters())
    learnable = pnn.SinusoidalRelative(3, 8, learnable=True)
    assert [n for n, _ in learnable.named_parameters()] == ["omega"]


def test_transformer_xl_logits_plain():
    module = pnn.TransformerXLRelative(2, 4, init_std=0.5).to(F64)
    q = torch.randn(1, 2, 3, 4, dtype=F64)
    k = torch.randn(1, 2, 5, 4, dtype=F64)
    u, v, w_r = module.u.detach(), module.v.detach(), module.w_r.detach()
    dm = module.model_dim
    omega = torch.tensor(default_inv_freq(dm, 10000.0), dtype=F64)
    want = torch.zeros(1, 2, 3, 5, dtype=F64)
    for h in range(2):
        for i in range(3):
            for j in range(5):
                rel = (i + 2) - j  # i' - j
                r = torch.cat([torch.sin(rel * omega), torch.cos(rel * omega)])
                a = (w_r @ r).view(2, 4)[h]
                want[0, h, i, j] = u[h] @ k[0, h, j] + (q[0, h, i] + v[h]) @ a
    assert torch.allclose(module(q, k), want, atol=1e-12)


def test_relative_2d_logits():
    module = pnn.Relative2d(2, 3, 4, init_std=1.0).to(F64)
    q = torch.randn(2, 3, 6, 4, dtype=F64)
    want = relative_logits_2d(q, module.table_h.detach(), module.table_w.detach(), 2, 3)
    assert torch.allclose(module(q, q), torch.as_tensor(want), atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: pnn.ShawRelative(2, 8, num_heads=4, init_std=1.0),
    lambda: pnn.SinusoidalRelative(2, 8, values=True),
    lambda: pnn.TransformerXLRelative(4, 8, init_std=0.5),
    lambda: pnn.Relative2d(2, 3, 8, init_std=1.0),
], ids=["shaw", "sinusoidal", "xl", "2d"])
def test_relative_attention_kwargs_equal_logits_and_values(make):
    module = make().to(F64)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=g, dtype=F64) for _ in range(3))
    out = posenc.attention(q, k, v, **module.attention_kwargs(6, 6))
    scale = 1 / math.sqrt(8)
    xl = isinstance(module, pnn.TransformerXLRelative)
    logits = (torch.matmul(q, k.transpose(-1, -2)) + module.logits(q, k)) * scale
    probs = torch.softmax(logits, -1)
    want = torch.matmul(probs, v)
    if getattr(module, "values_enabled", False):
        want = want + module.values(probs)
    assert torch.allclose(out, want, atol=1e-12), xl


# ---------------------------------------------------------------------------
# Hugging Face BERT relative_key / relative_key_query

def hf_bert_relative(q, k, v, weight, max_position_embeddings, kind, use_cache=False):
    """BertSelfAttention's relative position scores, transcribed in float64 (no mask, no dropout)."""
    q, k, v, weight = q.double(), k.double(), v.double(), weight.double()
    tq, tk = q.shape[2], k.shape[2]
    left = torch.tensor([tk - 1]).view(-1, 1) if use_cache else torch.arange(tq).view(-1, 1)
    right = torch.arange(tk).view(1, -1)
    distance = left - right
    embedding = weight[distance + max_position_embeddings - 1]  # (Tq, Tk, D)
    scores = torch.matmul(q, k.transpose(-1, -2))
    scores = scores + torch.einsum("bhld,lrd->bhlr", q, embedding)
    if kind == "relative_key_query":
        scores = scores + torch.einsum("bhrd,lrd->bhlr", k, embedding)
    scores = scores / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(scores, -1), v)


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
@pytest.mark.parametrize("use_cache", [False, True])
def test_bert_distance_embedding_conversion(kind, use_cache):
    m, d = 8, 4
    g = torch.Generator().manual_seed(5)
    weight = torch.randn(2 * m - 1, d, generator=g, dtype=F64)
    k = torch.randn(2, 3, 6, d, generator=g, dtype=F64)
    v = torch.randn(2, 3, 6, d, generator=g, dtype=F64)
    q = torch.randn(2, 3, 1 if use_cache else 6, d, generator=g, dtype=F64)
    module = pnn.ShawRelative.from_bert_distance_embedding(weight, max_position_embeddings=m,
                                                           position_embedding_type=kind)
    assert module.max_distance == m - 1 and module.value_table is None
    assert module.key_logits == (kind == "relative_key_query")
    kwargs = module.attention_kwargs(q.shape[2], 6)
    # the key term k_j . E[...] rides the fused attention as relative queries on the same table: no dense bias
    assert "bias" not in kwargs and ("rel_q" in kwargs) == (kind == "relative_key_query")
    out = posenc.attention(q, k, v, **kwargs)
    want = hf_bert_relative(q, k, v, weight, m, kind, use_cache)
    assert torch.allclose(out, want, atol=1e-12)
    # the logits alone, as BERT adds them before the 1/sqrt(d)
    scores = module.logits(q, k) + torch.matmul(q, k.transpose(-1, -2))
    assert torch.allclose(torch.softmax(scores / math.sqrt(d), -1) @ v, want, atol=1e-12)


def test_import_posenc_alone_reaches_nn_and_hf():
    # In a fresh interpreter (this one imported posenc.nn above): the subpackages load on first use, as torch.nn.
    code = ("import posenc\n"
            "import sys\n"
            "assert 'posenc.nn' not in sys.modules\n"
            "print(type(posenc.nn.KerpleBias(2)).__name__, posenc.hf.positional_scheme.__name__)\n"
            "try:\n    posenc.nope\nexcept AttributeError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ":".join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["KerpleBias positional_scheme", "module 'posenc' has no attribute 'nope'"]
