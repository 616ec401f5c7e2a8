"""Finds and loads the posenc op libraries into torch.ops: libposenc_nn.so
(the encodings), and libposenc_analysis_torch.so beside it (analysis and files).

Where: $POSENC_LIBRARY when set; else the package's own _lib/ (an installed
wheel, see docs/install.md), then <repo>/build/lib (a source tree)."""

import mmap
import os
import re
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


_BUILT_AGAINST = b"posenc-built-against-torch "


def built_against_torch(path):
    """The libtorch version the op library at path was compiled against, as it records in its own
    bytes (src/nn/runtime_info.cpp), or None for a file without the record."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = data.find(_BUILT_AGAINST)
        if start < 0:
            return None
        start += len(_BUILT_AGAINST)
        end = data.find(b"\n", start, start + 64)
        return data[start:end].decode("ascii", "replace") if end > 0 else None


def _release(version):
    """'1.13.0a0+gitunknown' -> (1, 13, 0): the release numbers alone (Debian's torch 1.13.0a0 is libtorch 1.13.0)."""
    match = re.match(r"[0-9]+(?:\.[0-9]+)*", version)
    return tuple(int(n) for n in match.group(0).split(".")) if match else ()


def check_torch_version(path):
    """Refuses, in one line naming both versions, an op library built against another torch than
    the one this interpreter imports: loading it would fail on an undefined symbol, or worse."""
    built = built_against_torch(path)
    if built is not None and _release(built) != _release(torch.__version__):
        raise ImportError(
            f"posenc: the op library {path} was built against torch {built}, but this interpreter imports "
            f"torch {torch.__version__} ({Path(torch.__file__).parent}); rebuild posenc against this torch "
            "(cmake --build build, or pip install . again), or run it with the torch it was built for")


def _load_library(path):
    check_torch_version(path)
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
            from . import _fake
            _fake.register()
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
