"""Shared checks of the posenc.nn modules: one message style, raised once at construction."""

import math
import operator

import torch


def fail(name, message):
    """ValueError "[Name] message": the library's format (the op tag in brackets)."""
    raise ValueError(f"[{name}] {message}")


def as_int(name, argument, value):
    """value as an int, else TypeError "[Name] argument must be an int, got float"."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"[{name}] {argument} must be an int, got {type(value).__name__}") from None


def integer(name, argument, value, *, minimum):
    """value as an int >= minimum, else ValueError "[Name] argument must be >= minimum, got value"."""
    number = as_int(name, argument, value)
    if number < minimum:
        fail(name, f"{argument} must be >= {minimum}, got {number}")
    return number


def checked_std(name, value):
    value = float(value)
    if not math.isfinite(value) or value < 0:
        fail(name, f"init_std must be finite and >= 0, got {value:g}")
    return value


def choice(name, argument, value, allowed):
    if value not in allowed:
        fail(name, f"{argument} must be " + " or ".join(f"'{a}'" for a in allowed) + f", got '{value}'")
    return value


def compute_dtype(*tensors):
    """float64 when any tensor is float64, else float32 (posenc's compute rule)."""
    return torch.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else torch.float32


class OffsetRowsBias:
    """The shared half of the logit biases of the offset alone (KerpleBias, DynamicPositionBias): from the
    subclass's offset_rows(q_len, k_len, dtype) -> [H, q_len + k_len - 1] (column d + k_len - 1 for
    d = j - i'), its dense form and what posenc.attention takes. Needs num_heads and causal."""

    def _dense(self, q_len, k_len, dtype=None):
        """The rows read at j - i' + k_len - 1 = j - i + q_len - 1: [H, q_len, k_len], and those columns."""
        column = torch.arange(k_len).unsqueeze(0) - torch.arange(q_len).unsqueeze(1) + (q_len - 1)
        if q_len == 0 or k_len == 0:
            dtype = next(self.parameters()).dtype if dtype is None else dtype
            return torch.zeros(self.num_heads, q_len, k_len, dtype=dtype), column
        return self.offset_rows(q_len, k_len, dtype)[:, column], column

    def forward(self, q_len, k_len):
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        if self.causal and q_len > k_len:
            fail(type(self).__name__, f"causal attention needs every query to see a key: q_len must be <= k_len, "
                                      f"got {q_len} and {k_len}")
        bias, column = self._dense(q_len, k_len)
        if self.causal:
            bias = bias.masked_fill(column > k_len - 1, -math.inf)
        return bias

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """{"offset_bias": [H, q_len + k_len - 1] (, "causal": True)}: the rows alone, O(H T), as the C++
        MultiheadAttention hands them to the fused kernel; differentiable wrt the module's parameters."""
        kwargs = {"offset_bias": self.offset_rows(operator.index(q_len), operator.index(k_len), dtype)}
        if self.causal:
            kwargs["causal"] = True
        return kwargs
