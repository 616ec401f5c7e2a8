"""The family contract from Python: the classes generated from the catalog (signature, docstring,
registry names), the one holder's behaviour (state names, seeded draws, reset, .to, deepcopy, pickling,
torch.jit.trace, state_dict round trip) and the refusals of the contract, word for word."""

import copy
import inspect
import io
import json

import pytest
import torch

import posenc  # noqa: F401
import posenc.nn as pnn

CATALOG = json.loads(torch.ops.posenc.family_catalog())
MODULES = {c["module"]: c for c in CATALOG}


def test_catalog_names_the_modules_and_their_registry_names():
    assert {"KerpleBias", "FireBias", "CopeBias"} <= set(MODULES)
    assert MODULES["KerpleBias"]["families"] == ["kerple", "kerple-power"]
    assert pnn.KerpleBias.registry_names == ("kerple", "kerple-power")
    assert [t["name"] for t in MODULES["FireBias"]["state"]] == ["w1", "b1", "w2", "b2", "c", "L_multiplier"]


def test_generated_signature_and_docstring_come_from_the_contract():
    sig = inspect.signature(pnn.KerpleBias)
    assert str(sig) == "(num_heads, *, kind='log', causal=False, r1=None, r2=None, eps=0.01)"
    assert str(inspect.signature(pnn.CopeBias)) == "(num_heads, head_dim, *, npos_max=64, causal=True)"
    assert pnn.FireBias.__doc__.startswith("FIRE (Li et al. 2023")
    assert "    hidden (int = 32): the MLP's width (the paper: 32)" in pnn.FireBias.__doc__
    assert issubclass(pnn.KerpleBias, pnn.FamilyModule) and pnn.KerpleBias.__module__ == "posenc.nn"


def test_seeded_draws_are_the_cpp_contracts_and_reset_draws_again():
    torch.manual_seed(7)
    m = pnn.FireBias(3, hidden=5)
    torch.manual_seed(7)
    w1 = torch.empty(5).uniform_(-1.0, 1.0)  # the authors' Linear(1, hidden) draw, first
    assert torch.equal(m.w1.detach(), w1)
    assert float(m.c) == pytest.approx(0.1) and float(m.L_multiplier) == 1.0
    before = [p.detach().clone() for p in m.parameters()]
    torch.manual_seed(7)
    m.reset_parameters()
    assert all(torch.equal(a, b.detach()) for a, b in zip(before, m.parameters()))


def test_module_behaves_as_a_module():
    torch.manual_seed(0)
    m = pnn.KerpleBias(2, kind="power", causal=True)
    assert [n for n, _ in m.named_parameters()] == ["r1", "r2"]
    assert list(m.state_dict()) == ["r1", "r2"]
    assert m.kind == "power" and m.causal is True and m.num_heads == 2 and m.eps == 0.01
    assert repr(m) == "KerpleBias(num_heads=2, kind=power, causal=True)"
    d = copy.deepcopy(m).double()
    assert d(3, 4).dtype == torch.float64
    twin = copy.deepcopy(m)
    assert torch.equal(twin(3, 4), m(3, 4))
    buffer = io.BytesIO()
    torch.save(m, buffer)
    buffer.seek(0)
    again = torch.load(buffer, weights_only=False)  # a whole module (torch 2.6 loads weights only by default)
    assert type(again) is pnn.KerpleBias and torch.equal(again(2, 2), m(2, 2))
    fresh = pnn.KerpleBias(2, kind="power", causal=True)
    fresh.load_state_dict(m.state_dict())
    assert torch.equal(fresh(3, 3), m(3, 3))


def test_trace_and_gradients_through_the_family_ops():
    torch.manual_seed(1)
    m = pnn.KerpleBias(2).double()
    traced = torch.jit.trace(lambda r1, r2: torch.ops.posenc.family_dense(
        "KerpleBias", m._settings, [r1, r2], 3, 5), (m.r1, m.r2))
    assert torch.equal(traced(m.r1, m.r2), m(3, 5))
    m(3, 5).sum().backward()
    assert m.r1.grad.abs().sum() > 0 and m.r2.grad.abs().sum() > 0
    fire = pnn.FireBias(2, hidden=4)
    tensors, spec = fire.attention_terms(3, 3)
    assert spec.describe() == "[tile(fire), causal]" and len(tensors) == 6
    assert set(fire.attention_kwargs(3, 3)) == {"fire", "causal"}


def test_registry_builds_the_generated_classes():
    attn = pnn.MultiheadAttention(16, 4, encoding="cope", causal=True)
    assert type(attn.bias) is pnn.CopeBias and attn.bias.e.shape == (64, 4)
    assert type(pnn.MultiheadAttention(16, 4, encoding="kerple").bias) is pnn.KerpleBias


@pytest.mark.parametrize("call, error, message", [
    (lambda: pnn.KerpleBias(2.5), TypeError, "[KerpleBias] num_heads must be an int, got float"),
    (lambda: pnn.KerpleBias(0), ValueError, "[KerpleBias] num_heads must be >= 1, got 0"),
    (lambda: pnn.KerpleBias(2, eps=2.0), ValueError, "[KerpleBias] eps must be in (0, 1], got 2"),
    (lambda: pnn.KerpleBias(2, kind=3), TypeError, "[KerpleBias] kind must be a str, got int"),
    (lambda: pnn.KerpleBias(2, r1="x"), TypeError, "[KerpleBias] r1 must be a number, got str"),
    (lambda: pnn.CopeBias(2, 0), ValueError, "[CopeBias] head_dim must be >= 1, got 0"),
    (lambda: torch.ops.posenc.family_dense("KerpleBias", '{"num_heads": 2}', [torch.ones(2)], 2, 2), ValueError,
     "[KerpleBias] state must hold 2 tensors (r1, r2), got 1"),
    (lambda: torch.ops.posenc.family_init("NoBias", "{}"), ValueError, "[family] unknown module 'NoBias'; known: "),
])
def test_refusals(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value).splitlines()[0].startswith(message)


@pytest.mark.parametrize("name", ["kerple", "kerple-power", "fire", "cope", "dpb", "alibi", "t5"])
def test_multihead_attention_traces_with_every_generated_bias(name):
    torch.manual_seed(2)
    m = pnn.MultiheadAttention(16, 4, encoding=name, causal=True)
    x = torch.randn(2, 5, 16)
    traced = torch.jit.trace(m, (x,), check_trace=False)
    assert torch.equal(traced(x), m(x))


def test_generated_classes_keep_their_families_extras():
    t5 = pnn.T5Bias.from_pretrained_weight(torch.randn(16, 3), bidirectional=False, max_distance=40)
    assert (t5.num_buckets, t5.num_heads, t5.max_distance, t5.bidirectional) == (16, 3, 40, False)
    assert t5.attention_kwargs(2, 2)["t5_num_buckets"] == 16
    alibi = pnn.AlibiBias(3, slopes=torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64))
    assert alibi.custom_slopes and alibi.slopes.dtype == torch.float64
    assert pnn.AlibiBias(3).custom_slopes is False
    dpb = pnn.DynamicPositionBias(2, 4)
    assert dpb.norm_weight is None and "norm_weight" not in dict(dpb.named_parameters())
    assert dpb.offset_rows(3, 4).shape == (2, 6)
    assert pnn.ContinuousPositionBias2d(2, 2, 3, hidden=8).grid(torch.float64).dtype == torch.float64
    with pytest.raises(ValueError, match=r"^\[KerpleBias\] eps must be in \(0, 1\], got nan$"):
        pnn.KerpleBias(2, eps=float("nan"))


def test_input_point_is_generated_with_the_modules_names_and_dtypes():
    assert MODULES["LearnedEncoding"]["point"] == "input"
    assert str(inspect.signature(pnn.SinusoidalEncoding2d)) == (
        "(dim, *, base=10000.0, layout='interleaved', precision='exact', scale=1.0, normalize=False, "
        "normalize_scale=6.283185307179586)")
    assert str(inspect.signature(pnn.SinusoidalEncoding3d.forward)) == "(self, frames, height, width)"
    assert str(inspect.signature(pnn.LearnedEncoding.forward)) == "(self, positions)"
    torch.manual_seed(4)
    m = pnn.LearnedEncoding(6, 4)
    torch.manual_seed(4)
    assert torch.equal(m.weight.detach(), torch.empty(6, 4).normal_(0.0, 0.02))
    assert list(m.state_dict()) == ["weight"] and repr(m) == "LearnedEncoding(max_positions=6, dim=4, init_std=0.02)"
    assert torch.equal(m(3), m.weight[:3]) and m(torch.tensor([[5, 0]])).shape == (1, 2, 4)
    traced = torch.jit.trace(m, (torch.tensor([0, 2]),))
    assert torch.equal(traced(torch.tensor([1, 5])), m.weight[[1, 5]])
    m(torch.tensor([2, 2])).sum().backward()
    assert torch.equal(m.weight.grad[2], torch.full((4,), 2.0)) and float(m.weight.grad.sum()) == 8.0
    fixed = pnn.SinusoidalEncoding(8)
    assert list(fixed.state_dict()) == [] and fixed(3).dtype == torch.float32
    assert copy.deepcopy(fixed).double()(3).dtype == torch.float64
    assert torch.equal(fixed(torch.tensor([0, 1, 2])), fixed(3))
    frozen = pnn.LearnedEncoding.from_pretrained_weight(torch.randn(5, 2, dtype=torch.float64), freeze=True)
    assert frozen.weight.dtype == torch.float64 and not frozen.weight.requires_grad and frozen.max_positions == 5
    with pytest.raises(ValueError, match=r"^\[learned\] position 6 is outside the table of 6 rows \(valid 0\.\.5\)"):
        m(torch.tensor([6]))


def test_relative_point_is_generated_with_the_modules_names_and_draws():
    assert MODULES["ShawRelative"]["point"] == "relative vectors"
    assert str(inspect.signature(pnn.ShawRelative)) == (
        "(max_distance, head_dim, *, num_heads=0, values=True, init_std=0.02, key_logits=False)")
    assert str(inspect.signature(pnn.TransformerXLRelative)) == (
        "(num_heads, head_dim, *, base=10000.0, init_std=0.02, model_dim=None)")
    assert str(inspect.signature(pnn.ShawRelative.forward)) == "(self, q, k)"
    # Shaw's draws in the authors' order (keys, then values), the setting `values` as values_enabled.
    torch.manual_seed(6)
    shaw = pnn.ShawRelative(2, 4, num_heads=3)
    torch.manual_seed(6)
    keys, values = torch.empty(3, 5, 4).normal_(0.0, 0.02), torch.empty(3, 5, 4).normal_(0.0, 0.02)
    assert torch.equal(shaw.key_table.detach(), keys) and torch.equal(shaw.value_table.detach(), values)
    assert list(shaw.state_dict()) == ["key_table", "value_table"] and shaw.values_enabled is True
    assert callable(shaw.values) and shaw.num_heads == 3 and shaw.head_dim == 4
    # NEZHA's omega: a buffer unless learnable; the shared table has no heads of its own.
    nezha = pnn.SinusoidalRelative(3, 8)
    assert [n for n, _ in nezha.named_buffers()] == ["omega"] and nezha.num_heads == 0
    assert [n for n, _ in pnn.SinusoidalRelative(3, 8, learnable=True).named_parameters()] == ["omega"]
    # XL's model_dim None is num_heads * head_dim; its table method takes the reach K.
    xl = pnn.TransformerXLRelative(2, 4)
    assert xl.model_dim == 8 and xl.table(3).shape == (2, 7, 4) and xl.table(3, torch.float64).dtype == torch.float64
    kwargs = xl.attention_kwargs(3, 5)
    assert sorted(kwargs) == ["max_distance", "rel_k", "xl_u", "xl_v"] and kwargs["max_distance"] == 4
    grid = pnn.Relative2d(2, 3, 4).attention_kwargs(6, 6)
    assert list(grid) == ["rel_2d"] and grid["rel_2d"][2:] == (2, 3)
    # The module traces, copies and converts as any module.
    q, k = torch.randn(1, 3, 4, 4), torch.randn(1, 3, 5, 4)
    traced = torch.jit.trace(shaw, (q, k))
    assert torch.equal(traced(q, k), shaw(q, k))
    assert copy.deepcopy(shaw).double()(q.double(), k.double()).dtype == torch.float64
    shaw(q, k).sum().backward()
    assert shaw.key_table.grad is not None and shaw.value_table.grad is None
    with pytest.raises(RuntimeError, match=r"^\[TransformerXLRelative\] has no value vectors"):
        xl.values(torch.zeros(1, 2, 3, 3))


def test_deberta_is_generated_with_its_submodules_borrowed_projections_and_draws():
    assert issubclass(pnn.DebertaRelative, pnn.FamilyModule)
    assert str(inspect.signature(pnn.DebertaRelative)) == (
        "(num_heads, head_dim, *, model_dim=0, position_buckets=256, max_relative_positions=512, "
        "pos_att_type=['p2c', 'c2p'], share_att_key=False, norm_rel_ebd=True, layer_norm_eps=1e-07, init_std=0.02)")
    assert "q_proj.weight (the layer's, borrowed)" in pnn.DebertaRelative.__doc__
    # The draws of a module that builds two Linears and then draws its table and resets them (HF's order).
    torch.manual_seed(9)
    m = pnn.DebertaRelative(2, 4, position_buckets=4, max_relative_positions=8)
    torch.manual_seed(9)
    key, query = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    rel = torch.empty(8, 8).normal_(0.0, 0.02)
    key.reset_parameters(), query.reset_parameters()
    assert torch.equal(m.rel_embeddings.detach(), rel)
    for mine, want in ((m.pos_key_proj, key), (m.pos_query_proj, query)):
        assert isinstance(mine, torch.nn.Linear)
        assert torch.equal(mine.weight.detach(), want.weight.detach()) and torch.equal(mine.bias, want.bias)
    assert isinstance(m.norm_rel_ebd, torch.nn.LayerNorm) and m.norm_rel_ebd.eps == 1e-7
    assert m.norm_rel_ebd_enabled is True and m.model_dim == 8 and m.scale_factor == 3.0
    assert list(m.state_dict()) == ["rel_embeddings", "norm_rel_ebd.weight", "norm_rel_ebd.bias", "pos_key_proj.weight",
                                    "pos_key_proj.bias", "pos_query_proj.weight", "pos_query_proj.bias"]
    # tables() is a view of the terms; one term off leaves its half None and its projection absent.
    pos_key, pos_query = m.tables(torch.float64)
    assert pos_key.shape == (2, 8, 4) and pos_query.dtype == torch.float64
    c2p = pnn.DebertaRelative(2, 4, pos_att_type=("c2p",))
    assert c2p.tables()[1] is None and c2p.pos_query_proj is None and c2p.scale_factor == 2.0
    # share_att_key reads the layer's projections by reference: trained with the layer, copied with it.
    layer = pnn.MultiheadAttention(8, 2, encoding=pnn.DebertaRelative(2, 4, share_att_key=True))
    shared = layer.relative
    assert shared.pos_key_proj is None and shared._borrowed["k_proj"] is layer.k_proj
    x = torch.randn(1, 5, 8)
    layer(x).sum().backward()
    assert layer.k_proj.weight.grad is not None and shared.rel_embeddings.grad is not None
    twin = copy.deepcopy(layer)
    assert twin.relative._borrowed["q_proj"] is twin.q_proj
    assert torch.equal(twin(x), layer(x))
    assert twin.double()(x.double()).dtype == torch.float64
    traced = torch.jit.trace(layer, (x,))
    assert torch.equal(traced(x), layer(x))
