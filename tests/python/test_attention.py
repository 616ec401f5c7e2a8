"""posenc.attention against the independent float64 reference
(attention_references.py) for every family alone and combined, on both paths
(fused streaming kernel, composed differentiable ops) and the automatic
choice: masks, Tq != Tk, causal, strided and empty inputs, 16-bit dtypes;
the fused path equal to the composed one; T5 against Hugging Face's own
attention; properties (rows sum to 1, fully masked rows give 0)."""

import math

import pytest
import torch

import attention_references as ref
import posenc

PATHS = ["composed", "fused", "auto"]


def randn(shape, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def rand(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64)


def padding(b, tk, seed, dead_batch=None):
    """(B, Tk) bool, about a quarter padded; batch `dead_batch` fully padded."""
    mask = rand((b, tk), seed) < 0.25
    if dead_batch is not None:
        mask[dead_batch] = True
    return mask


# One table of cases: (id, (B, H, Tq, Tk, Dh, Dv), keyword arguments as a function of (H, Tq, Tk, Dh, Dv)).
# Tables and biases are random (the formula, not a particular initialization, is what is tested).
def table(rows, d, heads=None, seed=10):
    return randn((rows, d) if heads is None else (heads, rows, d), seed)


CASES = [
    ("none", (2, 3, 5, 5, 8, 6), lambda H, Tq, Tk, Dh, Dv: {}),
    ("causal", (2, 3, 6, 6, 8, 8), lambda H, Tq, Tk, Dh, Dv: {"causal": True}),
    ("causal-cache", (1, 2, 3, 7, 4, 5), lambda H, Tq, Tk, Dh, Dv: {"causal": True}),
    ("more-queries", (1, 2, 7, 4, 4, 3), lambda H, Tq, Tk, Dh, Dv: {}),
    ("padding", (3, 2, 5, 6, 4, 4), lambda H, Tq, Tk, Dh, Dv: {"key_padding_mask": padding(3, Tk, 1, dead_batch=1)}),
    ("padding-causal-dead-rows", (2, 2, 5, 5, 4, 4),
     # batch 0 pads key 0, so its query 0 (which sees key 0 only) has every key masked
     lambda H, Tq, Tk, Dh, Dv: {"causal": True,
                                "key_padding_mask": torch.tensor([[True, False, False, True, False]] + [[False] * 5])}),
    ("scale", (1, 2, 4, 4, 4, 4), lambda H, Tq, Tk, Dh, Dv: {"scale": 0.3}),
    ("alibi", (2, 4, 9, 9, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"alibi_slopes": posenc.alibi_slopes(H, dtype=torch.float64)}),
    ("alibi-random-slopes-cache", (1, 3, 4, 10, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"alibi_slopes": rand((H,), 3) + 0.1, "causal": True}),
    # few buckets and a short max_distance, so exact, logarithmic and capped buckets all occur
    ("t5", (1, 3, 14, 14, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"t5_table": randn((8, H), 4), "t5_num_buckets": 8, "t5_max_distance": 10}),
    ("t5-causal", (1, 2, 12, 12, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"t5_table": randn((8, H), 5), "t5_num_buckets": 8, "t5_max_distance": 9,
                                "causal": True}),
    ("t5-bidirectional-causal-cache", (1, 2, 5, 13, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"t5_table": randn((32, H), 6), "causal": True, "t5_bidirectional": True}),
    ("shaw-keys", (2, 2, 7, 7, 6, 5), lambda H, Tq, Tk, Dh, Dv: {"rel_k": table(5, Dh), "max_distance": 2}),
    ("shaw-keys-values-per-head", (1, 3, 4, 9, 6, 5),
     lambda H, Tq, Tk, Dh, Dv: {"rel_k": table(7, Dh, H, 11), "rel_v": table(7, Dv, H, 12), "max_distance": 3}),
    ("shaw-mixed-tables-k-inferred", (1, 3, 6, 6, 4, 5),
     lambda H, Tq, Tk, Dh, Dv: {"rel_k": table(5, Dh, None, 13), "rel_v": table(5, Dv, H, 14)}),
    ("shaw-values-only", (1, 2, 6, 6, 4, 3),
     lambda H, Tq, Tk, Dh, Dv: {"rel_v": table(3, Dv, None, 15), "max_distance": 1, "causal": True}),
    ("xl", (1, 2, 4, 7, 6, 6),
     lambda H, Tq, Tk, Dh, Dv: {"rel_k": table(2 * 6 + 1, Dh, None, 16), "max_distance": 6,
                                "xl_u": randn((H, Dh), 17), "xl_v": randn((H, Dh), 18), "causal": True}),
    ("rel2d", (2, 2, 12, 12, 4, 3),
     lambda H, Tq, Tk, Dh, Dv: {"rel_2d": (table(5, Dh, None, 19), table(7, Dh, None, 20), 3, 4)}),
    ("rel2d-per-head", (1, 3, 6, 6, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"rel_2d": (table(3, Dh, H, 21), table(5, Dh, H, 22), 2, 3)}),
    ("rel2d-mixed-tables", (1, 3, 6, 6, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"rel_2d": (table(3, Dh, None, 23), table(5, Dh, H, 24), 2, 3)}),
    ("bias-heads", (2, 2, 5, 6, 4, 4), lambda H, Tq, Tk, Dh, Dv: {"bias": randn((H, Tq, Tk), 25)}),
    ("bias-full", (2, 2, 5, 6, 4, 4), lambda H, Tq, Tk, Dh, Dv: {"bias": randn((2, H, Tq, Tk), 26)}),
    ("bias-per-key", (2, 2, 5, 6, 4, 4), lambda H, Tq, Tk, Dh, Dv: {"bias": randn((2, 1, 1, Tk), 27)}),
    ("bias-per-query", (2, 2, 5, 6, 4, 4), lambda H, Tq, Tk, Dh, Dv: {"bias": randn((Tq, 1), 28)}),
    ("all-1d", (2, 2, 5, 8, 6, 4),
     lambda H, Tq, Tk, Dh, Dv: {"causal": True, "key_padding_mask": padding(2, Tk, 29),
                                "alibi_slopes": posenc.alibi_slopes(H, dtype=torch.float64),
                                "t5_table": randn((8, H), 30), "t5_num_buckets": 8, "t5_max_distance": 6,
                                "rel_k": table(7, Dh, H, 31), "rel_v": table(7, Dv, None, 32), "max_distance": 3,
                                "xl_u": randn((H, Dh), 33), "xl_v": randn((H, Dh), 34),
                                "bias": randn((H, Tq, Tk), 35)}),
    ("all-2d", (2, 2, 6, 6, 4, 4),
     lambda H, Tq, Tk, Dh, Dv: {"key_padding_mask": padding(2, Tk, 36), "alibi_slopes": rand((H,), 37),
                                "rel_2d": (table(5, Dh, H, 38), table(3, Dh, None, 39), 3, 2),
                                "rel_k": table(3, Dh, None, 40), "xl_u": randn((H, Dh), 41),
                                "bias": randn((2, 1, Tq, Tk), 42)}),
]
CASE_IDS = [c[0] for c in CASES]


def inputs(sizes, seed, dtype=torch.float64):
    b, h, tq, tk, dh, dv = sizes
    return randn((b, h, tq, dh), seed, dtype), randn((b, h, tk, dh), seed + 100, dtype), \
        randn((b, h, tk, dv), seed + 200, dtype)


def case_arguments(case, seed=0):
    _, sizes, make = case
    q, k, v = inputs(sizes, seed)
    b, h, tq, tk, dh, dv = sizes
    return q, k, v, make(h, tq, tk, dh, dv)


def cast(kwargs, dtype):
    """Floating tensors (also inside rel_2d) to dtype; masks and ints as they are."""
    def c(x):
        return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
    out = {key: c(value) for key, value in kwargs.items()}
    if "rel_2d" in out:
        out["rel_2d"] = tuple(c(x) for x in out["rel_2d"])
    return out


def check_close(actual, expected, tolerance, reason):
    assert actual.shape == expected.shape
    assert torch.isfinite(actual).all()
    worst = (actual.double() - expected).abs().max().item() if expected.numel() else 0.0
    assert worst <= tolerance, f"max |diff| {worst} > {tolerance} ({reason})"


# float64 throughout: only summation order differs from the reference (logits of a few units,
# sums of at most ~60 products), so 1e-12 is far below any real error and far above rounding.
F64 = 1e-12


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_float64_matches_reference_on_every_path(case):
    q, k, v, kwargs = case_arguments(case)
    expected_out, expected_weights = ref.attention(q, k, v, **kwargs)
    for path in PATHS:
        out, weights = posenc.attention(q, k, v, return_weights=True, path=path, **kwargs)
        assert out.dtype == weights.dtype == torch.float64
        check_close(out, expected_out, F64, f"float64, {path}")
        check_close(weights, expected_weights, F64, f"float64 weights, {path}")
        # without return_weights: the output alone, the same numbers
        assert torch.equal(posenc.attention(q, k, v, path=path, **kwargs), out)


# float32: inputs are exactly the float32 values the reference sees in float64. Logits are sums
# of Dh + (relative) products of values up to ~4 in size, with relative error ~Dh * 2^-24 each;
# softmax turns an absolute logit error e into a relative probability error ~e; outputs are
# convex combinations of values up to ~4. 5e-6: a margin of 10 over the measured 5.2e-7.
F32 = 5e-6


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_float32_matches_reference_on_both_paths(case):
    q, k, v, kwargs = case_arguments(case, seed=1)
    q, k, v, kwargs = q.float(), k.float(), v.float(), cast(kwargs, torch.float32)
    expected_out, expected_weights = ref.attention(q, k, v, **kwargs)
    results = {}
    for path in ["composed", "fused"]:
        out, weights = posenc.attention(q, k, v, return_weights=True, path=path, **kwargs)
        assert out.dtype == weights.dtype == torch.float32
        check_close(out, expected_out, F32, f"float32, {path}")
        check_close(weights, expected_weights, F32, f"float32 weights, {path}")
        results[path] = out
    # The two paths: each within the float32 bound of the exact value, so within twice it of each other.
    check_close(results["fused"], results["composed"].double(), 2 * F32, "fused vs composed")


# 16-bit: the reference is computed from the inputs as rounded to the dtype (every table too), so
# the only errors are the float32 math (F32 above) and the one rounding of the output to the
# 8-bit (bfloat16) or 11-bit (float16) significand: half an ulp, 2^-9 / 2^-12 relative, doubled
# for a float32 value that lands next to a rounding boundary.
LOW = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("none", "padding-causal-dead-rows", "alibi", "t5",
                                                               "shaw-keys-values-per-head", "xl", "rel2d", "all-1d",
                                                               "all-2d")],
                         ids=lambda c: c[0])
def test_16_bit_rounded_once_from_float32_math(case, dtype):
    q, k, v, kwargs = case_arguments(case, seed=2)
    q, k, v, kwargs = q.to(dtype), k.to(dtype), v.to(dtype), cast(kwargs, dtype)
    expected_out, expected_weights = ref.attention(q, k, v, **kwargs)
    for path in ["composed", "fused"]:
        out, weights = posenc.attention(q, k, v, return_weights=True, path=path, **kwargs)
        assert out.dtype == weights.dtype == dtype
        for actual, expected in ((out, expected_out), (weights, expected_weights)):
            err = (actual.double() - expected).abs()
            bound = LOW[dtype] * expected.abs() + F32
            assert torch.all(err <= bound), f"{path}: max excess {(err - bound).max().item()}"


def test_16_bit_terms_may_be_float32():
    # Modules hand over float32 tables with 16-bit activations (math in float32 either way).
    q, k, v, kwargs = case_arguments(CASES[CASE_IDS.index("all-1d")], seed=3)
    q16, k16, v16 = q.bfloat16(), k.bfloat16(), v.bfloat16()
    expected_out, _ = ref.attention(q16, k16, v16, **cast(kwargs, torch.float32))
    for path in ["composed", "fused"]:
        out = posenc.attention(q16, k16, v16, path=path, **cast(kwargs, torch.float32))
        err = (out.double() - expected_out).abs()
        assert torch.all(err <= LOW[torch.bfloat16] * expected_out.abs() + F32)


# ---- rope ------------------------------------------------------------------------------------

ROPE_CASES = [
    # (id, Tq, Tk, rope dict, q positions, k positions) for the reference
    ("self", 6, 6, {}, range(6), range(6)),
    ("cache", 3, 8, {}, range(5, 8), range(8)),
    ("shared-positions", 5, 5, {"positions": torch.tensor([3, 9, 4, 0, 20])}, [3, 9, 4, 0, 20], [3, 9, 4, 0, 20]),
    ("q-and-k-positions", 2, 4, {"q_positions": torch.tensor([10, 11]), "k_positions": torch.tensor([0, 4, 8, 12])},
     [10, 11], [0, 4, 8, 12]),
    ("base", 4, 4, {"base": 100.0}, range(4), range(4)),
]


@pytest.mark.parametrize("rope_case", ROPE_CASES, ids=[c[0] for c in ROPE_CASES])
def test_rope_rotates_queries_at_the_last_key_positions(rope_case):
    _, tq, tk, rope, q_positions, k_positions = rope_case
    base = rope.get("base", 10000.0)
    q, k, v = inputs((2, 2, tq, tk, 8, 4), 5)
    slopes = posenc.alibi_slopes(2, dtype=torch.float64)  # rope combined with a bias, causal when it fits
    causal = tq <= tk
    expected, _ = ref.attention(ref.rope_half(q, torch.tensor(list(q_positions)), base),
                                ref.rope_half(k, torch.tensor(list(k_positions)), base), v,
                                alibi_slopes=slopes, causal=causal)
    for path in PATHS:
        out = posenc.attention(q, k, v, rope=rope, alibi_slopes=slopes, causal=causal, path=path)
        check_close(out, expected, F64, f"rope {path}")


def test_rope_scores_depend_on_offsets_only():
    # RoPE's point: shifting every position by the same amount leaves the attention unchanged.
    q, k, v = inputs((1, 2, 5, 5, 8, 4), 6)
    a = posenc.attention(q, k, v, rope={"positions": torch.arange(5)})
    b = posenc.attention(q, k, v, rope={"positions": torch.arange(5) + 1000})
    # 1e-10: angles up to 1004 rad formed exactly (float64, reduced mod 2 pi), products in float64
    check_close(a, b.double(), 1e-10, "shift invariance")


# ---- T5 against Hugging Face's own attention ---------------------------------------------------

def test_t5_with_scale_one_is_hugging_face_t5_attention():
    q, k, v = inputs((2, 4, 20, 20, 8, 8), 7)
    table32 = randn((32, 4), 8)
    expected = ref.hf_t5_attention(q, k, v, table32, bidirectional=True, max_distance=20)
    out = posenc.attention(q, k, v, t5_table=table32, t5_max_distance=20, scale=1.0)
    check_close(out, expected, F64, "T5 encoder")


def test_t5_decoding_step_is_hugging_face_with_a_cache():
    # One new query against 12 cached keys: HF keeps the last row of the full bias (causal buckets).
    q, k, v = inputs((1, 2, 1, 12, 4, 4), 9)
    table32 = randn((32, 2), 10)
    expected = ref.hf_t5_attention(q, k, v, table32, bidirectional=False)
    for path in PATHS:
        out = posenc.attention(q, k, v, t5_table=table32, scale=1.0, causal=True, path=path)
        check_close(out, expected, F64, "T5 decoder step")


# ---- properties ---------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_rows_sum_to_one_and_fully_masked_rows_are_zero(path):
    q, k, v = inputs((2, 2, 4, 4, 4, 4), 11)
    mask = torch.tensor([[True, True, True, True], [False, True, False, True]])  # batch 0: every key padded
    out, weights = posenc.attention(q, k, v, key_padding_mask=mask, causal=True, return_weights=True, path=path)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert torch.all(out[0] == 0) and torch.all(weights[0] == 0)
    # batch 1, causal: query 0 sees key 0 only; query 1 still key 0 (key 1 padded); queries 2, 3 see keys 0, 2
    sums = weights[1].sum(-1)
    check_close(sums, torch.ones_like(sums), 1e-15, "a softmax row sums to 1 (float64)")
    assert torch.all(weights[1][..., [1, 3]] == 0)
    assert torch.all(weights[1][:, :2, 2:] == 0)


def test_keys_beyond_max_distance_share_a_relative_vector():
    # Shaw et al.: beyond K the offset is clipped; with q = 0 and k = 0 only the relative term is left,
    # so the logits of keys j >= i' + K are equal and their weights too.
    q = randn((1, 1, 1, 4), 12)
    k = torch.zeros(1, 1, 8, 4, dtype=torch.float64)
    v = randn((1, 1, 8, 3), 13)
    _, weights = posenc.attention(q, k, v, rel_k=table(5, 4, None, 14), max_distance=2, return_weights=True,
                                  path="fused")
    w = weights[0, 0, 0]  # query at key position 7: offsets -7..0, clipped below -2
    assert torch.all(w[:6] == w[0])


# ---- strides, empty inputs, the automatic path ------------------------------------------------------

@pytest.mark.parametrize("path", ["composed", "fused"])
def test_strided_inputs(path):
    b, h, tq, tk, dh, dv = 2, 3, 5, 7, 4, 6
    # (B, T, H, D) projections seen as (B, H, T, D); a transposed mask; a broadcast bias view.
    q = randn((b, tq, h, dh), 15).transpose(1, 2)
    k = randn((b, tk, h, dh), 16).transpose(1, 2)
    v = randn((b, tk, h, dv + 2), 17).transpose(1, 2)[..., 1:dv + 1]
    mask = (rand((tk, b), 18) < 0.3).t()
    bias = randn((h, 1, tk), 19).expand(h, tq, tk)
    rel_k = randn((dh, 2 * 2 + 1), 20).t()  # column-major table
    kwargs = dict(key_padding_mask=mask, bias=bias, rel_k=rel_k, causal=True, alibi_slopes=rand((h,), 21))
    expected, _ = ref.attention(q, k, v, **kwargs)
    check_close(posenc.attention(q, k, v, path=path, **kwargs), expected, F64, "strided")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("sizes", [(0, 2, 3, 3, 4, 4), (1, 2, 0, 3, 4, 4), (1, 2, 3, 0, 4, 4), (1, 2, 0, 0, 4, 4),
                                   (1, 0, 3, 3, 4, 4)],
                         ids=["no-batch", "no-queries", "no-keys", "nothing", "no-heads"])
def test_empty_inputs(path, sizes):
    b, h, tq, tk, dh, dv = sizes
    q, k, v = inputs(sizes, 22)
    out, weights = posenc.attention(q, k, v, alibi_slopes=torch.ones(h, dtype=torch.float64),
                                    rel_k=table(3, dh), rel_v=table(3, dv), return_weights=True, path=path)
    assert out.shape == (b, h, tq, dv) and weights.shape == (b, h, tq, tk)
    assert torch.all(out == 0)  # no keys: every row fully masked gives 0


def test_auto_path_is_fused_with_or_without_gradient_and_composed_for_weights_with_one():
    q, k, v, kwargs = case_arguments(CASES[CASE_IDS.index("all-1d")], seed=4)
    fused = posenc.attention(q, k, v, path="fused", **kwargs)
    composed = posenc.attention(q, k, v, path="composed", **kwargs)
    auto = posenc.attention(q, k, v, **kwargs)
    assert torch.equal(auto, fused)  # same kernel, same result bit for bit
    assert not torch.equal(fused, composed)  # the two paths round differently: the test above can tell them apart
    rel_k = kwargs["rel_k"].clone().requires_grad_()
    out = posenc.attention(q, k, v, **{**kwargs, "rel_k": rel_k})
    assert out.grad_fn is not None and torch.equal(out, fused)
    out, weights = posenc.attention(q, k, v, return_weights=True, **{**kwargs, "rel_k": rel_k})
    assert weights.requires_grad and torch.equal(out, composed)
    with torch.no_grad():
        assert torch.equal(posenc.attention(q, k, v, **{**kwargs, "rel_k": rel_k}), fused)


def test_weights_not_asked_are_not_returned():
    q, k, v = inputs((1, 1, 2, 2, 2, 2), 23)
    assert isinstance(posenc.attention(q, k, v), torch.Tensor)
    out, weights = torch.ops.posenc.attention(q, k, v)
    assert weights.numel() == 0


def test_default_scale_is_one_over_sqrt_head_dim():
    q, k, v = inputs((1, 2, 3, 3, 9, 2), 24)
    a = posenc.attention(q, k, v)
    b = posenc.attention(q, k, v, scale=1 / math.sqrt(9))
    assert torch.equal(a, b)
