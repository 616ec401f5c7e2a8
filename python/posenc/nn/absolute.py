"""Input-point encodings as modules: a vector per position, added to (or
concatenated with) the token embeddings by the model.

forward returns the table (no embeddings are touched here):

    SinusoidalEncoding(dim)(positions)            positions.shape + [dim], or [N, dim] for an int N
    SinusoidalEncoding2d(dim)(height, width)      [height*width, dim], row y*width + x (DETR, MAE)
    SinusoidalEncoding3d(dim)(frames, h, w)       [frames*h*w, dim], row (t*h + y)*w + x
    LearnedEncoding(max_positions, dim)(p)        weight[p] (BERT, GPT-2)
    LearnableSinusoidalEncoding(dim)(p)           sinusoids of trainable omega (Wang et al., ICLR 2021)

Tables are float32, float64 after module.to(torch.float64) (fixed encodings
keep an empty non-persistent buffer only to follow .to()). Formulas:
docs/absolute.md; the C++ modules: include/posenc/nn/*encoding*.h.
"""

import math
import operator

import torch
from torch import nn

import posenc

from ._common import as_int, checked_std, fail, integer

__all__ = [
    "LearnableSinusoidalEncoding",
    "LearnedEncoding",
    "SinusoidalEncoding",
    "SinusoidalEncoding2d",
    "SinusoidalEncoding3d",
]


class _FixedEncoding(nn.Module):
    """A parameter-free encoding whose table dtype follows module.to()."""

    def __init__(self):
        super().__init__()
        self.register_buffer("_anchor", torch.empty(0), persistent=False)

    def _dtype(self):
        return torch.float64 if self._anchor.dtype == torch.float64 else torch.float32


class SinusoidalEncoding(_FixedEncoding):
    """Fixed sinusoids (Vaswani et al. 2017): PE[p, 2i] = scale sin(p omega_i), PE[p, 2i+1] = scale cos(p omega_i),
    omega_i = base^(-2i/dim) (interleaved layout; "half" and "cos-sin" reorder the channels).

    forward(positions): an int N (positions 0..N-1, [N, dim]) or an integer tensor of shape S (S + [dim]).
    Bad options raise the op's ValueError, e.g. "[sinusoidal] dim must be even, got 7".
    """

    def __init__(self, dim, *, base=10000.0, layout="interleaved", precision="exact", scale=1.0):
        super().__init__()
        self.dim = integer("sinusoidal", "dim", dim, minimum=1)
        self.base, self.layout, self.precision, self.scale = float(base), layout, precision, float(scale)
        self.forward(1)  # the op validates every option, with its own messages

    def forward(self, positions):
        return posenc.sinusoidal(positions, self.dim, base=self.base, layout=self.layout, precision=self.precision,
                                 scale=self.scale, dtype=self._dtype())

    def extra_repr(self):
        return f"dim={self.dim}, base={self.base:g}, layout={self.layout}, precision={self.precision}, " \
               f"scale={self.scale:g}"


class _GridEncoding(_FixedEncoding):
    def __init__(self, dim, base, layout, precision, scale, normalize, normalize_scale):
        super().__init__()
        self.dim = operator.index(dim)
        self.base, self.layout, self.precision, self.scale = float(base), layout, precision, float(scale)
        self.normalize, self.normalize_scale = bool(normalize), float(normalize_scale)

    def _options(self):
        return dict(base=self.base, scale=self.scale, layout=self.layout, precision=self.precision,
                    normalize=self.normalize, normalize_scale=self.normalize_scale, dtype=self._dtype())

    def extra_repr(self):
        return f"dim={self.dim}, base={self.base:g}, layout={self.layout}, normalize={self.normalize}"


class SinusoidalEncoding2d(_GridEncoding):
    """2D sinusoidal grid (DETR, MAE): forward(height, width) -> [height*width, dim], row y*width + x.

    Channels [0, dim/2) encode y and [dim/2, dim) encode x; dim divisible by 4. normalize maps a
    coordinate c on an axis of size S to c/(S-1) * normalize_scale.
    """

    def __init__(self, dim, *, base=10000.0, layout="interleaved", precision="exact", scale=1.0, normalize=False,
                 normalize_scale=2 * math.pi):
        super().__init__(dim, base, layout, precision, scale, normalize, normalize_scale)
        self.forward(1, 1)  # validates the options: "[sinusoidal-2d] dim must be divisible by 4 ..."

    def forward(self, height, width):
        return posenc.sinusoidal_2d(operator.index(height), operator.index(width), self.dim, **self._options())


class SinusoidalEncoding3d(_GridEncoding):
    """3D sinusoidal grid (video): forward(frames, height, width) -> [frames*height*width, dim],
    row (t*height + y)*width + x; dim/3 channels each for t, y, x; dim divisible by 6."""

    def __init__(self, dim, *, base=10000.0, layout="interleaved", precision="exact", scale=1.0, normalize=False,
                 normalize_scale=2 * math.pi):
        super().__init__(dim, base, layout, precision, scale, normalize, normalize_scale)
        self.forward(1, 1, 1)

    def forward(self, frames, height, width):
        return posenc.sinusoidal_3d(operator.index(frames), operator.index(height), operator.index(width), self.dim,
                                    **self._options())


class LearnedEncoding(nn.Module):
    """Learned absolute table (BERT, GPT-2): parameter weight [max_positions, dim] ~ N(0, init_std^2).

    forward(positions) -> weight[positions] (an int N: rows 0..N-1). A position outside the table raises
    the op's ValueError "[learned] position P is outside the table of R rows (valid 0..R-1)".
    """

    def __init__(self, max_positions, dim, *, init_std=0.02):
        super().__init__()
        name = "LearnedEncoding"
        # The C++ module's words.
        self.max_positions = as_int(name, "max_positions", max_positions)
        if self.max_positions < 1:
            fail(name, f"max_positions must be at least 1, got {self.max_positions}")
        self.dim = as_int(name, "dim", dim)
        if self.dim < 1:
            fail(name, f"dim must be positive, got {self.dim}")
        self.init_std = checked_std(name, init_std)
        self.weight = nn.Parameter(torch.empty(self.max_positions, self.dim))
        self.reset_parameters()

    @classmethod
    def from_pretrained_weight(cls, weight, *, freeze=False):
        """A module holding a copy of a checkpoint's table, e.g. GPT-2 ``wpe.weight`` or BERT
        ``embeddings.position_embeddings.weight``, both (max_positions, dim); freeze stops its gradient."""
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
            got = f"{weight.dim()}-D {weight.dtype}" if isinstance(weight, torch.Tensor) else type(weight).__name__
            fail("LearnedEncoding", f"weight must be a 2-D floating tensor (max_positions, dim), got {got}")
        module = cls(weight.shape[0], weight.shape[1], init_std=0.0)
        module.weight = nn.Parameter(weight.detach().clone(), requires_grad=not freeze)
        return module

    def reset_parameters(self):
        with torch.no_grad():
            self.weight.normal_(0.0, self.init_std)

    def forward(self, positions):
        if not isinstance(positions, torch.Tensor):
            positions = torch.arange(operator.index(positions), dtype=torch.int64)
        return posenc.learned(self.weight, positions)

    def extra_repr(self):
        return f"max_positions={self.max_positions}, dim={self.dim}, init_std={self.init_std:g}"


class LearnableSinusoidalEncoding(nn.Module):
    """Sinusoids with trainable frequencies (Wang et al., ICLR 2021): parameter omega [dim/2], initialised
    to base^(-2i/dim) (float32). forward(positions) -> positions.shape + [dim] in omega's dtype."""

    def __init__(self, dim, *, base=10000.0, layout="interleaved", scale=1.0):
        super().__init__()
        name = "learnable-sinusoidal"  # the C++ module's tag
        self.dim = integer(name, "dim", dim, minimum=1)
        if self.dim % 2:
            fail(name, f"dim must be even, got {self.dim}")
        self.base, self.layout, self.scale = float(base), layout, float(scale)
        if not (math.isfinite(self.base) and self.base > 0):
            fail(name, f"base must be finite and > 0, got {self.base:g}")
        if not math.isfinite(self.scale):
            fail(name, f"scale must be finite, got {self.scale:g}")
        self.omega = nn.Parameter(torch.empty(self.dim // 2))
        self.reset_parameters()
        self.forward(1)  # the op checks the layout

    def reset_parameters(self):
        with torch.no_grad():
            self.omega.copy_(posenc.sinusoidal_frequencies(self.dim, base=self.base))

    def forward(self, positions):
        if not isinstance(positions, torch.Tensor):
            positions = torch.arange(operator.index(positions), dtype=torch.int64)
        return posenc.learnable_sinusoidal(positions, self.omega, layout=self.layout, scale=self.scale)

    def extra_repr(self):
        return f"dim={self.dim}, base={self.base:g}, layout={self.layout}, scale={self.scale:g}"
