"""posenc.nn.MultiheadAttention against a plain float64 transcription of the C++ layer's math
(projections, rotation, logit terms, softmax, values written with torch.matmul / softmax), gradcheck
through the module for every encoding, and the registry against `posenc encodings --json`."""

import copy
import json
import math
import os
import re
import subprocess
import warnings
from pathlib import Path

import pytest
import torch
from torch.nn.utils.stateless import functional_call

import posenc.nn as pnn
from bias_references import get_slopes, t5_bias_naive
from rope_references import default_inv_freq, reference_rope, reference_xpos

F64 = torch.float64
REPO = Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

NAMES = ["rope", "rope-xpos", "alibi", "t5", "shaw", "shaw-sinusoidal", "shaw-learnable-sinusoidal", "xl",
         "rope+alibi", "rope+t5+shaw", "rope-xpos+xl", "alibi+shaw-sinusoidal"]


def _linear(lin, x):
    out = x @ lin.weight.detach().double().t()
    return out if lin.bias is None else out + lin.bias.detach().double()


def reference_mha(m, query, memory, key_padding_mask=None):
    """(out (B, Tq, D), weights (B, H, Tq, Tk)) of module m, recomputed in float64 from its parameters."""
    query, memory = query.double(), memory.double()
    b, tq, dim = query.shape
    tk, heads, dh = memory.shape[1], m.num_heads, m.head_dim

    def split(x):
        return x.view(b, -1, heads, dh).transpose(1, 2)

    q, k, v = split(_linear(m.q_proj, query)), split(_linear(m.k_proj, memory)), split(_linear(m.v_proj, memory))
    q_pos, k_pos = torch.arange(tk - tq, tk), torch.arange(tk)
    rot = m.rotary
    if rot is not None:
        if rot.xpos_scale_base:
            q = reference_xpos(q, q_pos, rot.xpos_scale_base, False, rot.xpos_gamma, rot.base, rot.layout)
            k = reference_xpos(k, k_pos, rot.xpos_scale_base, True, rot.xpos_gamma, rot.base, rot.layout)
        else:
            q = reference_rope(q, q_pos, base=rot.base, layout=rot.layout)
            k = reference_rope(k, k_pos, base=rot.base, layout=rot.layout)
    d = torch.arange(tk)[None, :] - (torch.arange(tq)[:, None] + tk - tq)  # key - query, (Tq, Tk)
    logits = q @ k.transpose(-1, -2)
    rel, rel_values = m.relative, None
    if isinstance(rel, (pnn.ShawRelative, pnn.SinusoidalRelative)):
        K = rel.max_distance
        idx = d.clamp(-K, K) + K
        if isinstance(rel, pnn.ShawRelative):
            key_table = rel.key_table.detach().double()
            value_table = None if rel.value_table is None else rel.value_table.detach().double()
        else:  # NEZHA: row r = interleaved sin, cos of (r - K) omega
            omega = rel.omega.detach().double()
            angles = torch.arange(-K, K + 1, dtype=F64)[:, None] * omega
            key_table = torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)
            value_table = key_table if rel.values_enabled else None
        a = key_table[idx] if key_table.dim() == 2 else key_table[:, idx]  # (Tq, Tk, Dh) or (H, Tq, Tk, Dh)
        logits = logits + (torch.einsum("bhid,ijd->bhij", q, a) if a.dim() == 3 else
                           torch.einsum("bhid,hijd->bhij", q, a))
        if value_table is not None:
            rel_values = value_table[idx] if value_table.dim() == 2 else value_table[:, idx]
    elif isinstance(rel, pnn.TransformerXLRelative):
        u, vv, w_r = rel.u.detach().double(), rel.v.detach().double(), rel.w_r.detach().double()
        omega = torch.tensor(default_inv_freq(rel.model_dim, rel.base), dtype=F64)
        angles = (-d).double()[..., None] * omega  # R_{i'-j}: sines then cosines
        r = torch.cat([angles.sin(), angles.cos()], -1)  # (Tq, Tk, model_dim)
        a = (r @ w_r.t()).view(tq, tk, heads, dh).permute(2, 0, 1, 3)  # (H, Tq, Tk, Dh)
        logits = logits + torch.einsum("bhjd,hd->bhj", k, u)[:, :, None, :]
        logits = logits + torch.einsum("bhid,hijd->bhij", q + vv[None, :, None, :], a)
    logits = logits / math.sqrt(dh)
    causal = m.causal
    if isinstance(m.bias, pnn.AlibiBias):
        slopes = torch.tensor(get_slopes(heads), dtype=F64)
        logits = logits - slopes[:, None, None] * d.abs()
        causal = causal or m.bias.causal
    elif isinstance(m.bias, pnn.T5Bias):
        logits = logits + t5_bias_naive(m.bias.table.detach(), tq, tk, m.bias.bidirectional, m.bias.max_distance)
    if causal:
        logits = logits.masked_fill(d > 0, -math.inf)
    if key_padding_mask is not None:
        logits = logits.masked_fill(key_padding_mask[:, None, None, :], -math.inf)
    weights = torch.softmax(logits, -1)
    out = weights @ v
    if rel_values is not None:
        out = out + (torch.einsum("bhij,ijd->bhid", weights, rel_values) if rel_values.dim() == 3 else
                     torch.einsum("bhij,hijd->bhid", weights, rel_values))
    merged = out.transpose(1, 2).reshape(b, tq, dim)
    return _linear(m.out_proj, merged), weights


def _module(name, causal=False, dim=16, heads=4, seed=0):
    torch.manual_seed(seed)
    m = pnn.MultiheadAttention(dim, heads, encoding=name, causal=causal)
    with torch.no_grad():  # tables far from their small initialisation, so every term matters
        for module in (m.bias, m.relative):
            if module is not None:
                for p in module.parameters():
                    p.add_(0.3 * torch.randn_like(p))
    return m


def _inputs(b=2, tq=5, tk=5, dim=16, dtype=F64, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, tq, dim, generator=g).to(dtype), torch.randn(b, tk, dim, generator=g).to(dtype)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_reference(name, causal):
    m = _module(name, causal).to(F64)
    x, _ = _inputs()
    mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
    want, _ = reference_mha(m, x, x, mask)
    assert torch.allclose(m(x, mask), want, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_cached_attention_matches_reference(name):
    m = _module(name, causal=True).to(F64)
    query, memory = _inputs(tq=2, tk=7)
    out, weights = m.attend(query, memory, return_weights=True)
    want, want_weights = reference_mha(m, query, memory)
    assert torch.allclose(out, want, atol=1e-12)
    assert torch.allclose(weights, want_weights, atol=1e-12)


@pytest.mark.parametrize("name", ["rope+alibi", "t5", "shaw", "xl"])
def test_float32_matches_float64_reference(name):
    m = _module(name)
    x, _ = _inputs(dtype=torch.float32)
    want, _ = reference_mha(m, x, x)
    assert torch.allclose(m(x).double(), want, atol=2e-5)  # float32 projections and attention, values ~ 1


@pytest.mark.parametrize("name", ["rope+t5+shaw", "xl"])
def test_composed_path_equals_fused(name):
    m = _module(name).to(F64)
    x, _ = _inputs()
    composed = copy.deepcopy(m)
    composed.path = "composed"
    assert torch.allclose(m(x), composed(x), atol=1e-13)


def test_module_instances_and_bert_relative_key_query():
    weight = torch.randn(2 * 8 - 1, 4, dtype=F64)
    shaw = pnn.ShawRelative.from_bert_distance_embedding(weight, max_position_embeddings=8,
                                                         position_embedding_type="relative_key_query")
    # AlibiBias2d on a 1 x 5 grid beside the key term (relative queries)
    grid = pnn.AlibiBias2d(4, 1, 5)
    m = pnn.MultiheadAttention(16, 4, encoding=[pnn.RotaryEmbedding(4), shaw, grid]).to(F64)
    x, _ = _inputs()
    out = m(x)
    # reference: q.k + q.E[i - j] + k.E[i - j] (HF rows query - key), all over sqrt(Dh)
    b, t, dh = 2, 5, 4
    split = lambda y: y.view(b, t, 4, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(_linear(m.q_proj, x)), split(_linear(m.k_proj, x)), split(_linear(m.v_proj, x))
    q, k = reference_rope(q, torch.arange(t)), reference_rope(k, torch.arange(t))
    e = weight[torch.arange(t)[:, None] - torch.arange(t)[None, :] + 7]
    scores = q @ k.transpose(-1, -2) + torch.einsum("bhld,lrd->bhlr", q, e) + torch.einsum("bhrd,lrd->bhlr", k, e)
    distance = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).abs()
    alibi = -torch.tensor(get_slopes(4), dtype=F64)[:, None, None] * distance
    o = torch.softmax(scores / math.sqrt(dh) + alibi, -1) @ v
    want = _linear(m.out_proj, o.transpose(1, 2).reshape(b, t, 16))
    assert torch.allclose(out, want, atol=1e-12)


@pytest.mark.parametrize("name", NAMES + ["none"])
def test_gradcheck_through_the_module(name):
    m = _module(None if name == "none" else name, dim=8, heads=2).to(F64)
    x, _ = _inputs(b=1, tq=4, tk=4, dim=8)
    names = [n for n, p in m.named_parameters() if not n.startswith(("k_proj", "v_proj", "out_proj"))]
    params = tuple(dict(m.named_parameters())[n].detach().clone().requires_grad_(True) for n in names)

    def f(x, *values):
        return functional_call(m, dict(zip(names, values)), (x,))

    assert torch.autograd.gradcheck(f, (x.requires_grad_(True),) + params)


def test_dropout_only_in_training():
    m = _module("rope+shaw", dim=16, heads=4)
    m.dropout = 0.5
    x, _ = _inputs(dtype=torch.float32)
    plain = copy.deepcopy(m)
    plain.dropout = 0.0
    m.eval()
    assert torch.equal(m(x), plain(x))
    m.train()
    torch.manual_seed(0)
    dropped = m(x)
    assert torch.isfinite(dropped).all() and not torch.allclose(dropped, plain(x))


# ---------------------------------------------------------------------------
# Module contract

@pytest.mark.parametrize("name", ["rope+alibi", "xl", "rope-xpos+shaw"])
def test_state_dict_deepcopy_trace_to(name):
    m = _module(name)
    x, _ = _inputs(dtype=torch.float32)
    fresh = pnn.MultiheadAttention(16, 4, encoding=name)
    fresh.load_state_dict(m.state_dict())
    assert torch.equal(fresh(x), m(x))
    assert torch.equal(copy.deepcopy(m)(x), m(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m, (x,), check_trace=False)
    assert torch.equal(traced(x), m(x))
    m64 = m.to(F64)
    out = m64(x.double())
    assert out.dtype == F64 and torch.allclose(out, reference_mha(m64, x, x)[0], atol=1e-12)


def test_submodule_names():
    m = pnn.MultiheadAttention(16, 4, encoding="rope+t5+shaw")
    names = [n for n, _ in m.named_children()]
    assert names == ["q_proj", "k_proj", "v_proj", "out_proj", "rotary", "bias", "relative"]
    assert set(m.state_dict()) >= {"q_proj.weight", "bias.table", "relative.key_table", "relative.value_table"}
    assert pnn.MultiheadAttention(16, 4, bias=False).q_proj.bias is None


# ---------------------------------------------------------------------------
# Registry: the CLI's catalog is the source of truth

def _catalog():
    if not Path(CLI).is_file():
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return json.loads(subprocess.run([CLI, "encodings", "--json"], check=True, capture_output=True, text=True).stdout)


def _number(text):
    return float(re.match(r"[-+0-9.e]+", text).group(0))


def test_registry_matches_cli():
    catalog = _catalog()
    assert [e["name"] for e in catalog] == list(pnn.ENCODINGS)
    for entry in catalog:
        assert pnn.ENCODINGS[entry["name"]][0] == entry["point"], entry["name"]
    defaults = {key: _number(value) for entry in catalog for key, value in entry["parameters"].items()}
    for key, value in defaults.items():
        assert pnn.registry.DEFAULTS[key] == value, key


def test_registry_modules_carry_the_cli_defaults():
    defaults = {k: _number(v) for e in _catalog() for k, v in e["parameters"].items()}
    m = pnn.MultiheadAttention(16, 4, encoding="rope-xpos+t5+shaw")
    assert m.rotary.xpos_scale_base == defaults["xpos_scale_base"] and m.rotary.base == defaults["base"]
    assert (m.bias.num_buckets, m.bias.max_distance) == (defaults["t5_num_buckets"], defaults["t5_max_distance"])
    assert m.bias.bidirectional and m.relative.max_distance == defaults["max_distance"]
    assert m.relative.num_heads == 0 and m.relative.values_enabled
    decoder = pnn.MultiheadAttention(16, 4, encoding="alibi", causal=True)
    assert decoder.bias.causal
    assert not pnn.MultiheadAttention(16, 4, encoding="t5", causal=True).bias.bidirectional
    assert pnn.MultiheadAttention(16, 4, encoding="shaw-learnable-sinusoidal").relative.learnable
    assert pnn.MultiheadAttention(16, 4, encoding="none").rotary is None


@pytest.mark.parametrize("name, message", [
    ("foo", "[encoding] unknown encoding 'foo'; known: " + ", ".join(e["name"] for e in pnn.registry.CATALOG)
     + " (combine with '+')"),
    ("alibi+t5", "[encoding] 'alibi+t5' has two logit bias encodings (alibi, t5); use at most one per point"),
    ("none+rope", "[encoding] 'none' cannot be combined, got 'none+rope'"),
    ("rope+", "[encoding] empty part in 'rope+'"),
])
def test_parse_errors_match_the_cli(name, message):
    with pytest.raises(ValueError) as error:
        pnn.MultiheadAttention(16, 4, encoding=name)
    assert str(error.value) == message


@pytest.mark.parametrize("name", ["foo", "alibi+t5", "none+rope", "rope+"])
def test_parse_errors_are_the_cli_parsers(name, tmp_path):
    _catalog()  # the CLI is there
    cli = subprocess.run([CLI, "train", "--task", "copy", "--encoding", name, "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=60)
    with pytest.raises(ValueError) as error:
        pnn.MultiheadAttention(16, 4, encoding=name)
    assert cli.returncode != 0 and f"posenc: {error.value}" in cli.stderr


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(dim=10, num_heads=4), ValueError,
     "[MultiheadAttention] dim must be divisible by num_heads, got dim 10 and num_heads 4"),
    (dict(dim=0, num_heads=4), ValueError, "[MultiheadAttention] dim must be >= 1, got 0"),
    (dict(dim=16, num_heads=0), ValueError, "[MultiheadAttention] num_heads must be >= 1, got 0"),
    (dict(dim=16, num_heads=4, dropout=1.0), ValueError, "[MultiheadAttention] dropout must be in [0, 1), got 1"),
    (dict(dim=16, num_heads=4, path="fast"), ValueError,
     "[MultiheadAttention] path must be 'auto' or 'composed' or 'fused', got 'fast'"),
    (dict(dim=16, num_heads=4, encoding=pnn.RotaryEmbedding(8)), ValueError,
     "[MultiheadAttention] rotary head_dim must be 4 (dim / num_heads), got 8"),
    (dict(dim=16, num_heads=4, encoding=pnn.AlibiBias(8)), ValueError,
     "[MultiheadAttention] bias must have num_heads = 4 heads, got 8"),
    (dict(dim=16, num_heads=4, encoding=pnn.ShawRelative(2, 8)), ValueError,
     "[MultiheadAttention] relative head_dim must be 4 (dim / num_heads), got 8"),
    (dict(dim=16, num_heads=4, encoding=pnn.ShawRelative(2, 4, num_heads=2)), ValueError,
     "[MultiheadAttention] relative must have num_heads = 4 heads, got 2"),
    (dict(dim=16, num_heads=4, encoding=[pnn.AlibiBias(4), pnn.T5Bias(4)]), ValueError,
     "[MultiheadAttention] encoding has two logit bias modules (AlibiBias, T5Bias); use at most one per point"),
    (dict(dim=16, num_heads=4, encoding=[torch.nn.Linear(2, 2)]), TypeError,
     "[MultiheadAttention] encoding must be a name, an encoding module or a list of them; Linear is not a "
     "query/key, logit bias or relative vectors module"),
    (dict(dim=16, num_heads=4, encoding="learned+alibi"), ValueError,
     "[MultiheadAttention] 'learned' is an input encoding (added to the token embeddings before the first layer, "
     "as posenc.nn.LearnedEncoding); encoding takes query/key, logit bias and relative vectors encodings"),
    (dict(dim=15, num_heads=5, encoding="rope"), ValueError, "[encoding] rope needs an even head_dim, got 3"),
])
def test_constructor_errors(kwargs, error, message):
    with pytest.raises(error) as raised:
        pnn.MultiheadAttention(**kwargs)
    assert str(raised.value) == message


def test_input_errors():
    m = pnn.MultiheadAttention(16, 4)
    with pytest.raises(ValueError) as raised:
        m(torch.randn(2, 5, 8))
    assert str(raised.value) == "[MultiheadAttention] x must be (B, T, D) with D = 16, got (2, 5, 8)"
    with pytest.raises(TypeError) as raised:
        m(torch.randn(2, 5, 16, dtype=F64))
    assert str(raised.value) == "[MultiheadAttention] x must have the parameters' dtype (torch.float32), got " \
                                "torch.float64"
    with pytest.raises(ValueError) as raised:
        m.attend(torch.randn(2, 5, 16), torch.randn(3, 5, 16))
    assert str(raised.value) == "[MultiheadAttention] memory must have query's batch size 2, got 3"
    with pytest.raises(ValueError) as raised:
        m(torch.randn(2, 5, 16), torch.zeros(2, 4, dtype=torch.bool))
    assert str(raised.value) == "[attention] key_padding_mask must be (B, Tk) = (2, 5), got (2, 4)"
