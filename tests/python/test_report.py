"""`posenc report`, run as a subprocess.

`--quick` must write report.html and report.json with every family, numbers
that follow from the math (ALiBi and the sinusoid are exactly translation
invariant and symmetric; T5's bias is a function of j - i; the sinusoid and
RoPE translate exactly), the same bytes twice, and an HTML page that
references nothing outside itself. Headless Chromium (Debian's `chromium`)
then loads the page: an inline script in it records, after the load event,
how many <img> decoded (naturalWidth > 0) in a <body> attribute that the
dumped DOM shows. That test is skipped only when chromium is missing and CI
is not set. The binary comes from $POSENC_CLI, default <repo>/build/bin/posenc.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import posenc  # noqa: F401  (loads the op library: the registry's catalog)

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

INPUT_TABLES = ["sinusoidal", "index", "normalized", "binary", "signed-binary", "sine-binary", "sine-only", "learned",
                "sinusoidal-2d", "sinusoidal-3d"]
QUERY_KEY = ["rope", "p-rope", "rope-axial-2d", "rope-xpos"]
BIASES = ["alibi", "t5", "kerple", "kerple-power"]
RELATIVE = ["shaw", "sinusoidal-relative", "xl", "2d-relative"]
# Then one section per registry family none of the above shows (FIRE, DPB, ...), from the descriptors.
_CATALOG = json.loads(torch.ops.posenc.encoding_catalog())
GENERIC = [f["name"] for f in _CATALOG
           if f["report_section"] and f["report_section"] not in INPUT_TABLES + QUERY_KEY + BIASES + RELATIVE]
FAMILIES = INPUT_TABLES + QUERY_KEY + BIASES + RELATIVE + GENERIC
QUICK_N = 64

METRIC_KEYS = ["monotonicity", "translation_invariance", "symmetry", "window", "monotone_range",
               "monotone_range_distribution", "proximity", "translation_residual", "translation", "absolute_mae",
               "relative_error", "probe"]


def run(*args, cwd=None):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def has_torch_layer():
    return run("--help").stdout.find(" train") >= 0


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    r = run("report", "--quick", "--out", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {out / 'report.html'}, {out / 'report.json'} and ")
    # Progress: one line per section on stderr, "[ k/total] name".
    progress = r.stderr.splitlines()
    assert len(progress) == len(FAMILIES)
    assert progress[0] == f"posenc report: [ 1/{len(FAMILIES)}] sinusoidal"
    return out, json.loads((out / "report.json").read_text())


def sections(report):
    return {e["name"]: e for e in report["encodings"]}


def test_quick_report_has_every_family(quick):
    out, report = quick
    assert (report["quick"], report["positions"], report["seed"]) == (True, QUICK_N, 0)
    assert [e["name"] for e in report["encodings"]] == FAMILIES
    by_name = sections(report)
    for name, e in by_name.items():
        for key in ["name", "group", "description", "untrained", "shape", "matrix", "available", "note", *METRIC_KEYS,
                    "figures", "details"]:
            assert key in e, (name, key)
        for figure in e["figures"]:
            assert (out / figure).is_file() and (out / figure).read_bytes()[:4] == b"\x89PNG"
    for name in INPUT_TABLES + ["rope", "rope-axial-2d"]:
        e = by_name[name]
        assert e["available"] and e["note"] is None
        assert e["shape"][0] == QUICK_N
        assert [pathlib.Path(f).stem.split("-")[-1] for f in e["figures"]] == ["encoding", "similarity", "decay"]
        assert e["translation"]["method"] in ("exact", "least-squares")
        assert e["probe"]["folds"] == 5 and e["absolute_mae"] >= 0 and 0 <= e["relative_error"] <= 1
    for name in BIASES + ["rope-xpos"]:
        e = by_name[name]
        assert e["available"] and e["shape"] == [QUICK_N, QUICK_N]
        assert len(e["figures"]) == 2
        # Table-only numbers do not apply.
        assert e["translation_residual"] is None and e["absolute_mae"] is None and e["relative_error"] is None
    for name in RELATIVE:
        e = by_name[name]
        assert not e["available"] and e["figures"] == [] and e["monotonicity"] is None
        assert "--quick" in e["note"] or "torch layer" in e["note"]
    assert by_name["learned"]["untrained"] and by_name["t5"]["untrained"]
    assert not by_name["sinusoidal"]["untrained"]
    assert by_name["binary"]["shape"] == [QUICK_N, 6]  # ceil(log2 64) bits


def test_quick_report_numbers_follow_the_math(quick):
    _, report = quick
    by_name = sections(report)
    for name in ["sinusoidal", "rope"]:
        e = by_name[name]
        # sum_k cos((i - j) w_k): Toeplitz and symmetric; exact rotation of float64 rows.
        assert e["translation_invariance"] == pytest.approx(1, abs=1e-12)
        assert e["symmetry"] == pytest.approx(1, abs=1e-12)
        assert e["translation"]["method"] == "exact" and e["translation_residual"] < 1e-12
        assert e["absolute_mae"] == 0
    alibi = by_name["alibi"]
    # -mean(m) |i - j| falls strictly in both directions, to the table's end.
    assert (alibi["monotonicity"], alibi["translation_invariance"], alibi["symmetry"]) == (1, 1, 1)
    assert alibi["monotone_range"] == QUICK_N - 1 and alibi["monotone_range_distribution"]["all_censored"]
    # T5's bucket of j - i: constant diagonals, whatever the (random) table.
    assert by_name["t5"]["translation_invariance"] == pytest.approx(1, abs=1e-12)
    # A random table: nothing to translate, position not linearly readable.
    learned = by_name["learned"]
    assert learned["translation"]["method"] == "least-squares" and learned["translation_residual"] > 0.5
    assert learned["absolute_mae"] > QUICK_N / 8


def test_quick_report_is_deterministic(quick, tmp_path):
    out, _ = quick
    r = run("report", "--quick", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "report.json").read_bytes() == (out / "report.json").read_bytes()
    assert (tmp_path / "report.html").read_bytes() == (out / "report.html").read_bytes()
    for png in (out / "figures").iterdir():
        assert (tmp_path / "figures" / png.name).read_bytes() == png.read_bytes(), png.name


def test_html_is_self_contained(quick):
    out, report = quick
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    # Outside the images' base64 (whose alphabet has '/'), no scheme and no network-path reference.
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "data:", html)
    for scheme in ["http:", "https:", "file:", "ftp:", "//"]:
        assert scheme not in text, scheme
    sources = re.findall(r'\bsrc\s*=\s*"([^"]*)"', html)
    assert len(sources) == sum(len(e["figures"]) for e in report["encodings"]) > 0
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert all(h.startswith("#") for h in re.findall(r'\bhref\s*=\s*"([^"]*)"', html))
    assert "<link" not in html and "@import" not in html and "url(" not in html
    for name in FAMILIES:
        assert f">{name}</a>" in html  # the summary table links every section
    for term in ["monotonicity", "translation invariance", "symmetry", "monotone range", "References"]:
        assert term in html


def test_html_renders_in_chromium(quick, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing but CI is set: install Debian's chromium (scripts/setup.sh)")
        pytest.skip("chromium is not installed")
    out, report = quick
    expected = sum(len(e["figures"]) for e in report["encodings"])
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--user-data-dir=" + str(tmp_path / "profile"), "--virtual-time-budget=10000",
                        "--dump-dom", (out / "report.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body[^>]*>", r.stdout)
    assert body, r.stdout[:2000]
    images = re.search(r'data-images="(\d+)"', body.group(0))
    loaded = re.search(r'data-images-loaded="(\d+)"', body.group(0))
    assert images and loaded, body.group(0)  # the load event ran the page's script
    assert int(images.group(1)) == expected > 0
    assert int(loaded.group(1)) == expected


def test_report_with_table_files(tmp_path):
    p = np.arange(40, dtype=np.float64)[:, None]
    np.save(tmp_path / "ramp.npy", np.hstack([p, np.ones_like(p)]))
    r = run("report", "--quick", "--out", "out", "--table", "ramp.npy", "--table", "ramp.npy", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    files = [e for e in report["encodings"] if e["group"] == "table file"]
    assert [e["name"] for e in files] == ["ramp.npy", "ramp.npy"]
    assert files[0]["shape"] == [40, 2] and files[0]["absolute_mae"] == 0  # p is a column
    # Two sections of one name still get their own figures.
    assert files[0]["figures"] != files[1]["figures"]
    assert all((tmp_path / "out" / f).is_file() for e in files for f in e["figures"])


def test_report_refuses_a_table_beyond_max_memory(tmp_path):
    # 2048 positions: S is 32 MiB, and the section keeps a second copy; 1M cannot hold it.
    np.save(tmp_path / "big.npy", np.random.default_rng(0).normal(size=(2048, 8)))
    r = run("report", "--quick", "--out", "out", "--table", "big.npy", "--max-memory", "1M", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    # S twice (64 MiB) and the table's copies.
    assert r.stderr == ("posenc: [report] this needs about 64.5 MiB of memory (S alone: 32.0 MiB for the 2048 "
                        "positions of big.npy) and about 0.0 s; 1.0 MiB is allowed by --max-memory: pass "
                        "--max-memory 65M to allow it, or --force\n")
    assert not (tmp_path / "out").exists()  # refused before anything is written
    assert run("report", "--quick", "--out", "out", "--table", "big.npy", "--max-memory", "1M", "--force",
               cwd=tmp_path).returncode == 0


def test_report_with_a_trained_model(tmp_path):
    if not has_torch_layer():
        pytest.skip("posenc was built without the torch layer (no train command)")
    r = run("train", "--task", "order", "--encoding", "rope", "--layers", 1, "--dim", 16, "--heads", 2, "--seq-len",
            12, "--batch", 8, "--steps", 5, "--warmup", 1, "--threads", 1, "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    r = run("report", "--quick", "--out", tmp_path / "out", "--model", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    e = json.loads((tmp_path / "out" / "report.json").read_text())["encodings"][-1]
    assert (e["group"], e["available"], e["shape"]) == ("trained model", True, [12, 12])
    assert (e["details"]["encoding"], e["details"]["task"], e["details"]["step"]) == ("rope", "order", 5)
    assert -1 <= e["monotonicity"] <= 1 and len(e["figures"]) == 2


BAD_ARGUMENTS = [
    (["report", "--table", "t.txt"], "[report] --table must be FILE.npy or FILE.safetensors[:NAME], got 't.txt'"),
    (["report", "--table", "t.npy:"], "[report] --table must be FILE.npy or FILE.safetensors[:NAME], got 't.npy:'"),
    (["report", "--model", "nope"], "[report] --model nope is not a posenc run (no config.json)"),
]


@pytest.mark.parametrize("args,message", BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS])
def test_bad_arguments(tmp_path, args, message):
    r = run(*args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert list(tmp_path.iterdir()) == []  # nothing written, not even out/


def test_unwritable_output_is_a_runtime_error(tmp_path):
    (tmp_path / "file").write_text("")
    r = run("report", "--quick", "--out", "file", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.splitlines()[-1] == "posenc: [report] cannot create directory 'file': Not a directory"
