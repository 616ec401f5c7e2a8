"""ALiBi and T5 attention biases (posenc.alibi_*, posenc.t5_*) against
independent references (bias_references.py): the paper's slopes, naive
float64 loops, the eager constructions of BLOOM and MPT, and Hugging Face's
T5 bucket and compute_bias; properties (geometric slopes, softmax
invariance, adjointness); gradients with gradcheck and gradgradcheck."""

import math

import pytest
import torch

import bias_references as ref
import posenc

SEEDS = [0, 1, 2]

# One float32 rounding of a value computed in double: half an ulp, 2^-24 relative.
F32_RTOL = 2.0 ** -24 * 1.01
# One rounding of the float32 value to the 8 (11) bit significand, after the float32 rounding.
LOW_RTOL = {torch.bfloat16: 2.0 ** -8 + 2.0 ** -24, torch.float16: 2.0 ** -11 + 2.0 ** -24}
# The paper's slopes are start * ratio**i in double: up to ~7 ulps from 2^(-8h/n) (measured 1.6e-15).
SLOPE_RTOL_F64 = 4e-15


def assert_close_rel(actual, expected, rtol):
    """|actual - expected| <= rtol |expected| elementwise, -inf exactly where expected has -inf."""
    actual = actual.double()
    assert actual.shape == expected.shape
    inf = torch.isneginf(expected)
    assert torch.equal(torch.isneginf(actual), inf)
    a, e = actual[~inf], expected[~inf]
    assert torch.isfinite(a).all()
    err = (a - e).abs()
    bound = rtol * e.abs()
    worst = (err - bound).max().item() if err.numel() else 0.0
    assert worst <= 0.0, f"max excess {worst}, max abs err {err.max().item()}"


# ---------------------------------------------------------------------------
# ALiBi slopes

@pytest.mark.parametrize("n", range(1, 65))
def test_alibi_slopes_match_paper(n):
    expected = ref.get_slopes(n)
    # float32: the exact slope rounded once; the paper's double is within 7 ulps of it, and rounds the same
    # way for n = 1..64 (checked in float64 below and by the equality here).
    ours32 = posenc.alibi_slopes(n)
    assert ours32.dtype == torch.float32 and ours32.shape == (n,)
    assert torch.equal(ours32, torch.tensor(expected, dtype=torch.float64).float())
    ours64 = posenc.alibi_slopes(n, dtype=torch.float64)
    assert_close_rel(ours64, torch.tensor(expected, dtype=torch.float64), SLOPE_RTOL_F64)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64])
def test_alibi_slopes_geometric_for_powers_of_two(n):
    s = posenc.alibi_slopes(n, dtype=torch.float64)
    ratio = 2.0 ** (-8.0 / n)
    # first term and ratio 2^(-8/n); 1e-15: each slope is exp2 of an exact exponent, rounded once.
    assert s[0].item() == pytest.approx(ratio, rel=1e-15)
    if n > 1:
        assert torch.allclose(s[1:] / s[:-1], torch.full((n - 1,), ratio, dtype=torch.float64), rtol=1e-15, atol=0)
    # the last head of any power of two has slope 2^-8
    assert s[-1].item() == pytest.approx(2.0 ** -8, rel=1e-15)


def test_alibi_slopes_non_power_of_two_interleave():
    # n = 12: the 8 slopes of 8 heads, then the odd-index slopes of 16 heads (2^-0.5, 2^-1.5, ...).
    s = posenc.alibi_slopes(12, dtype=torch.float64)
    assert torch.equal(s[:8], posenc.alibi_slopes(8, dtype=torch.float64))
    assert torch.equal(s[8:], posenc.alibi_slopes(16, dtype=torch.float64)[0::2][:4])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_alibi_slopes_low_precision(dtype):
    s = posenc.alibi_slopes(12, dtype=dtype)
    assert s.dtype == dtype
    assert_close_rel(s, torch.tensor(ref.get_slopes(12), dtype=torch.float64), LOW_RTOL[dtype])


# ---------------------------------------------------------------------------
# ALiBi bias

ALIBI_SHAPES = [
    # (num_heads, q_len, k_len, causal)
    (8, 7, 7, False),
    (8, 7, 7, True),
    (5, 3, 10, False),   # decoding: the queries are the last 3 of 10 keys
    (5, 3, 10, True),
    (12, 1, 9, True),    # one new token against a cache
    (3, 10, 4, False),   # more queries than keys (cross attention), non-causal
    (1, 1, 1, True),
    (4, 0, 6, False),    # empty
    (4, 6, 0, False),
    (4, 0, 0, True),
]


@pytest.mark.parametrize("num_heads,q_len,k_len,causal", ALIBI_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_alibi_bias_matches_reference(num_heads, q_len, k_len, causal, dtype):
    out = posenc.alibi_bias(num_heads, q_len, k_len, causal=causal, dtype=dtype)
    assert out.dtype == dtype and out.shape == (num_heads, q_len, k_len)
    expected = ref.alibi_bias(num_heads, q_len, k_len, causal)
    rtol = {torch.float32: F32_RTOL, torch.float64: SLOPE_RTOL_F64}.get(dtype) or LOW_RTOL[dtype]
    assert_close_rel(out, expected, rtol)


def test_alibi_bias_causal_mask_is_exact():
    out = posenc.alibi_bias(4, 5, 9, causal=True)
    i = torch.arange(5)[:, None] + 4
    j = torch.arange(9)[None, :]
    assert torch.equal(torch.isneginf(out), (j > i).expand(4, 5, 9))
    assert torch.isfinite(out[:, j.expand(5, 9) <= i.expand(5, 9)]).all()
    # on the shifted diagonal the bias is exactly 0: the query sees itself unpenalized
    assert torch.equal(out[:, torch.arange(5), torch.arange(5) + 4], torch.zeros(4, 5))


def test_alibi_bias_decoding_rows_are_the_last_rows_of_the_full_bias():
    full = posenc.alibi_bias(6, 11, 11, causal=True, dtype=torch.float64)
    for q_len in (1, 4, 11):
        assert torch.equal(posenc.alibi_bias(6, q_len, 11, causal=True, dtype=torch.float64), full[:, 11 - q_len:])


def test_alibi_bias_equals_mpt_eager_construction():
    # MPT's build_alibi_bias(full=True): -|j - i| times slopes 1/2^(8h/n) formed in float32 (power-of-two
    # heads: the same slopes as the paper's). 4 float32 ulps: MPT's pow and product each round in float32.
    for n_heads in (8, 16, 32):
        mpt = ref.mpt_alibi(n_heads, 13)[0]
        ours = posenc.alibi_bias(n_heads, 13, 13)
        assert_close_rel(mpt, ours.double(), 4 * 2.0 ** -24)


@pytest.mark.parametrize("num_heads", [8, 12])
def test_alibi_bias_equals_bloom_up_to_a_row_constant(num_heads):
    # BLOOM adds m_h * j (key position) and relies on causal masking + softmax's invariance; for j <= i,
    # ours is m_h * j - m_h * i, i.e. BLOOM's minus a constant per (head, row).
    T = 9
    bloom = ref.bloom_alibi(torch.ones(1, T, dtype=torch.long), num_heads).reshape(num_heads, T).double()
    ours = posenc.alibi_bias(num_heads, T, T, causal=True, dtype=torch.float64)
    slopes = torch.tensor(ref.get_slopes(num_heads), dtype=torch.float64)
    i = torch.arange(T, dtype=torch.float64)
    shifted = bloom[:, None, :] - slopes[:, None, None] * i[None, :, None]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    # 2e-7 absolute: BLOOM's float32 slopes (torch.pow) times positions < 9, each rounded in float32.
    assert torch.allclose(ours[:, mask], shifted[:, mask], rtol=0, atol=2e-7)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("q_len,k_len", [(8, 8), (3, 8), (1, 5)])
def test_alibi_softmax_invariance(seed, q_len, k_len):
    # softmax(logits + causal bias) == softmax(logits + m_h * j masked): -m|i'-j| = m(j - i') below the
    # diagonal and m*i' is constant along a row, so dropping it changes no probability.
    g = torch.Generator().manual_seed(seed)
    H = 6
    logits = torch.randn(2, H, q_len, k_len, generator=g, dtype=torch.float64)
    ours = torch.softmax(logits + posenc.alibi_bias(H, q_len, k_len, causal=True, dtype=torch.float64), dim=-1)
    slopes = torch.tensor(ref.get_slopes(H), dtype=torch.float64)
    j = torch.arange(k_len, dtype=torch.float64)
    i_prime = torch.arange(q_len)[:, None] + (k_len - q_len)
    dropped = (slopes[:, None, None] * j[None, None, :]).expand(H, q_len, k_len)
    dropped = dropped.masked_fill(torch.arange(k_len)[None, :] > i_prime, -math.inf)
    expected = torch.softmax(logits + dropped, dim=-1)
    # 1e-13: float64 softmax of shifted inputs, exp's relative error times a few terms.
    assert torch.allclose(ours, expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_alibi_bias_out_reuses_the_buffer(dtype, causal):
    out = torch.full((8, 16, 16), 7.0, dtype=dtype)
    ptr = out.data_ptr()
    result = posenc.alibi_bias(8, 16, 16, causal=causal, out=out)
    assert result.data_ptr() == ptr and out.data_ptr() == ptr
    assert torch.equal(out, posenc.alibi_bias(8, 16, 16, causal=causal, dtype=dtype))
    # a second call overwrites every value
    out.fill_(3.0)
    posenc.alibi_bias(8, 16, 16, causal=causal, out=out)
    assert out.data_ptr() == ptr
    assert_close_rel(out, ref.alibi_bias(8, 16, 16, causal), F32_RTOL if dtype == torch.float32 else SLOPE_RTOL_F64)


def test_alibi_bias_out_decoding_shape():
    out = torch.empty(4, 2, 9, dtype=torch.float64)
    posenc.alibi_bias(4, 2, 9, causal=True, out=out)
    assert_close_rel(out, ref.alibi_bias(4, 2, 9, True), SLOPE_RTOL_F64)


GRIDS = [(3, 5), (1, 7), (4, 1), (2, 2), (1, 1)]


@pytest.mark.parametrize("height,width", GRIDS)
@pytest.mark.parametrize("distance", ["euclidean", "manhattan"])
@pytest.mark.parametrize("num_heads", [3, 8])
def test_alibi_bias_2d_matches_reference(height, width, distance, num_heads):
    expected = ref.grid_alibi(num_heads, height, width, distance)
    out32 = posenc.alibi_bias_2d(num_heads, height, width, distance=distance)
    assert out32.dtype == torch.float32 and out32.shape == (num_heads, height * width, height * width)
    # one float32 rounding of the double sqrt / product (the sqrt itself is correctly rounded in double).
    assert_close_rel(out32, expected, F32_RTOL + 2.0 ** -52)
    out64 = posenc.alibi_bias_2d(num_heads, height, width, distance=distance, dtype=torch.float64)
    # the paper's slopes (~7 ulps) plus the correctly rounded sqrt and product (2 ulps).
    assert_close_rel(out64, expected, SLOPE_RTOL_F64 + 2 * 2.0 ** -52)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_alibi_bias_2d_low_precision(dtype):
    out = posenc.alibi_bias_2d(4, 3, 4, distance="euclidean", dtype=dtype)
    assert out.dtype == dtype
    assert_close_rel(out, ref.grid_alibi(4, 3, 4, "euclidean"), LOW_RTOL[dtype])


def test_alibi_bias_2d_properties():
    # symmetric, zero on the diagonal, Manhattan >= Euclidean distance (biases more negative)
    e = posenc.alibi_bias_2d(4, 3, 5, dtype=torch.float64)
    m = posenc.alibi_bias_2d(4, 3, 5, distance="manhattan", dtype=torch.float64)
    assert torch.equal(e, e.transpose(1, 2)) and torch.equal(m, m.transpose(1, 2))
    assert torch.equal(torch.diagonal(e, dim1=1, dim2=2), torch.zeros(4, 15, dtype=torch.float64))
    assert (m <= e).all()
    # a 1 x W grid is the 1D (non-causal) ALiBi bias
    assert torch.equal(posenc.alibi_bias_2d(4, 1, 6, dtype=torch.float64),
                       posenc.alibi_bias(4, 6, 6, dtype=torch.float64))


# ---------------------------------------------------------------------------
# T5 buckets

BUCKET_PARAMS = [
    # (bidirectional, num_buckets, max_distance)
    (True, 32, 128),   # T5 encoder
    (False, 32, 128),  # T5 decoder
    (True, 64, 256),
    (False, 16, 50),
    (True, 8, 20),
    (False, 2, 3),
    (True, 4, 3),
]
LARGE = [10 ** 6, -10 ** 6, 10 ** 6 + 1, -10 ** 6 - 1, 2 ** 40, -2 ** 40, 2 ** 40 + 1, -2 ** 40 - 1,
         2 ** 62, -2 ** 62, 2 ** 63 - 1, -(2 ** 63 - 1)]


@pytest.mark.parametrize("bidirectional,num_buckets,max_distance", BUCKET_PARAMS)
def test_t5_bucket_matches_hugging_face(bidirectional, num_buckets, max_distance):
    rel = torch.cat([torch.arange(-5000, 5001), torch.tensor(LARGE)])
    ours = posenc.t5_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    expected = ref.hf_relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    assert ours.dtype == torch.int64 and ours.shape == rel.shape
    mismatch = (ours != expected).nonzero().flatten()
    assert mismatch.numel() == 0, f"first mismatches at rel {rel[mismatch[:5]].tolist()}: " \
                                  f"ours {ours[mismatch[:5]].tolist()}, HF {expected[mismatch[:5]].tolist()}"


def test_t5_bucket_known_values():
    # T5 defaults (bidirectional, 32, 128): 16 buckets per direction, 8 exact; keys after the query +16.
    rel = torch.tensor([0, -1, -7, -8, -12, -16, -32, -64, -127, -128, -10 ** 6, 1, 7, 8, 16, 128])
    expected = [0, 1, 7, 8, 9, 10, 12, 14, 15, 15, 15, 17, 23, 24, 26, 31]
    assert posenc.t5_bucket(rel).tolist() == expected
    # causal (decoder): keys after the query share bucket 0
    assert posenc.t5_bucket(torch.tensor([5, 1, 0, -1, -16, -32]), bidirectional=False).tolist() == \
        [0, 0, 0, 1, 16, 21]  # n = 32: 16 + floor(16 log 2 / log 8) = 16 + 5


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8])
def test_t5_bucket_accepts_any_integer_dtype(dtype):
    rel = torch.arange(-100, 101).to(dtype)
    ours = posenc.t5_bucket(rel, bidirectional=True, num_buckets=8, max_distance=20)
    assert ours.dtype == torch.int64
    assert torch.equal(ours, ref.hf_relative_position_bucket(rel.long(), True, 8, 20))


def test_t5_bucket_narrow_ints_and_shapes():
    # Every signed width is widened (uint8 cannot hold a negative offset and is refused:
    # test_attention_bias_errors.py).
    for dtype in (torch.int8, torch.int16, torch.int32):
        rel = torch.arange(-128, 128).to(dtype)
        assert torch.equal(posenc.t5_bucket(rel), ref.hf_relative_position_bucket(rel.long()))
    # shape kept, non-contiguous input read through its strides
    mat = (torch.arange(8)[None, :] - torch.arange(6)[:, None]).t()
    assert not mat.is_contiguous()
    out = posenc.t5_bucket(mat, bidirectional=False)
    assert out.shape == (8, 6)
    assert torch.equal(out, ref.hf_relative_position_bucket(mat.contiguous(), False))
    empty = posenc.t5_bucket(torch.empty(0, 3, dtype=torch.long))
    assert empty.shape == (0, 3) and empty.dtype == torch.int64


# ---------------------------------------------------------------------------
# T5 bias

def table_for(seed, num_buckets, heads, dtype=torch.float64, contiguous=True):
    g = torch.Generator().manual_seed(seed)
    if contiguous:
        return torch.randn(num_buckets, heads, generator=g, dtype=torch.float64).to(dtype)
    t = torch.randn(heads, num_buckets, generator=g, dtype=torch.float64).to(dtype).t()  # HF stores [nb, H]
    assert not t.is_contiguous()
    return t


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("length", [1, 9, 40, 300])
def test_t5_bias_matches_hf_compute_bias(seed, bidirectional, length):
    table = table_for(seed, 32, 8)
    ours = posenc.t5_bias(table, length, length, bidirectional=bidirectional)
    expected = ref.hf_compute_bias(table, length, length, bidirectional)
    assert ours.dtype == torch.float64 and ours.shape == (8, length, length)
    assert torch.equal(ours, expected)  # a lookup: exact


@pytest.mark.parametrize("q_len,k_len", [(1, 50), (7, 50), (50, 50), (1, 1)])
def test_t5_bias_decoding_matches_hf_cache_slice(q_len, k_len):
    table = table_for(3, 32, 6)
    ours = posenc.t5_bias(table, q_len, k_len, bidirectional=False)
    assert torch.equal(ours, ref.hf_decoding_bias(table, q_len, k_len, bidirectional=False))


@pytest.mark.parametrize("q_len,k_len", [(5, 2), (9, 4), (0, 3), (3, 0), (0, 0)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_other_shapes_match_naive(q_len, k_len, bidirectional):
    table = table_for(4, 8, 3)
    ours = posenc.t5_bias(table, q_len, k_len, bidirectional=bidirectional, max_distance=20)
    assert ours.shape == (3, q_len, k_len)
    assert torch.equal(ours, ref.t5_bias_naive(table, q_len, k_len, bidirectional, 20))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_t5_bias_keeps_the_table_dtype(dtype):
    table = table_for(5, 32, 4, dtype=dtype, contiguous=False)
    ours = posenc.t5_bias(table, 6, 20)
    assert ours.dtype == dtype
    # every value is a table entry, so exact in any dtype
    assert torch.equal(ours.double(), ref.t5_bias_naive(table, 6, 20))


@pytest.mark.parametrize("height,width", [(3, 5), (1, 7), (4, 1), (2, 2)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_2d_matches_naive(height, width, bidirectional):
    th, tw = table_for(6, 8, 3), table_for(7, 8, 3, contiguous=False)
    ours = posenc.t5_bias_2d(th, tw, height, width, bidirectional=bidirectional, max_distance=10)
    assert ours.shape == (3, height * width, height * width) and ours.dtype == torch.float64
    expected = ref.t5_bias_2d_naive(th, tw, height, width, bidirectional, 10)
    # 0: a sum of two entries, rounded once in float64 by both.
    assert torch.equal(ours, expected)
    th32, tw32 = th.float(), tw.float()
    ours32 = posenc.t5_bias_2d(th32, tw32, height, width, bidirectional=bidirectional, max_distance=10)
    assert ours32.dtype == torch.float32
    # one float32 rounding of the exact sum of two float32 entries.
    assert_close_rel(ours32, ref.t5_bias_2d_naive(th32, tw32, height, width, bidirectional, 10), F32_RTOL)


def test_t5_bias_2d_single_row_is_1d_plus_a_constant():
    # on a 1 x W grid every dy is 0: the bias is the 1D bias over x plus table_h[bucket(0)]
    th, tw = table_for(8, 8, 2), table_for(9, 8, 2)
    two_d = posenc.t5_bias_2d(th, tw, 1, 6, max_distance=10)
    one_d = posenc.t5_bias(tw, 6, 6, max_distance=10)
    assert torch.allclose(two_d, one_d + th[0][:, None, None], rtol=0, atol=0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("q_len,k_len", [(6, 6), (3, 11), (11, 3)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_backward_matches_naive_and_is_adjoint(seed, q_len, k_len, bidirectional):
    g = torch.Generator().manual_seed(seed)
    table = table_for(seed, 8, 3)
    grad = torch.randn(3, q_len, k_len, generator=g, dtype=torch.float64)
    ours = torch.ops.posenc.t5_bias_backward(grad, 8, bidirectional, 10)
    expected = ref.t5_bias_backward_naive(grad, 8, bidirectional, 10)
    # 1e-14: sums of <= 33 terms of size ~3 in a different order.
    assert torch.allclose(ours, expected, rtol=0, atol=1e-14)
    forward = posenc.t5_bias(table, q_len, k_len, bidirectional=bidirectional, max_distance=10)
    lhs, rhs = (forward * grad).sum(), (table * ours).sum()
    assert torch.allclose(lhs, rhs, rtol=1e-13, atol=1e-13)  # <A t, g> = <t, A^T g>, float64 sums


def test_t5_bias_2d_backward_matches_naive():
    g = torch.Generator().manual_seed(11)
    grad = torch.randn(2, 12, 12, generator=g, dtype=torch.float64)
    gh, gw = torch.ops.posenc.t5_bias_2d_backward(grad, 8, 3, 4, True, 10)
    # grad_table_h[b] sums grad over the pairs whose dy has bucket b (any dx), likewise grad_table_w.
    exp_h, exp_w = torch.zeros(8, 2, dtype=torch.float64), torch.zeros(8, 2, dtype=torch.float64)
    cells = [(y, x) for y in range(3) for x in range(4)]
    for p, (y, x) in enumerate(cells):
        for q, (y2, x2) in enumerate(cells):
            exp_h[int(ref.hf_relative_position_bucket(torch.tensor(y2 - y), True, 8, 10))] += grad[:, p, q]
            exp_w[int(ref.hf_relative_position_bucket(torch.tensor(x2 - x), True, 8, 10))] += grad[:, p, q]
    # 1e-13: sums of 144 terms of size ~3 in a different order.
    assert torch.allclose(gh, exp_h, rtol=0, atol=1e-13) and torch.allclose(gw, exp_w, rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_t5_bias_backward_low_precision(dtype):
    g = torch.Generator().manual_seed(12)
    grad = torch.randn(2, 5, 9, generator=g, dtype=torch.float64).to(dtype)
    table = table_for(1, 8, 2, dtype=dtype).requires_grad_()
    posenc.t5_bias(table, 5, 9, max_distance=10).backward(grad)
    assert table.grad.dtype == dtype
    expected = ref.t5_bias_backward_naive(grad, 8, True, 10)
    # sums accumulated in double and rounded once to dtype (float32 on the way): half an ulp of the
    # result, plus float32's for 16-bit types; the sums are O(10), so bound relative to max |sum|.
    rtol = {torch.float32: F32_RTOL}.get(dtype) or LOW_RTOL[dtype]
    assert (table.grad.double() - expected).abs().max() <= rtol * expected.abs().max()


# ---------------------------------------------------------------------------
# Gradients (float64)

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("q_len,k_len", [(5, 5), (3, 12), (12, 3), (0, 4), (4, 0)])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("contiguous", [True, False], ids=["table-contiguous", "table-transposed"])
def test_t5_bias_gradcheck(seed, q_len, k_len, bidirectional, contiguous):
    table = table_for(seed, 8, 3, contiguous=contiguous).requires_grad_()
    fn = lambda t: posenc.t5_bias(t, q_len, k_len, bidirectional=bidirectional, max_distance=10)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (table,))
    assert torch.autograd.gradgradcheck(fn, (table,))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("q_len,k_len", [(4, 7), (7, 4), (0, 3)])
def test_t5_bias_backward_gradcheck(seed, q_len, k_len):
    g = torch.Generator().manual_seed(seed)
    grad = torch.randn(2, q_len, k_len, generator=g, dtype=torch.float64).requires_grad_()
    fn = lambda x: torch.ops.posenc.t5_bias_backward(x, 8, True, 10)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (grad,))
    assert torch.autograd.gradgradcheck(fn, (grad,))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("height,width", [(2, 3), (3, 1), (1, 4)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_2d_gradcheck(seed, height, width, bidirectional):
    th = table_for(seed, 8, 2).requires_grad_()
    tw = table_for(seed + 10, 8, 2, contiguous=False).requires_grad_()
    fn = lambda a, b: posenc.t5_bias_2d(a, b, height, width, bidirectional=bidirectional,  # noqa: E731
                                        max_distance=10)
    assert torch.autograd.gradcheck(fn, (th, tw))
    assert torch.autograd.gradgradcheck(fn, (th, tw))


@pytest.mark.parametrize("seed", SEEDS)
def test_t5_bias_2d_backward_gradcheck(seed):
    g = torch.Generator().manual_seed(seed)
    grad = torch.randn(2, 6, 6, generator=g, dtype=torch.float64).requires_grad_()
    fn = lambda x: torch.ops.posenc.t5_bias_2d_backward(x, 8, 2, 3, True, 10)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (grad,))
    assert torch.autograd.gradgradcheck(fn, (grad,))


def test_t5_bias_double_backward_is_the_forward():
    # d/d(grad) of t5_bias_backward(grad) . v is t5_bias(v): autograd.grad through create_graph.
    table = table_for(0, 8, 2).requires_grad_()
    out = posenc.t5_bias(table, 4, 6, max_distance=10)
    g = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    (gt,) = torch.autograd.grad(out, table, g, create_graph=True)
    v = torch.randn(8, 2, dtype=torch.float64)
    (gg,) = torch.autograd.grad(gt, g, v)
    assert torch.equal(gg, posenc.t5_bias(v, 4, 6, max_distance=10))


def test_alibi_bias_has_no_gradient():
    assert not posenc.alibi_bias(4, 3, 3).requires_grad
    assert not posenc.alibi_slopes(4).requires_grad
