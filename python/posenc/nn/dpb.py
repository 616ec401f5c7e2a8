"""Dynamic position biases: a small MLP of the relative position gives each head's logit bias.

    DynamicPositionBias       x-transformers' DynamicPositionBias (1D): b_h = MLP(phi(i' - j))_h,
                              phi(r) = r or sign(r) log(1 + |r|) (log_distance)
    ContinuousPositionBias2d  Swin Transformer V2's log-spaced continuous position bias (Liu et al.
                              2022): 16 sigmoid(MLP(log-spaced (dy, dx)))_h on a height x width grid

The ops (torch.ops.posenc.dpb_offset_bias, cpb_grid_bias) compute the O(H*T) offset rows / the
[H, 2H-1, 2W-1] grid and carry every parameter's gradient; forward(q_len, k_len) spreads them to the
dense [H, q_len, k_len] bias. Formulas: docs/relative.md; C++ modules: include/posenc/nn/dpb_bias.h
(same parameter names, initialisations and messages).
"""

import math
import operator

import torch
from torch import nn

import posenc  # noqa: F401  (loads the op library)

from ._common import as_int, fail, integer, OffsetRowsBias

__all__ = ["ContinuousPositionBias2d", "DynamicPositionBias"]

_ops = torch.ops.posenc


def _uniform_(tensor, fan_in):
    """torch.nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias."""
    bound = 1.0 / math.sqrt(fan_in)
    tensor.uniform_(-bound, bound)


class DynamicPositionBias(OffsetRowsBias, nn.Module):
    """x-transformers' DynamicPositionBias: for query i (at i' = i + k_len - q_len) and key j,
    bias[h, i, j] = MLP(phi(i' - j))_h with the MLP Linear(1, hidden) [+ LayerNorm] + SiLU, depth - 1 times
    Linear(hidden, hidden) [+ LayerNorm] + SiLU, then Linear(hidden, num_heads); -inf where j > i' when causal.
    x-transformers builds it with hidden = model dim // 4, depth 2, no norm, linear distance.

    Parameters (nn.Linear's [out, in] layout, hidden layers stacked): in_weight [hidden, 1], in_bias [hidden],
    hidden_weight [depth-1, hidden, hidden], hidden_bias [depth-1, hidden], norm_weight / norm_bias
    [depth, hidden] (norm only), out_weight [num_heads, hidden], out_bias [num_heads].
    """

    point = "logit bias"  # where MultiheadAttention plugs it in
    registry_names = ("dpb",)  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        # x-transformers' width: the model dim // 4.
        return cls(num_heads, max(num_heads * head_dim // 4, 1), causal=causal)

    def __init__(self, num_heads, hidden, *, depth=2, log_distance=False, norm=False, causal=False):
        super().__init__()
        name = "DynamicPositionBias"
        self.num_heads = integer(name, "num_heads", num_heads, minimum=1)
        self.hidden = integer(name, "hidden", hidden, minimum=1)
        self.depth = integer(name, "depth", depth, minimum=1)
        self.log_distance, self.norm, self.causal = bool(log_distance), bool(norm), bool(causal)
        hd, depth = self.hidden, self.depth
        self.in_weight = nn.Parameter(torch.empty(hd, 1))
        self.in_bias = nn.Parameter(torch.empty(hd))
        self.hidden_weight = nn.Parameter(torch.empty(depth - 1, hd, hd))
        self.hidden_bias = nn.Parameter(torch.empty(depth - 1, hd))
        if self.norm:
            self.norm_weight = nn.Parameter(torch.empty(depth, hd))
            self.norm_bias = nn.Parameter(torch.empty(depth, hd))
        else:
            self.norm_weight = self.norm_bias = None
        self.out_weight = nn.Parameter(torch.empty(self.num_heads, hd))
        self.out_bias = nn.Parameter(torch.empty(self.num_heads))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            _uniform_(self.in_weight, 1)
            _uniform_(self.in_bias, 1)
            _uniform_(self.hidden_weight, self.hidden)
            _uniform_(self.hidden_bias, self.hidden)
            if self.norm:
                self.norm_weight.fill_(1.0)
                self.norm_bias.zero_()
            _uniform_(self.out_weight, self.hidden)
            _uniform_(self.out_bias, self.hidden)

    def offset_rows(self, q_len, k_len, dtype=None):
        """[H, q_len + k_len - 1]: the bias of offset d = j - i' at column d + k_len - 1."""
        dtype = self.in_weight.dtype if dtype is None else dtype
        norm = (self.norm_weight.to(dtype), self.norm_bias.to(dtype)) if self.norm else (None, None)
        return _ops.dpb_offset_bias(self.in_weight.to(dtype), self.in_bias.to(dtype), self.hidden_weight.to(dtype),
                                    self.hidden_bias.to(dtype), *norm, self.out_weight.to(dtype),
                                    self.out_bias.to(dtype), operator.index(q_len), operator.index(k_len),
                                    self.log_distance)

    def extra_repr(self):
        return f"num_heads={self.num_heads}, hidden={self.hidden}, depth={self.depth}, " \
               f"log_distance={self.log_distance}, norm={self.norm}, causal={self.causal}"


class ContinuousPositionBias2d(nn.Module):
    """Swin Transformer V2's continuous position bias on a height x width grid flattened as y*width + x:
    bias[h, i, j] = 16 sigmoid(W2 ReLU(W1 (c(y_i - y_j, height), c(x_i - x_j, width)) + b1))_h with
    c(t, n) = sign(8t/(n-1)) log2(1 + |8t/(n-1)|) / 3 (n: the pretrained window's extent when given);
    q_len = k_len = height*width.

    Parameters: fc1_weight [hidden, 2], fc1_bias [hidden], fc2_weight [num_heads, hidden] (Swin's cpb_mlp.0 and
    cpb_mlp.2, no second bias), N(0, init_std^2) weights and a zero bias (Swin's init, init_std 0.02).
    """

    point = "logit bias"  # where MultiheadAttention plugs it in

    def __init__(self, num_heads, height, width, *, hidden=512, pretrained_height=0, pretrained_width=0,
                 init_std=0.02):
        super().__init__()
        name = "ContinuousPositionBias2d"
        self.num_heads = integer(name, "num_heads", num_heads, minimum=1)
        self.hidden = integer(name, "hidden", hidden, minimum=1)
        self.height = integer(name, "height", height, minimum=1)
        self.width = integer(name, "width", width, minimum=1)
        self.pretrained_height = as_int(name, "pretrained_height", pretrained_height)
        self.pretrained_width = as_int(name, "pretrained_width", pretrained_width)
        for axis, value in (("height", self.pretrained_height), ("width", self.pretrained_width)):
            if value != 0 and value < 2:  # 1 would divide by 0
                fail(name, f"pretrained_{axis} must be 0 (the grid's) or >= 2, got {value}")
        self.init_std = float(init_std)
        if not (math.isfinite(self.init_std) and self.init_std >= 0):
            fail(name, f"init_std must be finite and >= 0, got {init_std:g}")
        self.fc1_weight = nn.Parameter(torch.empty(self.hidden, 2))
        self.fc1_bias = nn.Parameter(torch.empty(self.hidden))
        self.fc2_weight = nn.Parameter(torch.empty(self.num_heads, self.hidden))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            self.fc1_weight.normal_(0.0, self.init_std)  # Swin's trunc_normal_ cuts at +-2: never at std 0.02
            self.fc1_bias.zero_()
            self.fc2_weight.normal_(0.0, self.init_std)

    def grid(self, dtype=None):
        """[H, 2*height-1, 2*width-1]: element (y_j - y_i + height - 1, x_j - x_i + width - 1)."""
        dtype = self.fc1_weight.dtype if dtype is None else dtype
        return _ops.cpb_grid_bias(self.fc1_weight.to(dtype), self.fc1_bias.to(dtype), self.fc2_weight.to(dtype),
                                  self.height, self.width, self.pretrained_height, self.pretrained_width)

    def forward(self, q_len, k_len):
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        cells = self.height * self.width
        if q_len != cells or k_len != cells:
            fail("ContinuousPositionBias2d", f"q_len and k_len must both be height*width = {cells}, got {q_len} "
                                             f"and {k_len}")
        y, x = torch.arange(cells) // self.width, torch.arange(cells) % self.width
        row = y.unsqueeze(0) - y.unsqueeze(1) + (self.height - 1)
        col = x.unsqueeze(0) - x.unsqueeze(1) + (self.width - 1)
        return self.grid()[:, row, col]

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """{"grid_bias": [H, 2*height-1, 2*width-1]}: the grid rows alone, as the C++ layer's grid_bias."""
        cells = self.height * self.width
        if operator.index(q_len) != cells or operator.index(k_len) != cells:
            fail("ContinuousPositionBias2d", f"q_len and k_len must both be height*width = {cells}, got {q_len} "
                                             f"and {k_len}")
        return {"grid_bias": self.grid(dtype)}

    def extra_repr(self):
        return f"num_heads={self.num_heads}, height={self.height}, width={self.width}, hidden={self.hidden}, " \
               f"pretrained_height={self.pretrained_height}, pretrained_width={self.pretrained_width}"
