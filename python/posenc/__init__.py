"""posenc: positional encodings for transformers, as PyTorch ops.

The ops live in the C++ library libposenc_nn.so (``torch.ops.posenc``); this
package loads it and gives the ops Pythonic names and defaults. It is found
at ``$POSENC_LIBRARY`` when set, else at ``<repo>/build/lib/libposenc_nn.so``.

Conventions shared by every function:

* positions are an integer tensor of any shape S (the table is S + [dim]), or
  an int N meaning positions 0 .. N-1 (the table is [N, dim]);
* layout is "interleaved" (sin, cos, sin, cos, ...), "half" (all sines, then
  all cosines; tensor2tensor) or "cos-sin";
* precision "exact" forms p * omega in float64 and reduces it modulo 2*pi
  before rounding, so float32 values are within 5e-7 of the exact ones up to
  p = 2^24; "fp32" reproduces the common float32 formula for matching
  existing checkpoints;
* tables are computed in float32 (float64 when asked) and rounded once to
  the requested dtype;
* a bad argument raises ValueError with a message naming it, e.g.
  "[sinusoidal] dim must be even, got 7"; a tensor of the wrong dtype raises
  TypeError.

Rotary embeddings (RoPE, its scalings, axial, M-RoPE, xPos, re-rotation) are
in posenc.rope, relative position vectors (Shaw et al., sinusoidal, 2D) in
posenc.relative, attention biases (ALiBi, T5) in posenc.attention_bias, and
attention with any of them applied inside (fused or differentiable) in
posenc.attention; all are re-exported here.

Analysis (posenc.analysis, posenc.tensor_files, from the second op library
libposenc_analysis_torch.so found beside the first): proximity matrices,
the indicators of Wang et al. (monotonicity, translation invariance,
symmetry), the monotone range, the translation residual, the probes of Wang &
Chen and identical-word probing of trained runs, all in float64 and not
differentiable; and tensors read from and written to .npy / .safetensors files
(a position table taken straight from a checkpoint).
"""

import math
import operator

import torch

from ._library import load as _load
from ._version import __version__  # noqa: F401  (CMakeLists.txt's project VERSION)

_ops = _load()

from .rope import (  # noqa: E402  (after the library is loaded)
    apply_mrope,
    apply_rope,
    apply_rope_axial,
    apply_xpos,
    rerotate,
    rope_cos_sin,
    rope_inv_freq,
)
from .relative import (  # noqa: E402
    relative_logits,
    relative_logits_2d,
    relative_values,
    sinusoidal_relative_table,
)
from .attention_bias import (  # noqa: E402
    alibi_bias,
    alibi_bias_2d,
    alibi_slopes,
    kerple_offset_bias,
    t5_bias,
    t5_bias_2d,
    t5_bucket,
)
from .attention import attention  # noqa: E402
from .analysis import (  # noqa: E402
    identical_word_attention,
    indicators,
    monotone_range,
    probe,
    proximity,
    translation_residual,
)
from .tensor_files import load_tensor, load_tensors, save_tensor  # noqa: E402
from .check import check  # noqa: E402

__all__ = [
    "absolute",
    "absolute_kinds",
    "alibi_bias",
    "alibi_bias_2d",
    "alibi_slopes",
    "apply_mrope",
    "apply_rope",
    "apply_rope_axial",
    "apply_xpos",
    "attention",
    "check",
    "identical_word_attention",
    "indicators",
    "learnable_sinusoidal",
    "learned",
    "load_tensor",
    "load_tensors",
    "monotone_range",
    "probe",
    "proximity",
    "relative_logits",
    "relative_logits_2d",
    "relative_values",
    "rerotate",
    "rope_cos_sin",
    "rope_inv_freq",
    "save_tensor",
    "sinusoidal",
    "sinusoidal_2d",
    "sinusoidal_3d",
    "sinusoidal_frequencies",
    "sinusoidal_relative_table",
    "t5_bias",
    "t5_bias_2d",
    "t5_bucket",
    "translation_matrix",
    "translation_residual",
]


def _is_tensor(positions):
    return isinstance(positions, torch.Tensor)


def sinusoidal(positions, dim, *, base=10000.0, layout="interleaved", precision="exact", scale=1.0,
               dtype=torch.float32):
    """Fixed sinusoidal encoding (Vaswani et al. 2017).

    omega_i = base^(-2i/dim); PE[p, 2i] = scale*sin(p*omega_i), PE[p, 2i+1] =
    scale*cos(p*omega_i) in the interleaved layout. Returns positions.shape +
    [dim], or [N, dim] for an int N (computed along the range).
    """
    if _is_tensor(positions):
        return _ops.sinusoidal(positions, dim, base, scale, layout, precision, dtype)
    return _ops.sinusoidal_range(0, operator.index(positions), dim, base, scale, layout, precision, dtype)


def sinusoidal_frequencies(dim, *, base=10000.0):
    """omega_i = base^(-2i/dim), i = 0 .. dim/2-1, as a float64 tensor."""
    return _ops.sinusoidal_frequencies(dim, base)


def learnable_sinusoidal(positions, omega, *, layout="interleaved", scale=1.0):
    """Sinusoids with learnable frequencies (Wang et al., ICLR 2021).

    omega: [dim/2] floating tensor, differentiable. Returns positions.shape +
    [dim] in omega's dtype.
    """
    return _ops.learnable_sinusoidal(positions, omega, layout, scale)


def learned(table, positions):
    """Learned absolute table lookup (BERT, GPT-2): table[positions].

    table: [rows, dim], differentiable; positions in 0 .. rows-1. Returns
    positions.shape + [dim] in table's dtype.
    """
    return _ops.learned(table, positions)


def absolute(kind, positions, dim, *, base=10000.0, scale=1.0, layout="interleaved", precision="exact",
             length=0, dtype=None, table=None, omega=None):
    """Every absolute encoding under one name; see absolute_kinds().

    kind: "sinusoidal", "index" (p), "normalized" (p/(length-1); length 0
    means the number of positions), "binary" (bit j of p), "signed-binary"
    (2*bit - 1), "sine-binary" (sin(p*pi/2^(j+1))), "sine-only"
    (sin(p*base^(-j/dim))), "learned" (needs table=[rows, dim]) or
    "learnable-sinusoidal" (omega=[dim/2], default the fixed frequencies).
    dtype None means float32, or the dtype of table / omega for those kinds.
    """
    if _is_tensor(positions):
        return _ops.absolute(kind, positions, dim, base, scale, layout, precision, length, dtype, table, omega)
    return _ops.absolute_range(kind, 0, operator.index(positions), dim, base, scale, layout, precision, length,
                               dtype, table, omega)


def absolute_kinds():
    """The kind names absolute() accepts."""
    return list(_ops.absolute_kinds())


def sinusoidal_2d(height, width, dim, *, base=10000.0, scale=1.0, layout="interleaved", precision="exact",
                  normalize=False, normalize_scale=2 * math.pi, dtype=torch.float32):
    """2D sinusoidal grid (DETR, MAE): [height*width, dim], row y*width + x.

    Channels [0, dim/2) encode y, [dim/2, dim) encode x; dim divisible by 4.
    With normalize, a coordinate c on an axis of size S becomes
    c/(S-1) * normalize_scale.
    """
    return _ops.sinusoidal_2d(height, width, dim, base, scale, layout, precision, normalize, normalize_scale, dtype)


def sinusoidal_3d(frames, height, width, dim, *, base=10000.0, scale=1.0, layout="interleaved",
                  precision="exact", normalize=False, normalize_scale=2 * math.pi, dtype=torch.float32):
    """3D sinusoidal grid (video): [frames*height*width, dim], row (t*height + y)*width + x.

    dim/3 channels each for t, y, x in that order; dim divisible by 6.
    """
    return _ops.sinusoidal_3d(frames, height, width, dim, base, scale, layout, precision, normalize,
                              normalize_scale, dtype)


def translation_matrix(delta, dim, *, base=10000.0, layout="interleaved"):
    """T(delta), float64 [dim, dim], with PE[p + delta] = T(delta) @ PE[p] and T(a) T(b) = T(a + b)."""
    return _ops.translation_matrix(delta, dim, base, layout)


_SUBPACKAGES = ("nn", "hf")


def __getattr__(name):
    # `import posenc` then `posenc.nn.RotaryEmbedding(...)`, as with torch.nn: the modules are imported on first
    # use, not at `import posenc` (posenc.nn imports posenc itself, so an eager import would be circular).
    if name in _SUBPACKAGES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'posenc' has no attribute '{name}'")
