"""Relative-vector encodings as modules: q_i . a(j - i') added to the logits and, optionally,
sum_j p_ij a^V(j - i') added to the attention output (i' = i + Tk - Tq).

    ShawRelative           Shaw et al. 2018: learned vectors per clipped offset (keys and values)
    SinusoidalRelative     NEZHA (Wei et al. 2019): fixed sinusoids of the offset; learnable=True:
                           trainable frequencies (Wang et al., ICLR 2021)
    TransformerXLRelative  Dai et al. 2019: (q_i + u) . k_j + (q_i + v) . (W_R R_{i'-j})_h
    Relative2d             BoTNet (Srinivas et al. 2021): row and column tables on an image grid

A table has 2K+1 rows, row r holding the offset d = key - query = r - K (offsets clipped to [-K, K]).
forward(q, k) = logits(q, k): the extra logit terms (B, H, Tq, Tk), not q.k itself and not scaled;
values(probs) -> (B, H, Tq, Dh); attention_kwargs(q_len, k_len) -> posenc.attention's keywords for the
family (tables addressed by index inside attention: no (Tq, Tk, Dh) tensor). Math in float32 (float64
when the input or the module is float64), rounded once. C++: include/posenc/nn/relative_encodings.h.
"""

import math

import torch
from torch import nn

import posenc

from ._common import as_int, checked_std, compute_dtype, fail, integer

__all__ = ["Relative2d", "ShawRelative", "SinusoidalRelative", "TransformerXLRelative"]


def _heads_dim(name, num_heads, head_dim, shared_ok=True):
    num_heads = as_int(name, "num_heads", num_heads)
    if shared_ok and num_heads < 0:
        fail(name, f"num_heads must be >= 0 (0: one table shared by the heads), got {num_heads}")
    if not shared_ok and num_heads < 1:
        fail(name, f"num_heads must be >= 1, got {num_heads}")
    return num_heads, integer(name, "head_dim", head_dim, minimum=1)


def _check_base(name, base):
    base = float(base)
    if not (math.isfinite(base) and base > 0):
        fail(name, f"base must be finite and > 0, got {base:g}")
    return base


def _check_4d(name, argument, t, layout):
    if not isinstance(t, torch.Tensor):
        fail(name, f"{argument} must be a tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"[{name}] {argument} must be float32, float64, bfloat16 or float16, got {t.dtype}")
    if t.dim() != 4:
        fail(name, f"{argument} must be 4-D {layout}, got {t.dim()}-D")


class _Relative(nn.Module):

    point = "relative vectors"  # where MultiheadAttention plugs it in
    name = ""

    def _check_qk(self, q, k):
        _check_4d(self.name, "q", q, "(B, H, Tq, Dh)")
        _check_4d(self.name, "k", k, "(B, H, Tk, Dh)")
        if q.shape[3] != self.head_dim:
            fail(self.name, f"q must have head_dim = {self.head_dim} in its last dimension, got {q.shape[3]}")
        if self.num_heads and q.shape[1] != self.num_heads:
            fail(self.name, f"q must have num_heads = {self.num_heads} heads, got {q.shape[1]}")

    def _check_probs(self, probs):
        _check_4d(self.name, "probs", probs, "(B, H, Tq, Tk)")

    def forward(self, q, k):
        return self.logits(q, k)


class ShawRelative(_Relative):
    """Shaw et al.: logits[b,h,i,j] = q_i . key_table[r], values[b,h,i] = sum_j p_ij value_table[r],
    r = clip(j - i', -K, K) + K. Parameters key_table and value_table (values=True) [2K+1, Dh] shared by
    the heads (num_heads 0) or [num_heads, 2K+1, Dh], ~ N(0, init_std^2).

    key_logits=True also adds k_j . key_table[r] (Hugging Face BERT's relative_key_query). posenc.attention
    has no such term (its relative term is (q_i + xl_v) . rel_k[r], a function of the query only), so it
    travels as a dense bias (B, H, Tq, Tk), already multiplied by the attention scale:
    attention_kwargs(..., k=, scale=) needs the keys then.
    """
    registry_names = ("shaw",)  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(defaults["max_distance"], head_dim, num_heads=0, values=True, init_std=defaults["init_std"])

    name = "ShawRelative"

    def __init__(self, max_distance, head_dim, *, num_heads=0, values=True, init_std=0.02, key_logits=False):
        super().__init__()
        self.num_heads, self.head_dim = _heads_dim(self.name, num_heads, head_dim)
        self.max_distance = integer(self.name, "max_distance", max_distance, minimum=0)
        self.values_enabled = bool(values)
        self.key_logits = bool(key_logits)
        self.init_std = checked_std(self.name, init_std)
        rows = 2 * self.max_distance + 1
        shape = (rows, self.head_dim) if self.num_heads == 0 else (self.num_heads, rows, self.head_dim)
        self.key_table = nn.Parameter(torch.empty(shape))
        self.value_table = nn.Parameter(torch.empty(shape)) if self.values_enabled else None
        self.reset_parameters()

    @classmethod
    def from_bert_distance_embedding(cls, weight, *, max_position_embeddings, position_embedding_type="relative_key"):
        """From HF BERT's ``attention.self.distance_embedding.weight`` (2M-1, Dh), M = max_position_embeddings.

        HF adds q_i . E[i - j + M - 1] (relative_key; relative_key_query adds k_j . E[i - j + M - 1] too):
        its rows index query - key. posenc's rows index key - query: row r holds offset r - K. With
        K = M - 1, HF row i - j + M - 1 = K - d (d = j - i) is posenc row d + K of the flipped table, so
        key_table = E.flip(0), max_distance = M - 1, shared by the heads, no value table. Both scale the
        relative terms by 1/sqrt(Dh) with q.k (posenc.attention's default scale). Offsets beyond M - 1
        (HF's index error) are clipped here.
        """
        name = cls.name
        position_type = position_embedding_type
        if position_type not in ("relative_key", "relative_key_query"):
            fail(name, f"position_embedding_type must be 'relative_key' or 'relative_key_query', got '{position_type}'")
        m = integer(name, "max_position_embeddings", max_position_embeddings, minimum=1)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
            got = f"{weight.dim()}-D {weight.dtype}" if isinstance(weight, torch.Tensor) else type(weight).__name__
            fail(name, f"weight must be a 2-D floating tensor (2*max_position_embeddings-1, head_dim), got {got}")
        if weight.shape[0] != 2 * m - 1:
            fail(name, f"weight must have 2*max_position_embeddings-1 = {2 * m - 1} rows, got {weight.shape[0]}")
        module = cls(m - 1, weight.shape[1], values=False, init_std=0.0,
                     key_logits=position_type == "relative_key_query")
        module.key_table = nn.Parameter(weight.detach().flip(0).clone())
        return module

    def reset_parameters(self):
        with torch.no_grad():
            self.key_table.normal_(0.0, self.init_std)
            if self.value_table is not None:
                self.value_table.normal_(0.0, self.init_std)

    def _key_term(self, k, q_len, dtype):
        """k_j . key_table[clip(j - i', -K, K) + K] as (B, H, Tq, Tk): relative_logits with the keys as
        queries on the flipped table (row K - e holds offset -e) and query_offset Tq - Tk."""
        k_len = k.shape[2]
        flipped = self.key_table.to(dtype).flip(-2)
        out = posenc.relative_logits(k.to(dtype), flipped, self.max_distance, k_len=q_len, query_offset=q_len - k_len)
        return out.transpose(-1, -2)

    def logits(self, q, k):
        self._check_qk(q, k)
        dtype = compute_dtype(q, self.key_table)
        q_len, k_len = q.shape[2], k.shape[2]
        out = posenc.relative_logits(q.to(dtype), self.key_table.to(dtype), self.max_distance, k_len=k_len,
                                     query_offset=k_len - q_len)
        if self.key_logits:
            out = out + self._key_term(k, q_len, dtype)
        return out.to(q.dtype)

    def values(self, probs):
        if self.value_table is None:
            raise RuntimeError(f"[{self.name}] has no value vectors")
        self._check_probs(probs)
        dtype = compute_dtype(probs, self.value_table)
        q_len, k_len = probs.shape[2], probs.shape[3]
        return posenc.relative_values(probs.to(dtype), self.value_table.to(dtype), self.max_distance,
                                      query_offset=k_len - q_len).to(probs.dtype)

    def attention_kwargs(self, q_len, k_len, *, dtype=None, k=None, scale=None):
        """{"rel_k", "rel_v" (values=True), "max_distance"} (+ "bias" with key_logits, from k and scale,
        default 1/sqrt(Dh)). dtype: of the tables handed over; None: the parameters'."""
        dtype = self.key_table.dtype if dtype is None else dtype
        kwargs = {"rel_k": self.key_table.to(dtype), "max_distance": self.max_distance}
        if self.value_table is not None:
            kwargs["rel_v"] = self.value_table.to(dtype)
        if self.key_logits:
            if k is None:
                fail(self.name, "key_logits needs k (B, H, Tk, Dh) in attention_kwargs: its term k_j . a(j - i') "
                                "depends on the keys")
            scale = 1.0 / math.sqrt(self.head_dim) if scale is None else float(scale)
            kwargs["bias"] = self._key_term(k, q_len, compute_dtype(k, self.key_table)).to(dtype) * scale
        return kwargs

    def extra_repr(self):
        return f"max_distance={self.max_distance}, head_dim={self.head_dim}, num_heads={self.num_heads}, " \
               f"values={self.values_enabled}, key_logits={self.key_logits}"


class SinusoidalRelative(_Relative):
    """NEZHA: one table shared by the heads, row r the sinusoid of offset r - K with frequencies omega
    (interleaved sin, cos; posenc.sinusoidal_relative_table), used as ShawRelative uses its tables, for the
    keys and (values=True) the values. omega [Dh/2] float32 = base^(-2i/Dh): a parameter when learnable,
    else a buffer."""
    registry_names = ("shaw-sinusoidal", "shaw-learnable-sinusoidal")  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(defaults["max_distance"], head_dim, base=defaults["base"], values=True,
                   learnable=name == "shaw-learnable-sinusoidal")

    name = "SinusoidalRelative"

    def __init__(self, max_distance, head_dim, *, base=10000.0, values=True, learnable=False):
        super().__init__()
        self.num_heads = 0
        self.max_distance = integer(self.name, "max_distance", max_distance, minimum=0)
        self.head_dim = integer(self.name, "head_dim", head_dim, minimum=1)
        if self.head_dim % 2:
            fail(self.name, f"head_dim must be even, got {self.head_dim}")
        self.base = _check_base(self.name, base)
        self.values_enabled, self.learnable = bool(values), bool(learnable)
        omega = posenc.sinusoidal_frequencies(self.head_dim, base=self.base).to(torch.float32)
        if self.learnable:
            self.omega = nn.Parameter(omega)
        else:
            self.register_buffer("omega", omega)

    def reset_parameters(self):
        with torch.no_grad():
            self.omega.copy_(posenc.sinusoidal_frequencies(self.head_dim, base=self.base))

    def table(self, dtype=torch.float32):
        """[2K+1, Dh] in dtype; differentiable wrt omega."""
        return posenc.sinusoidal_relative_table(self.max_distance, self.head_dim, base=self.base,
                                                omega=self.omega.to(dtype), dtype=dtype)

    def logits(self, q, k):
        self._check_qk(q, k)
        dtype = compute_dtype(q, self.omega)
        q_len, k_len = q.shape[2], k.shape[2]
        return posenc.relative_logits(q.to(dtype), self.table(dtype), self.max_distance, k_len=k_len,
                                      query_offset=k_len - q_len).to(q.dtype)

    def values(self, probs):
        if not self.values_enabled:
            raise RuntimeError(f"[{self.name}] has no value vectors")
        self._check_probs(probs)
        dtype = compute_dtype(probs, self.omega)
        q_len, k_len = probs.shape[2], probs.shape[3]
        return posenc.relative_values(probs.to(dtype), self.table(dtype), self.max_distance,
                                      query_offset=k_len - q_len).to(probs.dtype)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        table = self.table(self.omega.dtype if dtype is None else dtype)
        kwargs = {"rel_k": table, "max_distance": self.max_distance}
        if self.values_enabled:
            kwargs["rel_v"] = table
        return kwargs

    def extra_repr(self):
        return f"max_distance={self.max_distance}, head_dim={self.head_dim}, base={self.base:g}, " \
               f"learnable={self.learnable}, values={self.values_enabled}"


class TransformerXLRelative(_Relative):
    """Transformer-XL: logit terms u . k_j + (q_i + v) . (W_R R_{i'-j})_h besides q_i . k_j, R_d the
    sinusoid of d with model_dim channels (sines then cosines, the XL code's pos_emb). Parameters u, v
    [H, Dh] and w_r [H*Dh, model_dim] ~ N(0, init_std^2). Every offset has its own vector (K = max(Tq, Tk)
    - 1, no clipping); the XL code's dropping of keys after the query is the caller's causal mask."""
    registry_names = ("xl",)  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(num_heads, head_dim, base=defaults["base"], init_std=defaults["init_std"])

    name = "TransformerXLRelative"

    def __init__(self, num_heads, head_dim, *, base=10000.0, init_std=0.02, model_dim=None):
        super().__init__()
        self.num_heads, self.head_dim = _heads_dim(self.name, num_heads, head_dim, shared_ok=False)
        self.model_dim = self.num_heads * self.head_dim if model_dim is None else \
            integer(self.name, "model_dim", model_dim, minimum=1)
        if self.model_dim % 2:
            fail(self.name, f"model_dim must be even (sines then cosines), got {self.model_dim}")
        self.base = _check_base(self.name, base)
        self.init_std = checked_std(self.name, init_std)
        self.u = nn.Parameter(torch.empty(self.num_heads, self.head_dim))
        self.v = nn.Parameter(torch.empty(self.num_heads, self.head_dim))
        self.w_r = nn.Parameter(torch.empty(self.num_heads * self.head_dim, self.model_dim))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            for p in (self.u, self.v, self.w_r):
                p.normal_(0.0, self.init_std)

    def table(self, max_distance, dtype=torch.float32):
        """[H, 2K+1, Dh]: row r is (W_R R_{K-r}) split per head (offset j - i' = r - K); differentiable."""
        offsets = torch.arange(-max_distance, max_distance + 1, dtype=torch.int64)
        r = posenc.sinusoidal(offsets, self.model_dim, base=self.base, layout="half", dtype=dtype).flip(0)
        rows = 2 * max_distance + 1
        return torch.matmul(r, self.w_r.to(dtype).t()).view(rows, self.num_heads, self.head_dim).permute(1, 0, 2)

    @staticmethod
    def _reach(q_len, k_len):
        return max(max(q_len, k_len) - 1, 0)

    def logits(self, q, k):
        self._check_qk(q, k)
        dtype = compute_dtype(q, self.w_r)
        q_len, k_len = q.shape[2], k.shape[2]
        reach = self._reach(q_len, k_len)
        qc, kc = q.to(dtype), k.to(dtype)
        content = torch.matmul(kc, self.u.to(dtype).unsqueeze(-1)).transpose(2, 3)  # u . k_j: (B, H, 1, Tk)
        shifted = qc + self.v.to(dtype).view(1, self.num_heads, 1, self.head_dim)
        position = posenc.relative_logits(shifted, self.table(reach, dtype).contiguous(), reach, k_len=k_len,
                                          query_offset=k_len - q_len)
        return (position + content).to(q.dtype)

    def values(self, probs):
        raise RuntimeError(f"[{self.name}] has no value vectors")

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        dtype = self.w_r.dtype if dtype is None else dtype
        reach = self._reach(q_len, k_len)
        return {"rel_k": self.table(reach, dtype).contiguous(), "max_distance": reach, "xl_u": self.u.to(dtype),
                "xl_v": self.v.to(dtype)}

    def extra_repr(self):
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, model_dim={self.model_dim}, base={self.base:g}"


class Relative2d(_Relative):
    """BoTNet on a height x width grid flattened as y*width + x (Tq = Tk = height*width):
    logits[b,h,(y,x),(y',x')] = q_(y,x) . (table_h[y'-y+height-1] + table_w[x'-x+width-1]); parameters
    table_h [2*height-1, Dh] and table_w [2*width-1, Dh] (or [num_heads, ., Dh]) ~ N(0, init_std^2)."""

    name = "Relative2d"

    def __init__(self, height, width, head_dim, *, num_heads=0, init_std=0.02):
        super().__init__()
        self.height = integer(self.name, "height", height, minimum=1)
        self.width = integer(self.name, "width", width, minimum=1)
        self.num_heads, self.head_dim = _heads_dim(self.name, num_heads, head_dim)
        self.init_std = checked_std(self.name, init_std)
        lead = () if self.num_heads == 0 else (self.num_heads,)
        self.table_h = nn.Parameter(torch.empty(lead + (2 * self.height - 1, self.head_dim)))
        self.table_w = nn.Parameter(torch.empty(lead + (2 * self.width - 1, self.head_dim)))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            self.table_h.normal_(0.0, self.init_std)
            self.table_w.normal_(0.0, self.init_std)

    def _check_cells(self, q_len, k_len):
        cells = self.height * self.width
        if q_len != cells or k_len != cells:
            fail(self.name, f"q and k must both have height*width = {cells} positions, got {q_len} and {k_len}")

    def logits(self, q, k):
        self._check_qk(q, k)
        self._check_cells(q.shape[2], k.shape[2])
        dtype = compute_dtype(q, self.table_h)
        return posenc.relative_logits_2d(q.to(dtype), self.table_h.to(dtype), self.table_w.to(dtype), self.height,
                                         self.width).to(q.dtype)

    def values(self, probs):
        raise RuntimeError(f"[{self.name}] has no value vectors")

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        self._check_cells(q_len, k_len)
        dtype = self.table_h.dtype if dtype is None else dtype
        return {"rel_2d": (self.table_h.to(dtype), self.table_w.to(dtype), self.height, self.width)}

    def extra_repr(self):
        return f"height={self.height}, width={self.width}, head_dim={self.head_dim}, num_heads={self.num_heads}"
