"""The experiments' HTML report, run as subprocesses.

`posenc experiment report DIR` on a suite directory written by hand (two
runs' result.json, one of them with a length its learned table cannot take)
must keep its table and summary.json and add DIR/report.html (self-contained)
and DIR/figures/experiment-perplexity.png; `posenc report --quick
--experiments DIR` must add the same section to the main report, for both
suites (the properties summary is tests/report/data's hand-made one), and
refuse a directory without a summary.json, or with a malformed one, in one line.
The binary comes from $POSENC_CLI, default <repo>/build/bin/posenc.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
PROPERTIES = REPO / "tests" / "report" / "data" / "properties_summary.json"
REASON = "[learned] position 32 is outside the table of 32 rows (valid 0..31)"


def run(*args, cwd=None):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def result(order, encoding, losses):
    """A run's result.json as run_experiment writes it (src/training/experiment.cpp), lengths 32 and 64."""
    lengths = []
    for seq_len, loss in zip([32, 64], losses):
        if loss is None:
            lengths.append({"seq_len": seq_len, "error": REASON})
        else:
            lengths.append({"seq_len": seq_len, "loss": loss, "perplexity": 2.718281828459045 ** loss,
                            "accuracy": 0.1, "count": 100})
    return {"format": "posenc-experiment-run-1", "name": f"{encoding}-s0", "order": order, "encoding": encoding,
            "seed": 0, "train_seconds": 1.0, "tokens_per_second": 1000.0, "checkpoint_step": 20,
            "lengths_asked": [32, 64], "extensions_asked": [], "lengths": lengths, "extensions": [],
            "config": {"seq_len": 32, "encoding": encoding}}


@pytest.fixture
def suite(tmp_path):
    out = tmp_path / "suite"
    for order, (encoding, losses) in enumerate([("alibi", [5.0, 5.1]), ("learned", [4.9, None])]):
        run_dir = out / "runs" / f"{encoding}-s0"
        run_dir.mkdir(parents=True)
        (run_dir / "result.json").write_text(json.dumps(result(order, encoding, losses)))
    return out


def has_experiment_command():
    return " experiment" in run("--help").stdout


def assert_self_contained(html):
    assert html.startswith("<!DOCTYPE html>")
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "data:", html)
    for scheme in ["http:", "https:", "file:", "//"]:
        assert scheme not in text, scheme
    assert all(s.startswith("data:image/png;base64,") for s in re.findall(r'\bsrc\s*=\s*"([^"]*)"', html))
    assert all(h.startswith("#") for h in re.findall(r'\bhref\s*=\s*"([^"]*)"', html))


def test_experiment_report_writes_html_and_figures(suite):
    if not has_experiment_command():
        pytest.skip("posenc was built without the torch layer (no experiment command)")
    r = run("experiment", "report", suite)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # The line about the page comes first: the table stays the last lines, as before.
    assert lines[0] == f"wrote {suite / 'report.html'} and 1 figures in {suite / 'figures'}/"
    assert lines[1].startswith("test perplexity (mean +- sd over seeds), trained at seq_len 32, 2 runs")
    assert lines[-2].split() == ["learned", "134.29", "n/a"]
    # One seed per encoding: nothing to pair (tests/training/test_extrapolation_summary.cpp pairs seeds).
    assert lines[-1] == ("paired t-tests on log perplexity: 0, p < 0.05 in 0, 0 after Holm's correction per length "
                         "(summary.json: comparisons)")
    summary = json.loads((suite / "summary.json").read_text())
    assert summary["comparisons"] == []
    assert summary["suite"] == "extrapolation" and [r["encoding"] for r in summary["rows"]] == ["alibi", "learned"]

    html = (suite / "report.html").read_text()
    assert_self_contained(html)
    assert html.count("<img ") == 1
    for name in ["alibi", "learned"]:
        assert f"</span>{name}</td>" in html
    assert f'<td class="na" title="{REASON}">n/a' in html
    png = (suite / "figures" / "experiment-perplexity.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")

    # --json: stdout is the summary alone; the line about the page goes to stderr.
    r = run("experiment", "report", suite, "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == summary
    assert r.stderr == f"wrote {suite / 'report.html'} and 1 figures in {suite / 'figures'}/\n"


def test_main_report_includes_both_suites(suite, tmp_path):
    extrapolation = tmp_path / "extrapolation"
    extrapolation.mkdir()
    shutil.copy(REPO / "tests" / "report" / "data" / "extrapolation_summary.json", extrapolation / "summary.json")
    properties = tmp_path / "properties"
    properties.mkdir()
    shutil.copy(PROPERTIES, properties / "summary.json")
    out = tmp_path / "out"
    r = run("report", "--quick", "--out", out, "--experiments", extrapolation, "--experiments", properties)
    assert r.returncode == 0, r.stderr
    assert ", 2 experiments, " in r.stdout
    report = json.loads((out / "report.json").read_text())
    assert [(e["suite"], e["id"]) for e in report["experiments"]] == [
        ("extrapolation", "experiment-extrapolation"), ("properties", "experiment-properties")]
    assert report["experiments"][1]["summary"] == json.loads(PROPERTIES.read_text())
    html = (out / "report.html").read_text()
    assert_self_contained(html)
    assert '<h2>Experiments</h2>\n<section id="experiment-extrapolation" class="experiment">' in html
    assert '<section id="experiment-properties" class="experiment">' in html
    # Every figure of the page is a file too: the encodings' and the experiments' (1 + one per task).
    figures = [f for e in report["encodings"] + report["experiments"] for f in e["figures"]]
    assert html.count("<img ") == len(figures)
    assert [f for e in report["experiments"] for f in e["figures"]] == [
        "figures/experiment-extrapolation-perplexity.png", "figures/experiment-properties-1-scores.png",
        "figures/experiment-properties-2-scores.png"]
    assert all((out / f).is_file() for f in figures)


def test_main_report_refuses_a_directory_without_summary(tmp_path):
    (tmp_path / "suite").mkdir()
    r = run("report", "--quick", "--out", "out", "--experiments", "suite", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("posenc: [report] --experiments suite: no summary.json "
                        "(run posenc experiment report suite first)\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("change,message", [
    (lambda j: j.update(suite="x"), "unknown suite 'x'"),
    (lambda j: j.pop("rows"), "missing or invalid field 'rows'"),
    (lambda j: j["rows"][0]["scores"][0].update(mean="high"), "missing or invalid field 'rows[0].scores[0].mean'"),
])
def test_main_report_refuses_a_malformed_summary(tmp_path, change, message):
    summary = json.loads(PROPERTIES.read_text())
    change(summary)
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "summary.json").write_text(json.dumps(summary))
    r = run("report", "--quick", "--out", "out", "--experiments", "suite", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"posenc: [report] suite/summary.json: {message}\n"
    assert not (tmp_path / "out").exists()
