"""Every bad argument of the relative-vector ops raises ValueError (a wrong
dtype: TypeError) with exactly the library's message, naming the Python
function: no C++ backtrace, no torch decoration."""

import pytest
import torch

import posenc

ops = torch.ops.posenc
z = torch.zeros

Q = z(1, 8, 16, 64)          # (B, H, Tq, Dh)
TABLE = z(9, 64)             # k = 4
P = z(1, 8, 16, 16)          # (B, H, Tq, Tk)
Q2D = z(1, 8, 20, 64)        # a 4 x 5 grid
TH, TW = z(7, 64), z(9, 64)  # 2*4-1, 2*5-1 rows

# (id, call, exception type, message)
CASES = [
    # relative_logits
    ("logits k < 0", lambda: posenc.relative_logits(Q, TABLE, -1), ValueError,
     "[relative_logits] max_distance must be >= 0, got -1"),
    ("logits rows", lambda: posenc.relative_logits(Q, z(8, 64), 4), ValueError,
     "[relative_logits] table must have 2*max_distance+1 = 9 rows, got 8"),
    ("logits columns", lambda: posenc.relative_logits(Q, z(9, 32), 4), ValueError,
     "[relative_logits] table must have head_dim = 64 columns, got 32"),
    ("logits per-head count", lambda: posenc.relative_logits(Q, z(3, 9, 64), 4), ValueError,
     "[relative_logits] table must be shared (1 table) or one per head (8 tables), got 3"),
    ("logits q 3-D", lambda: posenc.relative_logits(z(8, 16, 64), TABLE, 4), ValueError,
     "[relative_logits] q must be 4-D (B, H, Tq, Dh), got 3-D"),
    ("logits table 4-D", lambda: posenc.relative_logits(Q, z(1, 8, 9, 64), 4), ValueError,
     "[relative_logits] table must be 2-D [2k+1, Dh] or 3-D [H, 2k+1, Dh], got 4-D"),
    ("logits table 1-D", lambda: posenc.relative_logits(Q, z(9), 4), ValueError,
     "[relative_logits] table must be 2-D [2k+1, Dh] or 3-D [H, 2k+1, Dh], got 1-D"),
    ("logits dtype mismatch", lambda: posenc.relative_logits(Q, TABLE.double(), 4), TypeError,
     "[relative_logits] table must have q's dtype (float32), got float64"),
    ("logits bf16 q, f16 table", lambda: posenc.relative_logits(Q.bfloat16(), TABLE.half(), 4), TypeError,
     "[relative_logits] table must have q's dtype (bfloat16), got float16"),
    ("logits integer q", lambda: posenc.relative_logits(Q.long(), TABLE, 4), TypeError,
     "[relative_logits] q must be float32, float64, bfloat16 or float16, got Long"),
    ("logits k_len < 0", lambda: posenc.relative_logits(Q, TABLE, 4, k_len=-1), ValueError,
     "[relative_logits] k_len must be >= 0, got -1"),
    ("logits query_offset", lambda: posenc.relative_logits(Q, TABLE, 4, query_offset=(1 << 62) + 1), ValueError,
     "[relative_logits] query_offset must be within +-2^62, got 4611686018427387905"),
    # relative_values
    ("values k < 0", lambda: posenc.relative_values(P, TABLE, -2), ValueError,
     "[relative_values] max_distance must be >= 0, got -2"),
    ("values rows", lambda: posenc.relative_values(P, z(10, 64), 4), ValueError,
     "[relative_values] table must have 2*max_distance+1 = 9 rows, got 10"),
    ("values per-head count", lambda: posenc.relative_values(P, z(2, 9, 64), 4), ValueError,
     "[relative_values] table must be shared (1 table) or one per head (8 tables), got 2"),
    ("values probs 3-D", lambda: posenc.relative_values(z(8, 16, 16), TABLE, 4), ValueError,
     "[relative_values] probs must be 4-D (B, H, Tq, Tk), got 3-D"),
    ("values table 4-D", lambda: posenc.relative_values(P, z(1, 1, 9, 64), 4), ValueError,
     "[relative_values] table must be 2-D [2k+1, Dh] or 3-D [H, 2k+1, Dh], got 4-D"),
    ("values dtype mismatch", lambda: posenc.relative_values(P.half(), TABLE, 4), TypeError,
     "[relative_values] table must have probs' dtype (float16), got float32"),
    # relative_table_grad (the gradient op, from torch.ops)
    ("table_grad tables", lambda: ops.relative_table_grad(P, Q, 4, 3, 0), ValueError,
     "[relative_table_grad] table must be shared (1 table) or one per head (8 tables), got 3"),
    ("table_grad tables 0", lambda: ops.relative_table_grad(P, Q, 4, 0, 0), ValueError,
     "[relative_table_grad] table must be shared (1 table) or one per head (8 tables), got 0"),
    ("table_grad k < 0", lambda: ops.relative_table_grad(P, Q, -1, 1, 0), ValueError,
     "[relative_table_grad] max_distance must be >= 0, got -1"),
    ("table_grad x dtype", lambda: ops.relative_table_grad(P, Q.double(), 4, 1, 0), TypeError,
     "[relative_table_grad] x must have weights' dtype (float32), got float64"),
    ("table_grad x rows", lambda: ops.relative_table_grad(P, z(1, 8, 15, 64), 4, 1, 0), ValueError,
     "[relative_table_grad] x must be (B, H, Tq) = (1, 8, 16) like weights, got (1, 8, 15)"),
    ("table_grad x 2-D", lambda: ops.relative_table_grad(P, z(16, 64), 4, 1, 0), ValueError,
     "[relative_table_grad] x must be 4-D (B, H, Tq, Dh), got 2-D"),
    ("table_grad weights 5-D", lambda: ops.relative_table_grad(z(1, 1, 8, 16, 16), Q, 4, 1, 0), ValueError,
     "[relative_table_grad] weights must be 4-D (B, H, Tq, Tk), got 5-D"),
    # relative_2d_expand / reduce
    ("expand height 0", lambda: ops.relative_2d_expand(z(1, 2, 20, 7), z(1, 2, 20, 9), 0, 5), ValueError,
     "[relative_2d_expand] height must be >= 1, got 0"),
    ("expand width -1", lambda: ops.relative_2d_expand(z(1, 2, 20, 7), z(1, 2, 20, 9), 4, -1), ValueError,
     "[relative_2d_expand] width must be >= 1, got -1"),
    ("expand rel_h rows", lambda: ops.relative_2d_expand(z(1, 2, 21, 7), z(1, 2, 21, 9), 4, 5), ValueError,
     "[relative_2d_expand] rel_h must have height*width = 20 rows, got 21"),
    ("expand rel_h columns", lambda: ops.relative_2d_expand(z(1, 2, 20, 6), z(1, 2, 20, 9), 4, 5), ValueError,
     "[relative_2d_expand] rel_h must have 2*height-1 = 7 columns, got 6"),
    ("expand rel_w columns", lambda: ops.relative_2d_expand(z(1, 2, 20, 7), z(1, 2, 20, 6), 4, 5), ValueError,
     "[relative_2d_expand] rel_w must have 2*width-1 = 9 columns, got 6"),
    ("expand rel_w rows", lambda: ops.relative_2d_expand(z(1, 2, 20, 7), z(1, 2, 19, 9), 4, 5), ValueError,
     "[relative_2d_expand] rel_w must have height*width = 20 rows, got 19"),
    ("expand rel_w heads", lambda: ops.relative_2d_expand(z(1, 2, 20, 7), z(1, 3, 20, 9), 4, 5), ValueError,
     "[relative_2d_expand] rel_w must be (B, H) = (1, 2) like rel_h, got (1, 3)"),
    ("expand rel_w dtype", lambda: ops.relative_2d_expand(z(1, 2, 20, 7), z(1, 2, 20, 9).double(), 4, 5),
     TypeError, "[relative_2d_expand] rel_w must have rel_h's dtype (float32), got float64"),
    ("expand rel_h 3-D", lambda: ops.relative_2d_expand(z(2, 20, 7), z(1, 2, 20, 9), 4, 5), ValueError,
     "[relative_2d_expand] rel_h must be 4-D (B, H, HW, 2*height-1), got 3-D"),
    ("reduce width 0", lambda: ops.relative_2d_reduce(z(1, 2, 20, 20), 4, 0), ValueError,
     "[relative_2d_reduce] width must be >= 1, got 0"),
    ("reduce grad columns", lambda: ops.relative_2d_reduce(z(1, 2, 20, 19), 4, 5), ValueError,
     "[relative_2d_reduce] grad must be (B, H, HW, HW) = (1, 2, 20, 20), got (1, 2, 20, 19)"),
    ("reduce grad rows", lambda: ops.relative_2d_reduce(z(1, 2, 21, 21), 4, 5), ValueError,
     "[relative_2d_reduce] grad must be (B, H, HW, HW) = (1, 2, 20, 20), got (1, 2, 21, 21)"),
    ("reduce grad 2-D", lambda: ops.relative_2d_reduce(z(20, 20), 4, 5), ValueError,
     "[relative_2d_reduce] grad must be 4-D (B, H, HW, HW), got 2-D"),
    # relative_logits_2d
    ("2d height 0", lambda: posenc.relative_logits_2d(Q2D, TH, TW, 0, 5), ValueError,
     "[relative_logits_2d] height must be >= 1, got 0"),
    ("2d width 0", lambda: posenc.relative_logits_2d(Q2D, TH, TW, 4, 0), ValueError,
     "[relative_logits_2d] width must be >= 1, got 0"),
    ("2d q rows", lambda: posenc.relative_logits_2d(z(1, 8, 21, 64), TH, TW, 4, 5), ValueError,
     "[relative_logits_2d] q must have height*width = 20 rows, got 21"),
    ("2d table_h rows", lambda: posenc.relative_logits_2d(Q2D, z(6, 64), TW, 4, 5), ValueError,
     "[relative_logits_2d] table_h must have 2*height-1 = 7 rows, got 6"),
    ("2d table_w rows", lambda: posenc.relative_logits_2d(Q2D, TH, z(6, 64), 4, 5), ValueError,
     "[relative_logits_2d] table_w must have 2*width-1 = 9 rows, got 6"),
    ("2d table_h columns", lambda: posenc.relative_logits_2d(Q2D, z(7, 32), TW, 4, 5), ValueError,
     "[relative_logits_2d] table_h must have head_dim = 64 columns, got 32"),
    ("2d table_w per-head count", lambda: posenc.relative_logits_2d(Q2D, TH, z(3, 9, 64), 4, 5), ValueError,
     "[relative_logits_2d] table_w must be shared (1 table) or one per head (8 tables), got 3"),
    ("2d q 3-D", lambda: posenc.relative_logits_2d(z(8, 20, 64), TH, TW, 4, 5), ValueError,
     "[relative_logits_2d] q must be 4-D (B, H, HW, Dh), got 3-D"),
    ("2d table_h 4-D", lambda: posenc.relative_logits_2d(Q2D, z(1, 1, 7, 64), TW, 4, 5), ValueError,
     "[relative_logits_2d] table_h must be 2-D [2*height-1, Dh] or 3-D [H, 2*height-1, Dh], got 4-D"),
    ("2d table_w dtype", lambda: posenc.relative_logits_2d(Q2D, TH, TW.double(), 4, 5), TypeError,
     "[relative_logits_2d] table_w must have q's dtype (float32), got float64"),
    ("2d huge grid", lambda: posenc.relative_logits_2d(Q2D, TH, TW, 1 << 32, 1 << 32), ValueError,
     "[relative_logits_2d] q must have height*width = 4294967296*4294967296 rows, got 20"),
    # sinusoidal_relative_table
    ("sin table k < 0", lambda: posenc.sinusoidal_relative_table(-1, 8), ValueError,
     "[sinusoidal_relative_table] max_distance must be >= 0, got -1"),
    ("sin table odd dim", lambda: posenc.sinusoidal_relative_table(4, 7), ValueError,
     "[sinusoidal_relative_table] dim must be even, got 7"),
    ("sin table dim 0", lambda: posenc.sinusoidal_relative_table(4, 0), ValueError,
     "[sinusoidal_relative_table] dim must be positive, got 0"),
    ("sin table odd dim with omega", lambda: posenc.sinusoidal_relative_table(4, 7, omega=z(3)), ValueError,
     "[sinusoidal_relative_table] dim must be even, got 7"),
    ("sin table base", lambda: posenc.sinusoidal_relative_table(4, 8, base=0.0), ValueError,
     "[sinusoidal_relative_table] base must be finite and > 0, got 0"),
    ("sin table layout", lambda: posenc.sinusoidal_relative_table(4, 8, layout="x"), ValueError,
     "[sinusoidal_relative_table] layout must be one of interleaved, half, cos-sin, got 'x'"),
    ("sin table too large", lambda: posenc.sinusoidal_relative_table(1000000, 2048), ValueError,
     "[sinusoidal_relative_table] positions x dim must be at most 2147483648 values, got 2000001 x 2048"),
    ("sin table omega shape", lambda: posenc.sinusoidal_relative_table(4, 8, omega=z(3)), ValueError,
     "[sinusoidal_relative_table] omega must have shape [dim/2] = [4] for dim 8, got [3]"),
    ("sin table omega 2-D", lambda: posenc.sinusoidal_relative_table(4, 8, omega=z(2, 2)), ValueError,
     "[sinusoidal_relative_table] omega must have shape [dim/2] = [4] for dim 8, got [2, 2]"),
    ("sin table integer omega", lambda: posenc.sinusoidal_relative_table(4, 8, omega=z(4).long()), TypeError,
     "[sinusoidal_relative_table] omega must be float32, float64, bfloat16 or float16, got Long"),
    ("sin table dtype", lambda: posenc.sinusoidal_relative_table(4, 8, dtype=torch.int32), TypeError,
     "[sinusoidal_relative_table] dtype must be one of float32, float64, bfloat16, float16, got Int"),
    ("sin table dtype with omega", lambda: posenc.sinusoidal_relative_table(4, 8, omega=z(4), dtype=torch.int32),
     TypeError, "[sinusoidal_relative_table] dtype must be one of float32, float64, bfloat16, float16, got Int"),
]


@pytest.mark.parametrize("call,error,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error
    assert str(info.value) == message

