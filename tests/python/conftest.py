"""Makes <repo>/python importable, so the tests run from the repository root
(PYTHONPATH=python) as well as from python/ (the Makefile's way)."""

import sys
from pathlib import Path

_PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(_PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(_PYTHON_DIR))
