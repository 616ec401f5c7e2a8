"""Tensors in .npy and .safetensors files, read by strict readers and
written atomically (the C++ library posenc::io; nothing is ever evaluated or
unpickled).

Element types map to torch dtypes exactly: bool, uint8, int8, int16, int32,
int64, float16, bfloat16, float32 and float64 as themselves; uint16 and uint32
are widened to int32 and int64; uint64 becomes int64 when every value fits
(else ValueError). A malformed file raises ValueError naming the file and what
is wrong; a file that cannot be opened raises RuntimeError.
"""

import os
from collections.abc import Mapping

import torch

from ._library import load_analysis as _load_analysis

_ops = _load_analysis()

__all__ = ["load_tensor", "load_tensors", "save_tensor"]


def load_tensor(path, name=None):
    """One tensor of a .npy or .safetensors file.

    name: the tensor's name in a .safetensors file (a .npy file holds one
    unnamed array and refuses a name). None: the only tensor of the file, else
    the one whose name marks it as a position table in real checkpoints
    ("bert.embeddings.position_embeddings.weight", "transformer.wpe.weight",
    "...embed_positions.weight", ...). A missing name raises ValueError listing
    the names present.
    """
    _, tensor = _ops.load_tensor(os.fspath(path), name)
    return tensor


def load_tensors(path):
    """Every tensor of a .npy or .safetensors file, as a dict name -> tensor in file order ("" for .npy)."""
    names, tensors = _ops.load_tensors(os.fspath(path))
    return dict(zip(names, tensors))


def save_tensor(path, tensors, metadata=None):
    """Writes tensors to path, atomically (the file is replaced only once complete).

    tensors: a dict name -> tensor (.safetensors; unique, non-empty names) or
    one tensor (.npy). Any
    strides and device; the dtypes of load_tensor's list. metadata: a dict of
    strings stored as the .safetensors "__metadata__".
    """
    if isinstance(tensors, torch.Tensor):
        names, values = [""], [tensors]
    elif isinstance(tensors, Mapping):
        names, values = list(tensors.keys()), list(tensors.values())
        for name, value in zip(names, values):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"[tensor file] tensors[{name!r}] must be a torch.Tensor, got "
                                f"{type(value).__name__}")
    else:
        raise TypeError(f"[tensor file] tensors must be a torch.Tensor or a dict of them, got "
                        f"{type(tensors).__name__}")
    _ops.save_tensors(os.fspath(path), names, values, metadata)
