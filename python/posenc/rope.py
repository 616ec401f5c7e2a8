"""Rotary position embedding (RoPE) and its variants, as PyTorch ops.

Conventions shared by every function here:

* x is (..., T, D) in float32, float64, bfloat16 or float16; positions are
  int64, (T) for every leading row or (B, T) when x is (B, ..., T, D); the
  result has x's shape and dtype (float32 math, float64 for float64 x,
  rounded once);
* layout "half" pairs channel i with i + R/2 (GPT-NeoX, Hugging Face Llama),
  "interleaved" pairs 2i with 2i + 1 (GPT-J, RoFormer); rotary_dim R (even,
  default D) leaves channels R .. D-1 untouched;
* scaling is a Hugging Face ``rope_scaling`` dict (``rope_type`` one of
  default, linear, ntk, dynamic, yarn, longrope, llama3, proportional, or the
  legacy key ``type``; plus factor, original_max_position_embeddings, ...;
  proportional, Gemma 4's, also reads partial_rotary_factor: the pairs past
  floor(p * R / 2) get frequency 0 and stay unrotated); seq_len, the
  current length, selects the regime of dynamic and longrope and defaults to
  max position + 1 as Hugging Face does; the attention factor multiplies cos
  and sin;
* precision "exact" forms position x frequency in float64 reduced modulo
  2*pi, so angles stay exact at long context; "fp32" reproduces the common
  float32 formula for matching checkpoints;
* a bad argument raises ValueError (a tensor of the wrong dtype TypeError)
  with the library's message, e.g. "[rope] rotary_dim must be even, got 7".

Formulas and sources: docs/rope.md.
"""

import operator

import torch

from ._library import load as _load

_ops = _load()
_SCALING_KEYS = frozenset(_ops.rope_scaling_keys())

__all__ = [
    "apply_mrope",
    "apply_rope",
    "apply_rope_axial",
    "apply_xpos",
    "rerotate",
    "rope_cos_sin",
    "rope_inv_freq",
]


def _scaling(scaling):
    """A rope_scaling dict as the ops' typed RopeScaling object (built and checked in C++)."""
    if scaling is None or isinstance(scaling, torch.ScriptObject):
        return scaling
    if not isinstance(scaling, dict):
        raise TypeError(f"[rope] scaling must be a rope_scaling dict or None, got {type(scaling).__name__}")
    kind = scaling.get("rope_type", scaling.get("type"))
    for key in scaling:
        # partial_rotary_factor is a scaling key only for proportional RoPE (Gemma 4);
        # elsewhere it sets the rotary dimension.
        if key not in _SCALING_KEYS or (key == "partial_rotary_factor" and kind != "proportional"):
            # An HF config key that belongs elsewhere (mrope_section, rope_theta, ...) says where.
            raise ValueError(_ops.hf_misplaced_scaling_key(key, "rope") or f"[rope] unknown rope_scaling key '{key}'")
    return torch.classes.posenc.RopeScaling(**scaling)


def _scalings(scaling):
    """A dict shared by every axis, or a list with one dict per axis."""
    if scaling is None or isinstance(scaling, (dict, torch.ScriptObject)):
        return None if scaling is None else [_scaling(scaling)]
    return [torch.classes.posenc.RopeScaling() if s is None else _scaling(s) for s in scaling]


def rope_inv_freq(dim, *, base=10000.0, scaling=None, seq_len=None):
    """The rotary frequencies: (inv_freq, a float64 tensor [dim/2]; attention_factor, a float).

    Without scaling, inv_freq[i] = base^(-2i/dim). seq_len None means the
    original length (the short / unscaled regime of longrope and dynamic).
    """
    inv_freq, attention_factor = _ops.rope_inv_freq(dim, base, _scaling(scaling), seq_len)
    return inv_freq, attention_factor


def rope_cos_sin(positions, dim, *, base=10000.0, scaling=None, seq_len=None, precision="exact",
                 dtype=torch.float32):
    """(cos, sin) of position x frequency, attention factor included.

    positions: an int N (positions 0 .. N-1, tables [N, dim/2]) or an int64
    tensor of any shape S (tables S + [dim/2]).
    """
    if isinstance(positions, torch.Tensor):
        return _ops.rope_cos_sin(positions, dim, base, _scaling(scaling), seq_len, precision, dtype)
    return _ops.rope_cos_sin_range(0, operator.index(positions), dim, base, _scaling(scaling), seq_len, precision,
                                   dtype)


def apply_rope(x, positions, *, base=10000.0, layout="half", rotary_dim=None, scaling=None, seq_len=None,
               inverse=False, precision="exact", inplace=False, omega=None):
    """Rotates x (..., T, D) by its positions (T) or (B, T).

    Each pair (a, b) of the first rotary_dim channels becomes
    (a cos - b sin, b cos + a sin) at angle position x omega_j. inverse
    rotates by -angle (and undoes the rotation when the attention factor is
    1). Differentiable with respect to x and omega: omega [rotary_dim/2], if
    given, replaces the frequencies of base and scaling (learned
    frequencies). inplace=True rotates x in place and returns it; it is
    refused while x (or omega) requires grad.
    """
    op = _ops.rope_ if inplace else _ops.rope
    return op(x, positions, base, layout, rotary_dim, _scaling(scaling), seq_len, inverse, precision, omega)


def apply_rope_axial(x, coords, *, dims_per_axis=None, base=10000.0, layout="half", rotary_dim=None, scaling=None,
                     seq_len=None, inverse=False, precision="exact"):
    """Axial 2D/3D RoPE (images, video): coords int64 (T, n_axes) or (B, T, n_axes).

    The rotary frequencies are split into one block per axis (dims_per_axis,
    default an even split of rotary_dim), block a with its own spectrum
    base^(-2i/dims_per_axis[a]) and rotated by coordinate a. scaling: a dict
    shared by every axis or a list of dicts, one per axis; seq_len: None
    (max coordinate + 1 per axis) or a list, one per axis.
    """
    dims = [] if dims_per_axis is None else list(dims_per_axis)
    lengths = None if seq_len is None else list(seq_len)
    return _ops.rope_axial(x, coords, dims, base, layout, rotary_dim, _scalings(scaling), lengths, inverse,
                           precision)


def apply_mrope(x, positions3, mrope_section, *, interleaved=False, base=10000.0, layout="half", rotary_dim=None,
                scaling=None, seq_len=None, inverse=False, precision="exact"):
    """M-RoPE (Qwen2-VL): positions3 (3, T) or (3, B, T) hold the t, h, w positions.

    mrope_section (three sizes summing to rotary_dim/2) assigns the first
    section[0] frequencies to t, the next section[1] to h, the last
    section[2] to w; interleaved=True is Qwen3-VL's assignment (h on j % 3 == 1,
    w on j % 3 == 2, within 3 x section).
    """
    return _ops.mrope(x, positions3, list(mrope_section), interleaved, base, layout, rotary_dim, _scaling(scaling),
                      seq_len, inverse, precision)


def apply_xpos(q, k, positions, *, scale_base=512, gamma=0.4, base=10000.0, layout="half", rotary_dim=None,
               precision="exact", center=0.0):
    """xPos (Sun et al. 2022): returns (q_rot, k_rot).

    Pair j of q is scaled by zeta_j^((p - center)/scale_base) and of k by its
    inverse, zeta_j = (2j/R + gamma)/(1 + gamma), then both are rotated, so
    q_i . k_j carries zeta^((i - j)/scale_base). center moves only the
    magnitudes (use about the middle position at long context).
    """
    return _ops.xpos(q, k, positions, float(scale_base), gamma, center, base, layout, rotary_dim, precision)


def rerotate(k, from_positions, to_positions, *, base=10000.0, layout="half", rotary_dim=None, scaling=None,
             seq_len=None, to_base=None, to_scaling=None, to_seq_len=None, precision="exact", inplace=False):
    """Moves keys already rotated at from_positions to to_positions, in one rotation.

    The angle is to_position x omega_to - from_position x omega_from (exact),
    the attention factor af_to / af_from. to_base and to_scaling default to
    base and scaling; to_seq_len to seq_len when given, else
    max(to_positions) + 1 (seq_len: max(from_positions) + 1), so the result
    equals apply_rope of the unrotated keys at to_positions.
    """
    op = _ops.rerotate_ if inplace else _ops.rerotate
    return op(k, from_positions, to_positions, base, layout, rotary_dim, _scaling(scaling), seq_len, to_base,
              _scaling(to_scaling), to_seq_len, precision)
