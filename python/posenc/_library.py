"""Finds and loads the posenc op library (libposenc_nn.so) into torch.ops."""

import os
from pathlib import Path

import torch

LIBRARY_NAME = "libposenc_nn.so"
ENV_VARIABLE = "POSENC_LIBRARY"


def candidate_paths():
    """$POSENC_LIBRARY when set, else <repo>/build/lib/libposenc_nn.so next to this package."""
    explicit = os.environ.get(ENV_VARIABLE)
    if explicit:
        return [Path(explicit)]
    repo = Path(__file__).resolve().parents[2]
    return [repo / "build" / "lib" / LIBRARY_NAME]


def load():
    """Loads the library once and returns the ``torch.ops.posenc`` namespace."""
    tried = candidate_paths()
    for path in tried:
        if path.is_file():
            try:
                torch.ops.load_library(str(path))
            except OSError as error:
                raise ImportError(f"posenc: could not load the op library {path}: {error}") from error
            return torch.ops.posenc
    raise ImportError(
        f"posenc: the op library {LIBRARY_NAME} was not found; tried "
        + ", ".join(str(p) for p in tried)
        + f". Build it (cmake --build build --target posenc_nn) or set {ENV_VARIABLE} to its path."
    )
