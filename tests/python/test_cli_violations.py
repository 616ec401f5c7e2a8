"""`posenc analyze` prints the violation-style indicators (docs/analysis.md,
"Violation-style readings"): text lines and JSON keys, against the plain
numpy references of violation_references.py. The binary comes from
$POSENC_CLI, default <repo>/build/bin/posenc."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

from analysis_references import reference_proximity
from violation_references import reference_variance_share, reference_violation_rate

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))


def run(*args, cwd=None):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("kind", ["dot", "cosine"])
@pytest.mark.parametrize("window", [None, 5])
def test_analyze_json_matches_the_references(tmp_path, kind, window):
    table = np.random.default_rng(4).standard_normal((40, 6))
    np.save(tmp_path / "t.npy", table)
    args = ["analyze", "t.npy", "--proximity", kind, "--json"] + ([] if window is None else ["--window", window])
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    j = json.loads(r.stdout)
    s = reference_proximity(table, kind)
    # The rate is a quotient of integers (exact); the share sums ~1500 squares in another order: 1e-12.
    assert j["monotonicity_violation_rate"] == pytest.approx(reference_violation_rate(s, window), abs=1e-15)
    assert j["within_diagonal_variance_share"] == pytest.approx(reference_variance_share(s, window), abs=1e-12)
    assert j["within_diagonal_variance_share"] == pytest.approx(1 - j["translation_invariance"], abs=1e-15)
    assert list(j)[-2:] == ["monotonicity_violation_rate", "within_diagonal_variance_share"]


def test_analyze_text_shows_them():
    r = run("analyze", "sinusoidal", "--positions", 64, "--dim", 16)
    assert r.returncode == 0 and r.stderr == ""
    j = json.loads(run("analyze", "sinusoidal", "--positions", 64, "--dim", 16, "--json").stdout)
    values = {line[:24].strip(): line[24:].split()[0] for line in r.stdout.splitlines()[1:]}
    assert float(values["violation rate"]) == pytest.approx(j["monotonicity_violation_rate"], abs=5e-5)
    # %.4g: a sinusoid's share is ~1e-30, printed as such, not as 0.
    assert float(values["within-diagonal share"]) == pytest.approx(j["within_diagonal_variance_share"], rel=1e-3)
    assert 0 < j["within_diagonal_variance_share"] < 1e-20
    assert j["monotonicity_violation_rate"] < 0.5
