"""Every bad argument raises ValueError (a wrong tensor dtype: TypeError) with
exactly the kernel's message: no C++ backtrace, no torch decoration."""

import pytest
import torch

import posenc

TABLE = torch.zeros(4, 3)
KINDS = ("sinusoidal, index, normalized, binary, signed-binary, sine-binary, sine-only, learned, "
         "learnable-sinusoidal")

# (id, call, exception type, message)
CASES = [
    ("odd dim", lambda: posenc.sinusoidal(4, 7), ValueError, "[sinusoidal] dim must be even, got 7"),
    ("odd dim, tensor", lambda: posenc.sinusoidal(torch.arange(3), 7), ValueError,
     "[sinusoidal] dim must be even, got 7"),
    ("dim 0", lambda: posenc.sinusoidal(4, 0), ValueError, "[sinusoidal] dim must be positive, got 0"),
    ("N = 0", lambda: posenc.sinusoidal(0, 8), ValueError, "[sinusoidal] positions must be at least 1, got 0"),
    ("N < 0", lambda: posenc.sinusoidal(-3, 8), ValueError, "[sinusoidal] positions must be at least 1, got -3"),
    ("too large", lambda: posenc.sinusoidal(1 << 28, 16), ValueError,
     "[sinusoidal] positions x dim must be at most 2147483648 values, got 268435456 x 16"),
    ("base 0", lambda: posenc.sinusoidal(4, 8, base=0.0), ValueError,
     "[sinusoidal] base must be finite and > 0, got 0"),
    ("base nan", lambda: posenc.sinusoidal(4, 8, base=float("nan")), ValueError,
     "[sinusoidal] base must be finite and > 0, got nan"),
    ("scale inf", lambda: posenc.sinusoidal(4, 8, scale=float("inf")), ValueError,
     "[sinusoidal] scale must be finite, got inf"),
    ("unknown layout", lambda: posenc.sinusoidal(4, 8, layout="halves"), ValueError,
     "[sinusoidal] layout must be one of interleaved, half, cos-sin, got 'halves'"),
    ("unknown precision", lambda: posenc.sinusoidal(4, 8, precision="fp16"), ValueError,
     "[sinusoidal] precision must be one of exact, fp32, got 'fp16'"),
    ("bad dtype", lambda: posenc.sinusoidal(4, 8, dtype=torch.int32), TypeError,
     "[sinusoidal] dtype must be one of float32, float64, bfloat16, float16, got Int"),
    ("float positions", lambda: posenc.sinusoidal(torch.tensor([1.0]), 8), TypeError,
     "[sinusoidal] positions must be a signed integer tensor (int64, int32, int16 or int8), got Float"),
    # uint8 is torch's old mask type and wraps at 256; bool is a mask: neither is read as positions.
    ("uint8 positions", lambda: posenc.sinusoidal(torch.tensor([1], dtype=torch.uint8), 8), TypeError,
     "[sinusoidal] positions must be a signed integer tensor (int64, int32, int16 or int8), got Byte"),
    ("bool positions", lambda: posenc.learned(TABLE, torch.tensor([True])), TypeError,
     "[learned] positions must be a signed integer tensor (int64, int32, int16 or int8), got Bool"),
    ("uint8 rope positions", lambda: posenc.apply_rope(torch.zeros(2, 4), torch.tensor([0, 1], dtype=torch.uint8)),
     TypeError, "[rope] positions must be a signed integer tensor (int64, int32, int16 or int8), got Byte"),
    ("2d dim % 4", lambda: posenc.sinusoidal_2d(4, 4, 6), ValueError,
     "[sinusoidal-2d] dim must be divisible by 4 (an even share per axis), got 6"),
    ("3d dim % 6", lambda: posenc.sinusoidal_3d(2, 4, 4, 8), ValueError,
     "[sinusoidal-3d] dim must be divisible by 6 (an even share per axis), got 8"),
    ("2d height 0", lambda: posenc.sinusoidal_2d(0, 4, 8), ValueError,
     "[sinusoidal-2d] height must be at least 1, got 0"),
    ("3d frames 0", lambda: posenc.sinusoidal_3d(0, 4, 4, 12), ValueError,
     "[sinusoidal-3d] frames must be at least 1, got 0"),
    ("2d layout", lambda: posenc.sinusoidal_2d(2, 2, 8, layout="z"), ValueError,
     "[sinusoidal-2d] layout must be one of interleaved, half, cos-sin, got 'z'"),
    ("learned above", lambda: posenc.learned(TABLE, torch.tensor([0, 4])), ValueError,
     "[learned] position 4 is outside the table of 4 rows (valid 0..3)"),
    ("learned below", lambda: posenc.learned(TABLE, torch.tensor([-1])), ValueError,
     "[learned] position -1 is outside the table of 4 rows (valid 0..3)"),
    ("learned 1-D table", lambda: posenc.learned(torch.zeros(3), torch.tensor([0])), ValueError,
     "[learned] table must be 2-D [rows, dim], got shape [3]"),
    ("unknown kind", lambda: posenc.absolute("rope", 4, 8), ValueError,
     f"[absolute] kind must be one of {KINDS}, got 'rope'"),
    ("absolute layout", lambda: posenc.absolute("sinusoidal", 4, 8, layout="x"), ValueError,
     "[absolute] layout must be one of interleaved, half, cos-sin, got 'x'"),
    ("learned kind, no table", lambda: posenc.absolute("learned", 4, 3), ValueError,
     "[absolute] kind 'learned' needs a table of shape [rows, dim], got None"),
    ("learned kind, wrong dim", lambda: posenc.absolute("learned", 4, 8, table=TABLE), ValueError,
     "[absolute] table must have shape [rows, 8] for dim 8, got [4, 3]"),
    ("learned kind, N = 0", lambda: posenc.absolute("learned", 0, 3, table=TABLE), ValueError,
     "[learned] positions must be at least 1, got 0"),
    ("omega shape", lambda: posenc.absolute("learnable-sinusoidal", 4, 8, omega=torch.zeros(3)), ValueError,
     "[absolute] omega must have shape [dim/2] = [4] for dim 8, got [3]"),
    ("table with index", lambda: posenc.absolute("index", 4, 8, table=TABLE), ValueError,
     "[absolute] table and omega are only used by kinds 'learned' and 'learnable-sinusoidal', got kind 'index'"),
    ("binary negative", lambda: posenc.absolute("binary", torch.tensor([-2]), 8), ValueError,
     "[binary] positions must be >= 0, got -2"),
    ("sine-only base", lambda: posenc.absolute("sine-only", 4, 8, base=-1.0), ValueError,
     "[sine-only] base must be finite and > 0, got -1"),
    ("empty omega", lambda: posenc.learnable_sinusoidal(torch.arange(3), torch.zeros(0)), ValueError,
     "[learnable-sinusoidal] omega must hold at least 1 frequency, got 0"),
    ("nan omega", lambda: posenc.learnable_sinusoidal(torch.arange(3), torch.tensor([float("nan")])), ValueError,
     "[learnable-sinusoidal] omega must be finite, got nan at index 0"),
    ("2-D omega", lambda: posenc.learnable_sinusoidal(torch.arange(3), torch.zeros(2, 2)), ValueError,
     "[learnable-sinusoidal] omega must be 1-D [dim/2], got shape [2, 2]"),
    ("integer omega", lambda: posenc.learnable_sinusoidal(torch.arange(3), torch.zeros(2, dtype=torch.long)),
     TypeError, "[learnable-sinusoidal] omega must be float32, float64, bfloat16 or float16, got Long"),
    ("learnable layout", lambda: posenc.learnable_sinusoidal(torch.arange(3), torch.ones(2), layout="y"), ValueError,
     "[learnable-sinusoidal] layout must be one of interleaved, half, cos-sin, got 'y'"),
    ("translation odd dim", lambda: posenc.translation_matrix(1.0, 7), ValueError,
     "[translation] dim must be even, got 7"),
    ("translation delta", lambda: posenc.translation_matrix(float("inf"), 8), ValueError,
     "[translation] delta must be finite, got inf"),
    ("translation layout", lambda: posenc.translation_matrix(1.0, 8, layout="q"), ValueError,
     "[translation] layout must be one of interleaved, half, cos-sin, got 'q'"),
]


@pytest.mark.parametrize("call,error,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error
    assert str(info.value) == message
