"""Logit-bias encodings as modules: b_h(i, j) added to q_i . k_j before the softmax.

    AlibiBias     ALiBi (Press et al., ICLR 2022): -m_h |i' - j| (causal: -inf after the query)
    T5Bias        T5 (Raffel et al. 2020): table[bucket(j - i'), h], table [num_buckets, H]
    AlibiBias2d   ALiBi on an image grid: -m_h dist((y, x), (y', x'))
    T5Bias2d      T5 buckets of the row and of the column offset, one table each
    KerpleBias    KERPLE (Chi et al. 2022): -r1_h log(1 + r2_h |i' - j|) or -r1_h |i' - j|^r2_h, learned r1, r2

The queries are the last q_len of the k_len keys (i' = i + k_len - q_len). Each module has
forward(q_len, k_len) -> the dense bias [H, q_len, k_len], and attention_kwargs(q_len, k_len) -> the
keyword arguments of posenc.attention for that term, so attention stays fused with no (Tq, Tk) tensor
(the 2D biases excepted: posenc.attention has no grid-bias keyword, so they travel as bias=).
Formulas: docs/relative.md; the C++ modules: include/posenc/nn/attention_biases.h.
"""

import math
import operator

import torch
from torch import nn

import posenc

from ._common import as_int, checked_std, choice, fail, integer, OffsetRowsBias

__all__ = ["AlibiBias", "AlibiBias2d", "KerpleBias", "T5Bias", "T5Bias2d"]


def _heads(name, num_heads):
    return integer(name, "num_heads", num_heads, minimum=1)


def _buckets(name, num_buckets, max_distance, bidirectional):
    """T5 bucket options checked as kernels/t5.cpp checks them, under the module's name."""
    nb = as_int(name, "num_buckets", num_buckets)
    max_distance = as_int(name, "max_distance", max_distance)
    if nb < 2:
        fail(name, f"num_buckets must be >= 2, got {nb}")
    if bidirectional and nb % 2:
        fail(name, f"num_buckets must be even when bidirectional (half per direction), got {nb}")
    if bidirectional and nb < 4:
        fail(name, f"num_buckets must be >= 4 when bidirectional, got {nb}")
    if max_distance <= nb // 2:
        fail(name, f"max_distance must be > num_buckets/2 = {nb // 2}, got {max_distance}")
    return nb, max_distance


def _grid(name, height, width):
    return integer(name, "height", height, minimum=1), integer(name, "width", width, minimum=1)


def _check_grid_lengths(name, height, width, q_len, k_len):
    cells = height * width
    if q_len != cells or k_len != cells:
        fail(name, f"q_len and k_len must both be height*width = {cells}, got {q_len} and {k_len}")


def _dtype(module, dtype):
    return module._table_dtype() if dtype is None else dtype


class AlibiBias(nn.Module):
    """ALiBi: bias[h, i, j] = -m_h |i' - j|, -inf where j > i' when causal.

    slopes None: the paper's geometric slopes (posenc.alibi_slopes), and the bias is formed from the exact
    slopes in float64 and rounded once. slopes, a tensor [num_heads], replaces them (e.g. MPT's
    alibi_bias_max variant: posenc.alibi_slopes has no maximum, so pass MPT's slopes here). Buffer "slopes"
    (persistent: it is the module's state).
    """

    point = "logit bias"  # where MultiheadAttention plugs it in
    registry_names = ("alibi",)  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(num_heads, causal=causal)

    def __init__(self, num_heads, *, causal=False, slopes=None):
        super().__init__()
        name = "AlibiBias"
        self.num_heads = _heads(name, num_heads)
        self.causal = bool(causal)
        self.custom_slopes = slopes is not None
        if slopes is None:
            slopes = posenc.alibi_slopes(self.num_heads)
        else:
            slopes = torch.as_tensor(slopes)
            if slopes.dim() != 1 or slopes.shape[0] != self.num_heads or not slopes.is_floating_point():
                fail(name, f"slopes must be a 1-D floating tensor of num_heads = {self.num_heads} values, got "
                           f"{tuple(slopes.shape)} {slopes.dtype}")
            if not bool(torch.isfinite(slopes).all()):
                fail(name, "slopes must be finite")
            slopes = slopes.detach().clone().to(torch.float64 if slopes.dtype == torch.float64 else torch.float32)
        self.register_buffer("slopes", slopes)

    def _table_dtype(self):
        return self.slopes.dtype

    def _exact_slopes(self, dtype):
        if self.custom_slopes:
            return self.slopes.to(dtype)
        return posenc.alibi_slopes(self.num_heads, dtype=dtype)  # rounded once from the exact values

    def forward(self, q_len, k_len):
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        if not self.custom_slopes:
            return posenc.alibi_bias(self.num_heads, q_len, k_len, causal=self.causal, dtype=self.slopes.dtype)
        # -m |i' - j| in float64, rounded once (as the op does for its own slopes).
        i = torch.arange(q_len, dtype=torch.float64).unsqueeze(1) + (k_len - q_len)
        j = torch.arange(k_len, dtype=torch.float64).unsqueeze(0)
        bias = -self.slopes.to(torch.float64).view(-1, 1, 1) * (i - j).abs()
        if self.causal:
            bias = bias.masked_fill(j > i, -math.inf)
        return bias.to(self.slopes.dtype)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """{"alibi_slopes": [H] (, "causal": True)}: the op forms -m_h |d| per offset inside attention.

        dtype: of the slopes handed over (posenc.attention wants q's dtype or float32); None: the buffer's."""
        kwargs = {"alibi_slopes": self._exact_slopes(_dtype(self, dtype))}
        if self.causal:
            kwargs["causal"] = True
        return kwargs

    def extra_repr(self):
        return f"num_heads={self.num_heads}, causal={self.causal}, custom_slopes={self.custom_slopes}"


class T5Bias(nn.Module):
    """T5 relative bias: bias[h, i, j] = table[bucket(j - i'), h], parameter table [num_buckets, num_heads]
    ~ N(0, init_std^2): Hugging Face's relative_attention_bias.weight layout. bidirectional=False gives
    the decoder's causal buckets. T5's attention has no 1/sqrt(Dh): use posenc.attention(..., scale=1.0)
    to match it."""

    point = "logit bias"  # where MultiheadAttention plugs it in
    registry_names = ("t5",)  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(num_heads, num_buckets=defaults["t5_num_buckets"], max_distance=defaults["t5_max_distance"],
                   bidirectional=not causal, init_std=defaults["init_std"])

    def __init__(self, num_heads, *, num_buckets=32, max_distance=128, bidirectional=True, init_std=0.02):
        super().__init__()
        name = "T5Bias"
        self.num_heads = _heads(name, num_heads)
        self.bidirectional = bool(bidirectional)
        self.num_buckets, self.max_distance = _buckets(name, num_buckets, max_distance, self.bidirectional)
        self.init_std = checked_std(name, init_std)
        self.table = nn.Parameter(torch.empty(self.num_buckets, self.num_heads))
        self.reset_parameters()

    @classmethod
    def from_pretrained_weight(cls, weight, *, bidirectional=True, max_distance=128):
        """From HF's ``relative_attention_bias.weight`` (num_buckets, num_heads), used as it is (both index
        the bucket of key - query); bidirectional False for a T5 decoder's self-attention."""
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
            got = f"{weight.dim()}-D {weight.dtype}" if isinstance(weight, torch.Tensor) else type(weight).__name__
            fail("T5Bias", f"weight must be a 2-D floating tensor (num_buckets, num_heads), got {got}")
        module = cls(weight.shape[1], num_buckets=weight.shape[0], max_distance=max_distance,
                     bidirectional=bidirectional, init_std=0.0)
        module.table = nn.Parameter(weight.detach().clone())
        return module

    def reset_parameters(self):
        with torch.no_grad():
            self.table.normal_(0.0, self.init_std)

    def _table_dtype(self):
        return self.table.dtype

    def forward(self, q_len, k_len):
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        return posenc.t5_bias(self.table, q_len, k_len, bidirectional=self.bidirectional,
                              max_distance=self.max_distance)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """The table and the bucket options; differentiable wrt the table."""
        return {"t5_table": self.table.to(_dtype(self, dtype)), "t5_num_buckets": self.num_buckets,
                "t5_max_distance": self.max_distance, "t5_bidirectional": self.bidirectional}

    def extra_repr(self):
        return f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, " \
               f"bidirectional={self.bidirectional}"


class AlibiBias2d(nn.Module):
    """ALiBi on a height x width grid flattened as y*width + x: -m_h dist((y, x), (y', x')), distance
    "euclidean" or "manhattan"; q_len = k_len = height*width. Buffer "slopes" as AlibiBias."""

    point = "logit bias"  # where MultiheadAttention plugs it in

    def __init__(self, num_heads, height, width, *, distance="euclidean"):
        super().__init__()
        name = "AlibiBias2d"
        self.num_heads = _heads(name, num_heads)
        self.height, self.width = _grid(name, height, width)
        self.distance = choice(name, "distance", distance, ("euclidean", "manhattan"))
        self.register_buffer("slopes", posenc.alibi_slopes(self.num_heads))

    def _table_dtype(self):
        return self.slopes.dtype

    def forward(self, q_len, k_len):
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        _check_grid_lengths("AlibiBias2d", self.height, self.width, q_len, k_len)
        return posenc.alibi_bias_2d(self.num_heads, self.height, self.width, distance=self.distance,
                                    dtype=self.slopes.dtype)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """{"bias": [H, HW, HW]}: posenc.attention has no grid-bias keyword (the C++ layer's grid_bias)."""
        return {"bias": self.forward(q_len, k_len).to(_dtype(self, dtype))}

    def extra_repr(self):
        return f"num_heads={self.num_heads}, height={self.height}, width={self.width}, distance={self.distance}"


class T5Bias2d(nn.Module):
    """T5 buckets on a grid: table_h[bucket(y' - y), h] + table_w[bucket(x' - x), h], parameters table_h and
    table_w [num_buckets, num_heads]; q_len = k_len = height*width."""

    point = "logit bias"  # where MultiheadAttention plugs it in

    def __init__(self, num_heads, height, width, *, num_buckets=32, max_distance=128, bidirectional=True,
                 init_std=0.02):
        super().__init__()
        name = "T5Bias2d"
        self.num_heads = _heads(name, num_heads)
        self.height, self.width = _grid(name, height, width)
        self.bidirectional = bool(bidirectional)
        self.num_buckets, self.max_distance = _buckets(name, num_buckets, max_distance, self.bidirectional)
        self.init_std = checked_std(name, init_std)
        self.table_h = nn.Parameter(torch.empty(self.num_buckets, self.num_heads))
        self.table_w = nn.Parameter(torch.empty(self.num_buckets, self.num_heads))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            self.table_h.normal_(0.0, self.init_std)
            self.table_w.normal_(0.0, self.init_std)

    def _table_dtype(self):
        return self.table_h.dtype

    def forward(self, q_len, k_len):
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        _check_grid_lengths("T5Bias2d", self.height, self.width, q_len, k_len)
        return posenc.t5_bias_2d(self.table_h, self.table_w, self.height, self.width,
                                 bidirectional=self.bidirectional, max_distance=self.max_distance)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """{"bias": [H, HW, HW]} (dense, see AlibiBias2d.attention_kwargs); differentiable wrt the tables."""
        return {"bias": self.forward(q_len, k_len).to(_dtype(self, dtype))}

    def extra_repr(self):
        return f"num_heads={self.num_heads}, height={self.height}, width={self.width}, " \
               f"num_buckets={self.num_buckets}, max_distance={self.max_distance}, bidirectional={self.bidirectional}"


class KerpleBias(OffsetRowsBias, nn.Module):
    """KERPLE (Chi et al. 2022): bias[h, i, j] = -r1_h log(1 + r2_h |i' - j|) (kind "log") or -r1_h |i' - j|^r2_h
    (kind "power", r2 <= 2), -inf where j > i' when causal. Parameters r1, r2 [num_heads]: the authors' draws
    U(0, 2) and U(0, 1) unless r1 / r2 give every head's initial value, projected before each use onto
    [eps, inf) (power: r2 onto [eps, 2]) in place, as the authors' code does (C++: include/posenc/nn/kerple_bias.h).
    """

    point = "logit bias"  # where MultiheadAttention plugs it in
    registry_names = ("kerple", "kerple-power")  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(num_heads, kind="log" if name == "kerple" else "power", causal=causal)

    def __init__(self, num_heads, *, kind="log", causal=False, r1=None, r2=None, eps=0.01):
        super().__init__()
        name = "KerpleBias"
        self.num_heads = _heads(name, num_heads)
        self.kind = choice(name, "kind", kind, ("log", "power"))
        self.causal = bool(causal)
        self.eps = float(eps)
        if not 0 < self.eps <= 1:
            fail(name, f"eps must be in (0, 1], got {eps:g}")
        if r1 is not None and not (math.isfinite(r1) and r1 > 0):
            fail(name, f"r1 must be > 0, got {r1:g}")
        if r2 is not None:
            if self.kind == "power" and not 0 < r2 <= 2:
                fail(name, f"r2 must be in (0, 2], got {r2:g}")
            if not (math.isfinite(r2) and r2 > 0):
                fail(name, f"r2 must be > 0, got {r2:g}")
        self.r1_init, self.r2_init = r1, r2
        self.r1 = nn.Parameter(torch.empty(self.num_heads))
        self.r2 = nn.Parameter(torch.empty(self.num_heads))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            self.r1.fill_(self.r1_init) if self.r1_init is not None else self.r1.uniform_(0.0, 2.0)
            self.r2.fill_(self.r2_init) if self.r2_init is not None else self.r2.uniform_(0.0, 1.0)
        self.project()

    def project(self):
        """Clamps r1, r2 into range in place; leaves them (and their version) alone when they are in range."""
        r2_max = 2.0 if self.kind == "power" else math.inf
        with torch.no_grad():
            if bool((self.r1 < self.eps).any()):
                self.r1.clamp_(min=self.eps)
            if bool((self.r2 < self.eps).any()) or bool((self.r2 > r2_max).any()):
                self.r2.clamp_(min=self.eps, max=r2_max)

    def _table_dtype(self):
        return self.r1.dtype

    def offset_rows(self, q_len, k_len, dtype=None):
        """[H, q_len + k_len - 1]: the bias of offset d = j - i' at column d + k_len - 1."""
        self.project()
        dtype = _dtype(self, dtype)
        return posenc.kerple_offset_bias(self.r1.to(dtype), self.r2.to(dtype), q_len, k_len, kind=self.kind)

    def extra_repr(self):
        return f"num_heads={self.num_heads}, kind={self.kind}, causal={self.causal}"
