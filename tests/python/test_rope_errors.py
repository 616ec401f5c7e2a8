"""Every bad argument of the RoPE functions raises ValueError (a tensor of
the wrong dtype TypeError, an unsupported situation RuntimeError) with
exactly the library's message."""

import pytest
import torch

import posenc

X = torch.zeros(2, 4, 16, 64)
P = torch.arange(16)
P3 = torch.zeros(3, 16, dtype=torch.long)
C2 = torch.zeros(16, 2, dtype=torch.long)
TYPES = "default, linear, ntk, dynamic, yarn, longrope, llama3, proportional"


def longrope(short, long):
    return {"rope_type": "longrope", "original_max_position_embeddings": 4, "factor": 2.0, "short_factor": short,
            "long_factor": long}


# (id, call, exception type, message)
CASES = [
    # rotation parameters
    ("odd rotary_dim", lambda: posenc.apply_rope(X, P, rotary_dim=7), ValueError,
     "[rope] rotary_dim must be even, got 7"),
    ("rotary_dim > D", lambda: posenc.apply_rope(X, P, rotary_dim=96), ValueError,
     "[rope] rotary_dim must be at most head_dim (64), got 96"),
    ("rotary_dim 0", lambda: posenc.apply_rope(X, P, rotary_dim=0), ValueError,
     "[rope] rotary_dim must be at least 2, got 0"),
    ("odd D", lambda: posenc.apply_rope(torch.zeros(4, 7), torch.arange(4)), ValueError,
     "[rope] rotary_dim must be even, got 7"),
    ("layout", lambda: posenc.apply_rope(X, P, layout="neox"), ValueError,
     "[rope] layout must be one of half, interleaved, got 'neox'"),
    ("precision", lambda: posenc.apply_rope(X, P, precision="fp16"), ValueError,
     "[rope] precision must be one of exact, fp32, got 'fp16'"),
    ("base 0", lambda: posenc.apply_rope(X, P, base=0.0), ValueError, "[rope] base must be finite and > 0, got 0"),
    # tensors
    ("positions shape", lambda: posenc.apply_rope(X, torch.zeros(3, 16, dtype=torch.long)), ValueError,
     "[rope] positions must have shape (T) = (16) or (B, T) = (2, 16), got (3, 16)"),
    ("positions for 2-D x", lambda: posenc.apply_rope(torch.zeros(16, 8), torch.zeros(3, 16, dtype=torch.long)),
     ValueError, "[rope] positions must have shape (T) = (16), got (3, 16)"),
    ("positions 3-D", lambda: posenc.apply_rope(X, torch.zeros(2, 4, 16, dtype=torch.long)), ValueError,
     "[rope] positions must have shape (T) = (16) or (B, T) = (2, 16), got (2, 4, 16)"),
    ("float positions", lambda: posenc.apply_rope(X, P.float()), TypeError,
     "[rope] positions must be a signed integer tensor (int64, int32, int16 or int8), got Float"),
    ("integer x", lambda: posenc.apply_rope(X.long(), P), TypeError,
     "[rope] x must be float32, float64, bfloat16 or float16, got Long"),
    ("1-D x", lambda: posenc.apply_rope(torch.zeros(8), P), ValueError,
     "[rope] x must have shape (..., T, D), got (8)"),
    # scaling dicts
    ("unknown key", lambda: posenc.rope_inv_freq(8, scaling={"rope_type": "linear", "fator": 2}), ValueError,
     "[rope] unknown rope_scaling key 'fator'"),
    ("no rope_type", lambda: posenc.rope_inv_freq(8, scaling={"factor": 2}), ValueError,
     f"[rope] rope_scaling needs the key 'rope_type' (one of {TYPES})"),
    ("unknown rope_type", lambda: posenc.apply_rope(X, P, scaling={"rope_type": "su"}), ValueError,
     f"[rope] rope_type must be one of {TYPES}, got 'su'"),
    ("type and rope_type disagree",
     lambda: posenc.rope_inv_freq(8, scaling={"rope_type": "linear", "type": "yarn", "factor": 2}), ValueError,
     "[rope] rope_scaling keys 'rope_type' ('linear') and 'type' ('yarn') disagree"),
    ("not a dict", lambda: posenc.apply_rope(X, P, scaling=[{"rope_type": "linear"}]), TypeError,
     "[rope] scaling must be a rope_scaling dict or None, got list"),
    ("factor 0", lambda: posenc.apply_rope(X, P, scaling={"rope_type": "linear", "factor": 0}), ValueError,
     "[rope] factor must be finite and > 0, got 0"),
    ("factor missing", lambda: posenc.apply_rope(X, P, scaling={"rope_type": "linear"}), ValueError,
     "[rope] linear needs factor"),
    ("key of another type",
     lambda: posenc.apply_rope(X, P, scaling={"rope_type": "linear", "factor": 2, "beta_fast": 3}), ValueError,
     "[rope] key 'beta_fast' is not used by rope_type 'linear'"),
    ("yarn without L0", lambda: posenc.rope_inv_freq(8, scaling={"rope_type": "yarn", "factor": 2.0}), ValueError,
     "[rope] yarn needs original_max_position_embeddings"),
    ("longrope short length", lambda: posenc.rope_inv_freq(8, scaling=longrope([1, 1, 1], [1, 1, 1, 1])),
     ValueError, "[rope] longrope short_factor must have dim/2 = 4 values, got 3"),
    ("longrope long value", lambda: posenc.rope_inv_freq(8, scaling=longrope([1] * 4, [1, 1, 0, 1])), ValueError,
     "[rope] longrope long_factor[2] must be finite and > 0, got 0"),
    ("llama3 bands",
     lambda: posenc.rope_inv_freq(8, scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4,
                                              "high_freq_factor": 1, "original_max_position_embeddings": 8192}),
     ValueError, "[rope] high_freq_factor must be finite and greater than low_freq_factor (4), got 1"),
    ("ntk dim 2", lambda: posenc.rope_inv_freq(2, scaling={"rope_type": "ntk", "factor": 2.0}), ValueError,
     "[rope] dim must be > 2 for rope_type 'ntk', got 2"),
    ("seq_len 0",
     lambda: posenc.rope_inv_freq(8, scaling={"rope_type": "dynamic", "factor": 2.0,
                                              "original_max_position_embeddings": 4}, seq_len=0),
     ValueError, "[rope] seq_len must be positive, got 0"),
    # tables
    ("odd dim", lambda: posenc.rope_inv_freq(7), ValueError, "[rope] dim must be even, got 7"),
    ("N = 0", lambda: posenc.rope_cos_sin(0, 8), ValueError, "[rope] positions must be at least 1, got 0"),
    ("table dtype", lambda: posenc.rope_cos_sin(4, 8, dtype=torch.int32), TypeError,
     "[rope] dtype must be one of float32, float64, bfloat16, float16, got Int"),
    ("cos and sin shapes", lambda: torch.ops.posenc.rope_rotate(X, torch.zeros(16, 32), torch.zeros(16, 16)),
     ValueError, "[rope] cos and sin must have the same shape, got (16, 32) and (16, 16)"),
    ("cos rows", lambda: torch.ops.posenc.rope_rotate(X, torch.zeros(15, 32), torch.zeros(15, 32)), ValueError,
     "[rope] cos must have shape (T, R/2) = (16, 32) or (B, T, R/2) = (2, 16, 32), got (15, 32)"),
    ("cos too wide", lambda: torch.ops.posenc.rope_rotate(X, torch.zeros(16, 40), torch.zeros(16, 40)), ValueError,
     "[rope] rotary_dim must be at most head_dim (64), got 80"),
    # learned frequencies
    ("omega length", lambda: posenc.apply_rope(X, P, omega=torch.zeros(16)), ValueError,
     "[rope] omega must have rotary_dim/2 = 32 frequencies (rotary_dim 64), got 16"),
    ("omega 2-D", lambda: posenc.apply_rope(X, P, omega=torch.zeros(2, 16)), ValueError,
     "[rope] omega must be 1-D [rotary_dim/2], got shape (2, 16)"),
    ("omega nan", lambda: posenc.apply_rope(X, P, omega=torch.full((32,), float("nan"))), ValueError,
     "[rope] omega[0] must be finite, got nan"),
    ("omega integer", lambda: posenc.apply_rope(X, P, omega=torch.zeros(32, dtype=torch.long)), TypeError,
     "[rope] omega must be float32, float64, bfloat16 or float16, got Long"),
    ("omega with scaling",
     lambda: posenc.apply_rope(X, P, omega=torch.zeros(32), scaling={"rope_type": "linear", "factor": 2.0}),
     ValueError,
     "[rope] omega replaces the frequencies of base and scaling: pass scaling=None with omega, got rope_type 'linear'"),
    ("omega with seq_len", lambda: posenc.apply_rope(X, P, omega=torch.zeros(32), seq_len=5), ValueError,
     "[rope] seq_len selects the regime of a scaling and has no meaning with omega, got 5"),
    # in place
    ("inplace, x requires grad", lambda: posenc.apply_rope(X.clone().requires_grad_(), P, inplace=True),
     RuntimeError,
     "[rope] inplace=True is not differentiable, but x requires grad: use inplace=False, or run under "
     "torch.no_grad()"),
    ("inplace, omega requires grad",
     lambda: posenc.apply_rope(X.clone(), P, inplace=True, omega=torch.zeros(32, requires_grad=True)),
     RuntimeError,
     "[rope] inplace=True is not differentiable, but omega requires grad: use inplace=False, or run under "
     "torch.no_grad()"),
    ("rerotate inplace, k requires grad",
     lambda: posenc.rerotate(X.clone().requires_grad_(), P, P, inplace=True), RuntimeError,
     "[rerotate] inplace=True is not differentiable, but k requires grad: use inplace=False, or run under "
     "torch.no_grad()"),
    # M-RoPE
    ("mrope sum", lambda: posenc.apply_mrope(X, P3, [8, 8, 8]), ValueError,
     "[mrope] mrope_section must sum to rotary_dim/2 = 32, got 24 (8+8+8)"),
    ("mrope count", lambda: posenc.apply_mrope(X, P3, [16, 16]), ValueError,
     "[mrope] mrope_section must have 3 entries (t, h, w), got 2"),
    ("mrope positions", lambda: posenc.apply_mrope(X, torch.zeros(2, 16, dtype=torch.long), [16, 8, 8]),
     ValueError, "[mrope] positions must have shape (3, T) = (3, 16) or (3, B, T) = (3, 2, 16), got (2, 16)"),
    ("mrope batch", lambda: posenc.apply_mrope(X, torch.zeros(3, 3, 16, dtype=torch.long), [16, 8, 8]),
     ValueError, "[mrope] positions must have shape (3, T) = (3, 16) or (3, B, T) = (3, 2, 16), got (3, 3, 16)"),
    ("mrope layout", lambda: posenc.apply_mrope(X, P3, [16, 8, 8], layout="x"), ValueError,
     "[mrope] layout must be one of half, interleaved, got 'x'"),
    # axial
    ("axial coords rows", lambda: posenc.apply_rope_axial(X, torch.zeros(15, 2, dtype=torch.long)), ValueError,
     "[rope-axial] coords must have shape (T, n_axes) = (16, 2) or (B, T, n_axes) = (2, 16, 2), got (15, 2)"),
    ("axial coords 1-D", lambda: posenc.apply_rope_axial(X, P), ValueError,
     "[rope-axial] coords must have shape (T, n_axes) = (16, n_axes) or (B, T, n_axes) = (2, 16, n_axes), "
     "got (16)"),
    ("axial 4 axes", lambda: posenc.apply_rope_axial(X, torch.zeros(16, 4, dtype=torch.long)), ValueError,
     "[rope-axial] coords must have shape (..., n_axes) with n_axes 1, 2 or 3, got (16, 4)"),
    ("axial dims sum", lambda: posenc.apply_rope_axial(X, C2, dims_per_axis=[16, 32]), ValueError,
     "[rope-axial] dims_per_axis must sum to rotary_dim = 64, got 48 (16+32)"),
    ("axial dims count", lambda: posenc.apply_rope_axial(X, C2, dims_per_axis=[16, 16, 32]), ValueError,
     "[rope-axial] dims_per_axis must have one entry per axis of coords (2), got 3"),
    ("axial uneven split", lambda: posenc.apply_rope_axial(torch.zeros(16, 8), torch.zeros(16, 3, dtype=torch.long)),
     ValueError, "[rope-axial] rotary_dim must be divisible by 6 (an even share per axis), got 8"),
    ("axial scalings", lambda: posenc.apply_rope_axial(X, C2, scaling=[None, None, None]), ValueError,
     "[rope-axial] scaling must have 0, 1 or n_axes = 2 entries, got 3"),
    ("axial seq_len", lambda: posenc.apply_rope_axial(X, C2, seq_len=[4]), ValueError,
     "[rope-axial] seq_len must have 0 or n_axes = 2 entries, got 1"),
    ("axial attention factors",
     lambda: posenc.apply_rope_axial(
         X, C2, scaling=[{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}, None]),
     ValueError,
     "[rope-axial] the axes' attention factors must agree (they scale the same cos/sin), got 1.1386294361119891 "
     "for axis 0 and 1 for axis 1"),
    # xPos, re-rotation
    ("xpos scale_base", lambda: posenc.apply_xpos(X, X, P, scale_base=0), ValueError,
     "[xpos] scale_base must be finite and > 0, got 0"),
    ("xpos gamma", lambda: posenc.apply_xpos(X, X, P, gamma=0), ValueError,
     "[xpos] gamma must be finite and > 0, got 0"),
    ("xpos head dims", lambda: posenc.apply_xpos(X, X[..., :32], P), ValueError,
     "[xpos] q and k must have the same head dim, got 64 and 32"),
    ("xpos positions", lambda: posenc.apply_xpos(X, X, P[:3]), ValueError,
     "[xpos] positions must have shape (T) = (16) or (B, T) = (2, 16), got (3)"),
    ("rerotate to shape", lambda: posenc.rerotate(X, P, P[:8]), ValueError,
     "[rerotate] to_positions must have shape (T) = (16) or (B, T) = (2, 16), got (8)"),
    ("rerotate from shape", lambda: posenc.rerotate(X, P[:8], P), ValueError,
     "[rerotate] from_positions must have shape (T) = (16) or (B, T) = (2, 16), got (8)"),
    ("rerotate to_scaling", lambda: posenc.rerotate(X, P, P, to_scaling={"rope_type": "linear"}), ValueError,
     "[rerotate] linear needs factor"),
]


@pytest.mark.parametrize("call,error,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error
    assert str(info.value) == message
