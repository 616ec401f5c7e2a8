"""posenc.__version__: the version in CMakeLists.txt's project(posenc VERSION ...),
the one source of truth. In a source tree it is read from that file; the
installed package holds a copy of this module with the number written in
(python/build_backend writes it into the wheel)."""

import re
from pathlib import Path

CMAKE_LISTS = Path(__file__).resolve().parents[2] / "CMakeLists.txt"

_PROJECT_VERSION = re.compile(r"project\(\s*posenc\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)")


def version_from_cmake(path=CMAKE_LISTS):
    """The VERSION of project(posenc ...) in the CMakeLists.txt at path; None if path has none."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    match = _PROJECT_VERSION.search(text)
    return match.group(1) if match else None


# A copy of the package outside both a source tree and a wheel has no version to report.
__version__ = version_from_cmake() or "0+unknown"
