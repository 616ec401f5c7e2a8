"""Every bad argument of the attention-bias ops raises ValueError (a wrong
dtype: TypeError) with exactly the library's message, naming the Python
function."""

import re

import pytest
import torch

import posenc

T32 = torch.zeros(32, 8)

# (id, call, exception type, message)
CASES = [
    # ALiBi
    ("slopes heads 0", lambda: posenc.alibi_slopes(0), ValueError, "[alibi_slopes] num_heads must be >= 1, got 0"),
    ("slopes heads < 0", lambda: posenc.alibi_slopes(-3), ValueError,
     "[alibi_slopes] num_heads must be >= 1, got -3"),
    ("slopes too many", lambda: posenc.alibi_slopes(2 ** 40), ValueError,
     "[alibi_slopes] num_heads must be at most 2^31, got 1099511627776"),
    ("slopes dtype", lambda: posenc.alibi_slopes(8, dtype=torch.int64), TypeError,
     "[alibi_slopes] dtype must be one of float32, float64, bfloat16, float16, got Long"),
    ("heads 0", lambda: posenc.alibi_bias(0, 4, 4), ValueError, "[alibi_bias] num_heads must be >= 1, got 0"),
    ("q_len < 0", lambda: posenc.alibi_bias(8, -1, 4), ValueError, "[alibi_bias] q_len must be >= 0, got -1"),
    ("k_len < 0", lambda: posenc.alibi_bias(8, 4, -1), ValueError, "[alibi_bias] k_len must be >= 0, got -1"),
    ("k_len < 0, causal", lambda: posenc.alibi_bias(8, 0, -2, causal=True), ValueError,
     "[alibi_bias] k_len must be >= 0, got -2"),
    ("causal q_len > k_len", lambda: posenc.alibi_bias(8, 5, 3, causal=True), ValueError,
     "[alibi_bias] causal needs q_len <= k_len (the queries are the last q_len keys), got q_len 5 and k_len 3"),
    ("causal q_len > k_len = 0", lambda: posenc.alibi_bias(8, 1, 0, causal=True), ValueError,
     "[alibi_bias] causal needs q_len <= k_len (the queries are the last q_len keys), got q_len 1 and k_len 0"),
    ("too large", lambda: posenc.alibi_bias(32, 2 ** 20, 2 ** 20), ValueError,
     "[alibi_bias] the bias must have at most 2^31 values (num_heads*q_len*k_len), got 35184372088832"),
    ("bias dtype", lambda: posenc.alibi_bias(8, 4, 4, dtype=torch.int32), TypeError,
     "[alibi_bias] dtype must be one of float32, float64, bfloat16, float16, got Int"),
    ("out shape", lambda: posenc.alibi_bias(8, 16, 16, out=torch.empty(8, 16, 15)), ValueError,
     "[alibi_bias] out must be a contiguous float32 or float64 tensor of shape [8, 16, 16], "
     "got a contiguous float32 tensor of shape [8, 16, 15]"),
    ("out dtype", lambda: posenc.alibi_bias(8, 16, 16, out=torch.empty(8, 16, 16, dtype=torch.float16)), ValueError,
     "[alibi_bias] out must be a contiguous float32 or float64 tensor of shape [8, 16, 16], "
     "got a contiguous float16 tensor of shape [8, 16, 16]"),
    ("out strided", lambda: posenc.alibi_bias(8, 16, 16, out=torch.empty(8, 16, 16).transpose(1, 2)), ValueError,
     "[alibi_bias] out must be a contiguous float32 or float64 tensor of shape [8, 16, 16], "
     "got a non-contiguous float32 tensor of shape [8, 16, 16]"),
    ("out, causal q_len > k_len", lambda: posenc.alibi_bias(2, 3, 2, causal=True, out=torch.empty(2, 3, 2)),
     ValueError,
     "[alibi_bias] causal needs q_len <= k_len (the queries are the last q_len keys), got q_len 3 and k_len 2"),
    ("out, heads 0", lambda: posenc.alibi_bias(0, 3, 3, out=torch.empty(0, 3, 3)), ValueError,
     "[alibi_bias] num_heads must be >= 1, got 0"),
    ("2d heads 0", lambda: posenc.alibi_bias_2d(0, 4, 4), ValueError, "[alibi_bias_2d] num_heads must be >= 1, got 0"),
    ("2d height 0", lambda: posenc.alibi_bias_2d(8, 0, 4), ValueError, "[alibi_bias_2d] height must be >= 1, got 0"),
    ("2d width 0", lambda: posenc.alibi_bias_2d(8, 4, 0), ValueError, "[alibi_bias_2d] width must be >= 1, got 0"),
    ("2d width < 0", lambda: posenc.alibi_bias_2d(8, 4, -5), ValueError, "[alibi_bias_2d] width must be >= 1, got -5"),
    ("2d too large", lambda: posenc.alibi_bias_2d(32, 128, 128), ValueError,  # 32 * 2^28 values
     "[alibi_bias_2d] the bias must have at most 2^31 values (num_heads*HW*HW), got 8589934592"),
    ("2d distance", lambda: posenc.alibi_bias_2d(8, 4, 4, distance="cosine"), ValueError,
     '[alibi_bias_2d] distance must be "euclidean" or "manhattan", got "cosine"'),
    ("2d dtype", lambda: posenc.alibi_bias_2d(8, 4, 4, dtype=torch.int8), TypeError,
     "[alibi_bias_2d] dtype must be one of float32, float64, bfloat16, float16, got Char"),
    # T5 buckets
    ("bucket float", lambda: posenc.t5_bucket(torch.tensor([1.0])), TypeError,
     "[t5_bucket] relative_position must be a signed integer tensor (int64, int32, int16 or int8), got Float"),
    ("bucket bool", lambda: posenc.t5_bucket(torch.tensor([True])), TypeError,
     "[t5_bucket] relative_position must be a signed integer tensor (int64, int32, int16 or int8), got Bool"),
    ("bucket uint8", lambda: posenc.t5_bucket(torch.tensor([3], dtype=torch.uint8)), TypeError,
     "[t5_bucket] relative_position must be a signed integer tensor (int64, int32, int16 or int8), got Byte"),
    ("buckets 1", lambda: posenc.t5_bucket(torch.arange(3), bidirectional=False, num_buckets=1), ValueError,
     "[t5_bucket] num_buckets must be >= 2, got 1"),
    ("buckets 0", lambda: posenc.t5_bucket(torch.arange(3), num_buckets=0), ValueError,
     "[t5_bucket] num_buckets must be >= 2, got 0"),
    ("buckets odd", lambda: posenc.t5_bucket(torch.arange(3), num_buckets=31), ValueError,
     "[t5_bucket] num_buckets must be even when bidirectional (half per direction), got 31"),
    ("buckets 2 bidirectional", lambda: posenc.t5_bucket(torch.arange(3), num_buckets=2, max_distance=8),
     ValueError, "[t5_bucket] num_buckets must be >= 4 when bidirectional, got 2"),
    ("max_distance causal", lambda: posenc.t5_bucket(torch.arange(3), bidirectional=False, max_distance=16),
     ValueError, "[t5_bucket] max_distance must be > num_buckets/2 = 16, got 16"),
    ("max_distance", lambda: posenc.t5_bucket(torch.arange(3), max_distance=16), ValueError,
     "[t5_bucket] max_distance must be > num_buckets/2 = 16, got 16"),
    ("max_distance 0", lambda: posenc.t5_bucket(torch.arange(3), bidirectional=False, num_buckets=4, max_distance=0),
     ValueError, "[t5_bucket] max_distance must be > num_buckets/2 = 2, got 0"),
    # T5 bias
    ("table 3-D", lambda: posenc.t5_bias(torch.zeros(2, 32, 8), 4, 4), ValueError,
     "[t5_bias] table must be 2-D [num_buckets, heads], got 3-D"),
    ("table 1-D", lambda: posenc.t5_bias(torch.zeros(32), 4, 4), ValueError,
     "[t5_bias] table must be 2-D [num_buckets, heads], got 1-D"),
    ("table int", lambda: posenc.t5_bias(torch.zeros(32, 8, dtype=torch.long), 4, 4), TypeError,
     "[t5_bias] table must be float32, float64, bfloat16 or float16, got Long"),
    ("table heads 0", lambda: posenc.t5_bias(torch.zeros(32, 0), 4, 4), ValueError,
     "[t5_bias] heads must be >= 1, got 0"),
    ("table rows odd", lambda: posenc.t5_bias(torch.zeros(31, 8), 4, 4), ValueError,
     "[t5_bias] num_buckets must be even when bidirectional (half per direction), got 31"),
    ("table rows 1", lambda: posenc.t5_bias(torch.zeros(1, 8), 4, 4, bidirectional=False), ValueError,
     "[t5_bias] num_buckets must be >= 2, got 1"),
    ("t5 max_distance", lambda: posenc.t5_bias(T32, 4, 4, max_distance=3), ValueError,
     "[t5_bias] max_distance must be > num_buckets/2 = 16, got 3"),
    ("t5 q_len < 0", lambda: posenc.t5_bias(T32, -1, 4), ValueError, "[t5_bias] q_len must be >= 0, got -1"),
    ("t5 k_len < 0", lambda: posenc.t5_bias(T32, 4, -1), ValueError, "[t5_bias] k_len must be >= 0, got -1"),
    ("t5 too large", lambda: posenc.t5_bias(torch.zeros(32, 32), 2 ** 20, 2 ** 20), ValueError,
     "[t5_bias] the bias must have at most 2^31 values (heads*q_len*k_len), got 35184372088832"),
    ("t5 backward grad 2-D", lambda: torch.ops.posenc.t5_bias_backward(torch.zeros(4, 4), 32, True, 128),
     ValueError, "[t5_bias] grad must be 3-D [heads, q_len, k_len], got 2-D"),
    ("t5 backward grad int", lambda: torch.ops.posenc.t5_bias_backward(torch.zeros(2, 4, 4, dtype=torch.int32), 32,
                                                                       True, 128),
     TypeError, "[t5_bias] grad must be float32, float64, bfloat16 or float16, got Int"),
    ("t5 backward buckets odd", lambda: torch.ops.posenc.t5_bias_backward(torch.zeros(2, 4, 4), 33, True, 128),
     ValueError, "[t5_bias] num_buckets must be even when bidirectional (half per direction), got 33"),
    # 2D T5
    ("2d table_h 3-D", lambda: posenc.t5_bias_2d(torch.zeros(1, 32, 8), T32, 2, 2), ValueError,
     "[t5_bias_2d] table_h must be 2-D [num_buckets, heads], got 3-D"),
    ("2d table_w 1-D", lambda: posenc.t5_bias_2d(T32, torch.zeros(32), 2, 2), ValueError,
     "[t5_bias_2d] table_w must be 2-D [num_buckets, heads], got 1-D"),
    ("2d table_w shape", lambda: posenc.t5_bias_2d(T32, torch.zeros(32, 4), 2, 2), ValueError,
     "[t5_bias_2d] table_w must have table_h's shape [32, 8], got [32, 4]"),
    ("2d table_w dtype", lambda: posenc.t5_bias_2d(T32, T32.double(), 2, 2), TypeError,
     "[t5_bias_2d] table_w must have table_h's dtype (float32), got float64"),
    ("2d table int", lambda: posenc.t5_bias_2d(T32.int(), T32, 2, 2), TypeError,
     "[t5_bias_2d] table_h must be float32, float64, bfloat16 or float16, got Int"),
    ("2d height 0", lambda: posenc.t5_bias_2d(T32, T32, 0, 2), ValueError, "[t5_bias_2d] height must be >= 1, got 0"),
    ("2d width 0", lambda: posenc.t5_bias_2d(T32, T32, 2, 0), ValueError, "[t5_bias_2d] width must be >= 1, got 0"),
    ("2d heads 0", lambda: posenc.t5_bias_2d(torch.zeros(32, 0), torch.zeros(32, 0), 2, 2), ValueError,
     "[t5_bias_2d] heads must be >= 1, got 0"),
    ("2d too large", lambda: posenc.t5_bias_2d(T32, T32, 129, 128), ValueError,  # 8 * (129*128)^2 values
     "[t5_bias_2d] the bias must have at most 2^31 values (heads*HW*HW), got 2181169152"),
    ("2d buckets odd", lambda: posenc.t5_bias_2d(torch.zeros(9, 2), torch.zeros(9, 2), 2, 2), ValueError,
     "[t5_bias_2d] num_buckets must be even when bidirectional (half per direction), got 9"),
    ("2d backward grad shape", lambda: torch.ops.posenc.t5_bias_2d_backward(torch.zeros(2, 12, 11), 8, 3, 4, True,
                                                                            10),
     ValueError, "[t5_bias_2d] grad must have shape [heads, 12, 12] for a 3x4 grid, got [2, 12, 11]"),
    ("2d backward grad 2-D", lambda: torch.ops.posenc.t5_bias_2d_backward(torch.zeros(12, 12), 8, 3, 4, True, 10),
     ValueError, "[t5_bias_2d] grad must be 3-D [heads, HW, HW], got 2-D"),
]


@pytest.mark.parametrize("call,kind,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_message(call, kind, message):
    with pytest.raises(kind, match=f"^{re.escape(message)}$") as info:
        call()
    assert type(info.value) is kind
    assert str(info.value) == message
