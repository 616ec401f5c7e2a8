"""Query temperature by position: Llama 4's NoPE layers (attn_temperature_tuning), after Nakanishi 2025's
scalable softmax.

    QueryTemperature(floor_scale=8192.0, attn_scale=0.1)

forward(q, positions) multiplies the query at absolute position p (from 0) by
s(p) = log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1: 1 for p < floor_scale - 1, then growing with the
log of the position, so that attention over a longer context does not flatten. q is (B, H, T, D) or any
(..., T, D), positions an int N (0 .. N-1) or an integer tensor (T) or (B, T); scales are formed in float64
(exact for every position below 2^53) and the product in q's dtype's compute type (float32, float64 for
float64 q), as posenc's other modules.
"""

import math
import operator

import torch
from torch import nn

from ._common import compute_dtype, fail

__all__ = ["QueryTemperature"]

_NAME = "QueryTemperature"


class QueryTemperature(nn.Module):
    def __init__(self, floor_scale=8192.0, attn_scale=0.1):
        super().__init__()
        floor_scale, attn_scale = float(floor_scale), float(attn_scale)
        if not (math.isfinite(floor_scale) and floor_scale > 0):
            fail(_NAME, f"floor_scale must be > 0, got {floor_scale:g}")
        if not math.isfinite(attn_scale):
            fail(_NAME, f"attn_scale must be finite, got {attn_scale:g}")
        self.floor_scale, self.attn_scale = floor_scale, attn_scale

    def scales(self, positions, dtype=torch.float64):
        """s(p) for every position: positions' shape, in `dtype`."""
        if not isinstance(positions, torch.Tensor):
            positions = torch.arange(operator.index(positions))
        if positions.dtype.is_floating_point or positions.dtype == torch.bool or positions.is_complex():
            raise TypeError(f"[{_NAME}] positions must be an integer tensor, got {positions.dtype}")
        if positions.numel() and int(positions.min()) < 0:
            fail(_NAME, f"positions must be >= 0, got {int(positions.min())}")
        p = positions.to(torch.float64)
        return (torch.log(torch.floor((p + 1) / self.floor_scale) + 1) * self.attn_scale + 1).to(dtype)

    def forward(self, q, positions):
        if q.dim() < 2:
            fail(_NAME, f"q must be (..., T, D), got {tuple(q.shape)}")
        t = q.shape[-2]
        if not isinstance(positions, torch.Tensor):
            positions = torch.arange(operator.index(positions))
        if positions.dim() == 1:
            if positions.shape[0] != t:
                fail(_NAME, f"positions must have shape (T) = ({t}) or (B, T), got {tuple(positions.shape)}")
            s = self.scales(positions, compute_dtype(q)).unsqueeze(-1)  # (T, 1)
        elif positions.dim() == 2 and q.dim() == 4 and positions.shape == (q.shape[0], t):
            s = self.scales(positions, compute_dtype(q))[:, None, :, None]  # (B, 1, T, 1)
        else:
            fail(_NAME, f"positions must have shape (T) = ({t}) or (B, T), got {tuple(positions.shape)}")
        return (q.to(s.dtype) * s).to(q.dtype)

    def extra_repr(self):
        return f"floor_scale={self.floor_scale:g}, attn_scale={self.attn_scale:g}"
