"""Finds and loads the posenc op libraries into torch.ops: libposenc_nn.so
(the encodings), and libposenc_analysis_torch.so beside it (analysis and files).

Where: $POSENC_LIBRARY when set; else the package's own _lib/ (an installed
wheel, see docs/install.md), then <repo>/build/lib (a source tree)."""

import os
from pathlib import Path

import torch

from ._errors import CheckedOps

LIBRARY_NAME = "libposenc_nn.so"
ANALYSIS_LIBRARY_NAME = "libposenc_analysis_torch.so"
ENV_VARIABLE = "POSENC_LIBRARY"
PACKAGE_LIBRARY_DIR = Path(__file__).resolve().parent / "_lib"  # what an installed wheel holds

_loaded = None  # the path of the op library once loaded
_analysis_loaded = False


def candidate_paths():
    """$POSENC_LIBRARY when set (and nothing else: an explicit choice must not fall back
    silently); else <package>/_lib/libposenc_nn.so when the package has a _lib/ (installed),
    then <repo>/build/lib/libposenc_nn.so next to this package (a source tree)."""
    explicit = os.environ.get(ENV_VARIABLE)
    if explicit:
        return [Path(explicit)]
    bundled = [PACKAGE_LIBRARY_DIR / LIBRARY_NAME] if PACKAGE_LIBRARY_DIR.is_dir() else []
    repo = Path(__file__).resolve().parents[2]
    return bundled + [repo / "build" / "lib" / LIBRARY_NAME]


def _load_library(path):
    try:
        torch.ops.load_library(str(path))
    except OSError as error:
        raise ImportError(f"posenc: could not load the op library {path}: {error}") from error


def load():
    """Loads the library once and returns the ``torch.ops.posenc`` namespace, wrapped so
    that its ops raise posenc's TypeError / MemoryError (see _errors)."""
    global _loaded
    if _loaded is not None:
        return CheckedOps(torch.ops.posenc)
    tried = candidate_paths()
    for path in tried:
        if path.is_file():
            _load_library(path)
            _loaded = path
            return CheckedOps(torch.ops.posenc)
    raise ImportError(
        f"posenc: the op library {LIBRARY_NAME} was not found; tried "
        + ", ".join(str(p) for p in tried)
        + f". Build it (cmake --build build --target posenc_nn) or set {ENV_VARIABLE} to its path."
    )


def analysis_library_path():
    """libposenc_analysis_torch.so in the directory of the loaded libposenc_nn.so."""
    load()
    return _loaded.with_name(ANALYSIS_LIBRARY_NAME)


def load_analysis():
    """Loads libposenc_nn.so, then the analysis op library beside it; returns ``torch.ops.posenc`` (wrapped)."""
    global _analysis_loaded
    if _analysis_loaded:
        return CheckedOps(torch.ops.posenc)
    path = analysis_library_path()
    if not path.is_file():
        raise ImportError(
            f"posenc: the analysis op library {ANALYSIS_LIBRARY_NAME} was not found at {path} (it is looked for "
            f"beside {LIBRARY_NAME}). Build it (cmake --build build --target posenc_analysis_torch)."
        )
    _load_library(path)
    _analysis_loaded = True
    return CheckedOps(torch.ops.posenc)
