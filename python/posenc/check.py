"""Is a port's positional code right? ``posenc.check`` compares a tensor dumped
from another implementation with posenc's exact values and diagnoses the
usual porting mistakes; it returns the report ``posenc check --json`` prints
(docs/check.md), as a dict.
"""

import json
import os

import torch

from ._library import load_analysis as _load_analysis

_ops = _load_analysis()

__all__ = ["check"]


def _positions(positions):
    if positions is None:
        return None
    if isinstance(positions, torch.Tensor):
        return [int(p) for p in positions.reshape(-1).tolist()]
    return [int(p) for p in positions]


def check(tensor_or_path, *, kind=None, hf_config=None, what=None, positions=None, tensor=None, input=None,
          input_file=None, **options):
    """Compare a dumped tensor with posenc's values; returns the report dict.

    tensor_or_path: a float16 / bfloat16 / float32 / float64 tensor, or the
    path of a .npy / .safetensors file (tensor: the name inside it).
    kind: "rope", "alibi", "t5", or a table kind ("sinusoidal", ...,
    "sinusoidal-2d", "sinusoidal-3d"); hf_config: a Hugging Face config.json
    giving the scheme instead. what: "cos-sin" ([N, R], cos then sin),
    "rotated" (q or k after RoPE; input = the unrotated tensor, or its name in
    the file / in input_file), "bias" ((H, Tq, Tk); t5 needs input = its bucket
    table [num_buckets, H]) or "table"; None: from kind. positions: of the rows
    (or of the T axis), default start, start+1, ...

    options: start, base, rotary_dim, layout, precision, scale, length, height,
    width, frames, normalize, normalize_scale, query_offset, causal,
    num_buckets, max_distance, bidirectional, seq_len, and the Hugging Face
    rope_scaling keys (rope_type, factor, original_max_position_embeddings, ...).

    The dict: matches (bool), max_abs_error, tolerance, bands (per position
    range), hypotheses (each usual mistake recomputed, with explains), and
    diagnosis (sentences with the evidence).
    """
    if kind is None and hf_config is None:
        raise ValueError("[check] give kind or hf_config")
    if hf_config is not None:
        options = dict(options, hf_config=os.fspath(hf_config))
    data = tensor_or_path if isinstance(tensor_or_path, torch.Tensor) else None
    path = None if data is not None else os.fspath(tensor_or_path)
    input_tensor = input if isinstance(input, torch.Tensor) else None
    input_name = input if isinstance(input, str) else None
    input_path = None if input_file is None else os.fspath(input_file)
    text = _ops.check(data, path, tensor, input_tensor, input_path, input_name, kind or "", what,
                      _positions(positions), json.dumps(options))
    return json.loads(text)
