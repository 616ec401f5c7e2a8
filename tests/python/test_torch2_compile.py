"""torch 2's tracers on posenc: torch.compile(fullgraph=True) of the modules, torch.export, opcheck of the
ops and meta tensors. Skipped under torch 1.13, which has none of them (make test-torch2 runs them).

The backend is "aot_eager" (dynamo's graph capture, AOTAutograd's joint graph on fake tensors, then the
same kernels): that is where posenc could break, and it runs in seconds; one test compiles with inductor.
"""

import pytest
import torch

import posenc
from posenc import nn as pnn

pytestmark = pytest.mark.skipif(not hasattr(torch.library, "register_fake"),
                                reason="torch.compile / torch.export / opcheck need torch >= 2.4")

# Every registry name of the inner points, and combinations across them.
INNER = ["rope", "p-rope", "rope-xpos", "alibi", "t5", "kerple", "kerple-power", "fire", "cope", "dpb", "shaw",
         "shaw-sinusoidal", "shaw-learnable-sinusoidal", "xl", "deberta", "rope+alibi", "rope+shaw", "rope+t5"]
DECODERS_ONLY = {"fire", "cope"}


def _layer(name, dtype=torch.float64):
    torch.manual_seed(0)
    return pnn.MultiheadAttention(32, 4, encoding=name, causal=name in DECODERS_ONLY).to(dtype)


def _fresh():
    torch._dynamo.reset()


@pytest.mark.parametrize("name", INNER)
def test_compiled_layer_gives_the_eager_output_and_gradients(name):
    _fresh()
    layer = _layer(name)
    x = torch.randn(2, 12, 32, dtype=torch.float64, requires_grad=True)
    eager = layer(x)
    eager_grads = torch.autograd.grad(eager.square().sum(), [x, *layer.parameters()])
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    out = compiled(x)
    grads = torch.autograd.grad(out.square().sum(), [x, *layer.parameters()])
    torch.testing.assert_close(out, eager, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


GRID = {"alibi-2d": lambda: pnn.AlibiBias2d(4, 3, 4), "t5-2d": lambda: pnn.T5Bias2d(4, 3, 4),
        "cpb": lambda: pnn.ContinuousPositionBias2d(4, 3, 4, hidden=16), "relative-2d": lambda: pnn.Relative2d(3, 4, 8)}


@pytest.mark.parametrize("name", sorted(GRID))
def test_compiled_layer_on_a_grid_gives_the_eager_output_and_gradients(name):
    _fresh()
    torch.manual_seed(0)
    layer = pnn.MultiheadAttention(32, 4, encoding=GRID[name]()).double()
    x = torch.randn(2, 12, 32, dtype=torch.float64, requires_grad=True)  # a 3 x 4 grid
    eager = layer(x)
    eager_grads = torch.autograd.grad(eager.square().sum(), [x, *layer.parameters()])
    out = torch.compile(layer, fullgraph=True, backend="aot_eager")(x)
    grads = torch.autograd.grad(out.square().sum(), [x, *layer.parameters()])
    torch.testing.assert_close(out, eager, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_compiled_layer_follows_a_new_length_without_breaking_the_graph():
    _fresh()
    layer = _layer("rope+alibi")
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    for length in (8, 13, 21):
        x = torch.randn(1, length, 32, dtype=torch.float64)
        torch.testing.assert_close(compiled(x), layer(x), rtol=1e-12, atol=1e-12)


INPUT = {"sinusoidal": lambda: pnn.SinusoidalEncoding(32), "learned": lambda: pnn.LearnedEncoding(64, 32),
         "learnable-sinusoidal": lambda: pnn.LearnableSinusoidalEncoding(32)}


@pytest.mark.parametrize("name", sorted(INPUT))
def test_compiled_input_encoding_gives_the_eager_table(name):
    _fresh()
    module = INPUT[name]()
    positions = torch.arange(20)
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(positions), module(positions), rtol=0, atol=0)


def test_compiled_rotary_module_alone():
    _fresh()
    rotary = pnn.RotaryEmbedding(16)
    q, k = torch.randn(2, 4, 10, 16), torch.randn(2, 4, 10, 16)
    positions = torch.arange(10)
    compiled = torch.compile(rotary, fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(q, k, positions), rotary(q, k, positions)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_inductor_compiles_a_layer_with_a_bias_and_a_rotation():
    _fresh()
    layer = _layer("rope+kerple", torch.float32)
    x = torch.randn(2, 16, 32)
    compiled = torch.compile(layer, fullgraph=True)
    torch.testing.assert_close(compiled(x), layer(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["rope+alibi", "t5", "shaw", "fire"])
def test_exported_layer_gives_the_eager_output(name):
    layer = _layer(name)
    x = torch.randn(2, 12, 32, dtype=torch.float64)
    program = torch.export.export(layer, (x,))
    torch.testing.assert_close(program.module()(x), layer(x), rtol=1e-12, atol=1e-12)
    # The exported graph keeps posenc.attention; decomposed, it is the streaming kernel's op.
    lowered = program.run_decompositions()
    names = {str(node.target) for node in lowered.graph.nodes if node.op == "call_function"}
    assert "posenc.attention_streamed.default" in names, names
    torch.testing.assert_close(lowered.module()(x), layer(x), rtol=1e-12, atol=1e-12)


def _qkv(requires_grad=True, dtype=torch.float64):
    torch.manual_seed(1)
    return [torch.randn(2, 3, 6, 8, dtype=dtype, requires_grad=requires_grad) for _ in range(3)]


def _opcheck(op, args, kwargs=None):
    torch.library.opcheck(op, args, kwargs or {},
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor",
                                      "test_aot_dispatch_dynamic"))


@pytest.mark.parametrize("spec", ["[]", "[offset_rows]", "[relative_keys(K=2), relative_values(K=2)]",
                                  "[offset_rows, causal]"])
def test_opcheck_attention_streamed(spec):
    q, k, v = _qkv()
    terms = {"[]": [], "[offset_rows]": [torch.randn(3, 11, dtype=torch.float64, requires_grad=True)],
             "[relative_keys(K=2), relative_values(K=2)]": [torch.randn(5, 8, dtype=torch.float64, requires_grad=True),
                                                            torch.randn(5, 8, dtype=torch.float64, requires_grad=True)],
             "[offset_rows, causal]": [torch.randn(3, 11, dtype=torch.float64, requires_grad=True)]}[spec]
    _opcheck(torch.ops.posenc.attention_streamed.default, (q, k, v, terms, spec))


def test_opcheck_the_leaf_ops_of_the_families():
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = torch.ops.posenc.rope_cos_sin(torch.arange(6), 8, dtype=torch.float64)
    _opcheck(torch.ops.posenc.rope_rotate.default, (x, cos, sin))
    r1 = torch.rand(3, dtype=torch.float64, requires_grad=True)
    r2 = torch.rand(3, dtype=torch.float64, requires_grad=True)
    _opcheck(torch.ops.posenc.kerple_offset_bias.default, (r1, r2, 5, 7))
    _opcheck(torch.ops.posenc.t5_bucket.default, (torch.arange(-4, 5),))
    table = torch.randn(16, 8, dtype=torch.float64, requires_grad=True)
    _opcheck(torch.ops.posenc.learned.default, (table, torch.tensor([0, 3, 15])))
    omega = torch.rand(4, dtype=torch.float64, requires_grad=True)
    _opcheck(torch.ops.posenc.learnable_sinusoidal.default, (torch.arange(5), omega))
    _opcheck(torch.ops.posenc.sinusoidal.default, (torch.arange(5), 8))
    fire = pnn.FireBias(3).double()
    w1, b1, w2, b2, c, threshold = fire.terms()
    _opcheck(torch.ops.posenc.fire_bias.default, (w1, b1, w2, b2, c, threshold, 5, 5))
    q, k, _ = _qkv()
    e = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    _opcheck(torch.ops.posenc.cope_bias.default, (q, k, e, 0.35))
    table_h = torch.randn(32, 3, dtype=torch.float64, requires_grad=True)
    table_w = torch.randn(32, 3, dtype=torch.float64, requires_grad=True)
    _opcheck(torch.ops.posenc.t5_bias_2d.default, (table_h, table_w, 2, 3))
    cpb = pnn.ContinuousPositionBias2d(3, 2, 3, hidden=8).double()
    _opcheck(torch.ops.posenc.cpb_grid_bias.default, (*cpb._state(), 2, 3))


def test_meta_tensors_give_the_shapes():
    q = torch.empty(2, 3, 5, 8, device="meta")
    k = torch.empty(2, 3, 7, 8, device="meta")
    v = torch.empty(2, 3, 7, 4, device="meta")
    out, weights, logsumexp = torch.ops.posenc.attention_streamed(q, k, v, [], "[]", return_weights=True)
    assert (out.shape, weights.shape, logsumexp.shape) == ((2, 3, 5, 4), (2, 3, 5, 7), (2, 3, 5))
    assert out.device.type == "meta"
    x = torch.empty(2, 3, 6, 8, device="meta")
    cos, sin = torch.empty(6, 4, device="meta"), torch.empty(6, 4, device="meta")
    assert torch.ops.posenc.rope_rotate(x, cos, sin).shape == (2, 3, 6, 8)


# The rotary modules of Hugging Face schemes, as posenc.hf builds them from a config.
HF_CONFIGS = {
    "llama3": {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0,
               "max_position_embeddings": 131072,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
    "yarn": {"model_type": "qwen2", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 1000000.0,
             "max_position_embeddings": 131072,
             "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    "partial": {"model_type": "gpt_neox", "hidden_size": 256, "num_attention_heads": 4, "rotary_pct": 0.25,
                "rotary_emb_base": 10000, "max_position_embeddings": 2048},
}


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_compiled_hf_rotary_module_gives_the_eager_rotation(name):
    _fresh()
    rotary = posenc.hf.positional_scheme(HF_CONFIGS[name]).for_layer(0).rotary
    q, k = torch.randn(1, 4, 9, 64, dtype=torch.float64), torch.randn(1, 4, 9, 64, dtype=torch.float64)
    positions = torch.arange(100, 109)
    compiled = torch.compile(rotary, fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(q, k, positions), rotary(q, k, positions)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def _grid_coords():
    return torch.stack(torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij"), -1).reshape(12, 2)


POINT_MODULES = {
    "axial": lambda: (pnn.RotaryEmbeddingAxial(16), lambda q, k: (q, k, _grid_coords())),
    "m-rope": lambda: (pnn.MultimodalRotaryEmbedding(16, [2, 3, 3]),
                       lambda q, k: (q, k, torch.stack([torch.arange(12)] * 3))),
    "query-temperature": lambda: (pnn.QueryTemperature(8.0, 0.1), lambda q, k: (q, torch.arange(12))),
}


@pytest.mark.parametrize("name", sorted(POINT_MODULES))
def test_compiled_axial_multimodal_and_temperature_modules(name):
    _fresh()
    module, arguments = POINT_MODULES[name]()
    q, k = torch.randn(1, 2, 12, 16, dtype=torch.float64), torch.randn(1, 2, 12, 16, dtype=torch.float64)
    want = module(*arguments(q, k))
    got = torch.compile(module, fullgraph=True, backend="aot_eager")(*arguments(q, k))
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
