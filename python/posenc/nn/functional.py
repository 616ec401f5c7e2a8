"""posenc.nn.functional: a language model's vocabulary head fused into its cross-entropy.

``linear_cross_entropy(input, weight, target, bias)`` has the value and the
gradients of ``F.cross_entropy(F.linear(input, weight, bias), target)`` but
never holds the (N, V) logits: rows go through the head in chunks of
max(256, 2^20 / V) rows (4 MB of float32 logits, but never so few rows that
the weight gradient's product is bound by memory), and each chunk's gradient (softmax - one-hot) is turned into
the gradients of input, weight and bias while it is still in cache. The
backward only scales those by the incoming gradient. With a vocabulary of
tens of thousands the logits are the largest tensors of a training step;
this keeps their memory at one chunk.

Conventions: input (..., D), weight (V, D), bias (V) or None, target int64
of input's leading shape; float32 or float64 on the CPU. Rows whose target
is ignore_index add nothing; "mean" divides by the rows that count (NaN when
none does, as torch's cross_entropy), "sum" adds them. Per-row losses
("none") and label smoothing need the logits: use F.cross_entropy there.
A second derivative is refused with an error, not answered with 0. Formulas:
docs/python_modules.md.
"""

import torch

import posenc  # noqa: F401  (loads the op library)

__all__ = ["linear_cross_entropy"]


def linear_cross_entropy(input, weight, target, bias=None, *, ignore_index=-100, reduction="mean", chunk_rows=0):
    """Mean (or sum) cross-entropy of ``input @ weight.T + bias`` against ``target``, without the logits.

    chunk_rows: rows per chunk; 0 picks max(256, 2^20 / V).
    A bad argument raises ValueError (TypeError for a dtype) naming it, e.g.
    "[linear_cross_entropy] targets must be in [0, 8000) or ignore_index (-100), got 8000".
    """
    loss, _ = torch.ops.posenc.linear_cross_entropy(input, weight, bias, target, ignore_index, reduction, chunk_rows)
    return loss
