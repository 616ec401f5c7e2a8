"""`posenc experiment` (docs/experiments.md): the extrapolation suite end to
end with --quick on a package tree written here (corpus step in posenc-text,
then training and test perplexity per encoding), its resumption (a finished
run is reused, an interrupted one continues from its checkpoint to the same
numbers), the summary and the refusals. The binary comes from $POSENC_CLI."""

import json
import math
import shutil

import pytest

from test_cli_corpus import run, tree  # noqa: F401  (the package-tree fixture)
from test_cli_experiment_properties import blas_of_doctor


def suite(tree_root, out, *extra):
    return run("experiment", "run", "extrapolation", "--quick", "--out", out, "--root", tree_root,
               "--vocab-size", 100, "--threads", 1, *extra)


def test_quick_suite_runs_resumes_and_reports(tree, tmp_path):  # noqa: F811
    root, _ = tree
    out = tmp_path / "suite"
    r = suite(root, out)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == f"corpus: wordnet, SentencePiece vocabulary 100 -> {out}/corpus"
    assert [line.split(":")[0] for line in lines if line.startswith("run ")] == \
        ["run 1/4 none-s0", "run 2/4 learned-s0", "run 3/4 rope-s0", "run 4/4 alibi-s0"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["suite"], summary["train_seq_len"], summary["runs"], summary["lengths"]) == \
        ("extrapolation", 32, 4, [32, 64])
    # The rope run is also evaluated with each context extension of the suite (factor 64 / 32 = 2).
    assert [row["encoding"] for row in summary["rows"]] == ["none", "learned", "rope", "rope+linear", "rope+yarn",
                                                            "alibi"]
    cells = {row["encoding"]: row["test_perplexity"] for row in summary["rows"]}
    # A learned table of 32 rows cannot take 64 positions: not applicable, never a number.
    assert "not_applicable" in cells["learned"][1] and "perplexity_mean" not in cells["learned"][1]
    for encoding in ("none", "rope", "rope+linear", "rope+yarn", "alibi"):
        for cell in cells[encoding]:
            assert cell["seeds"] == 1 and 1 < cell["perplexity_mean"] < 1000 and cell["perplexity_sd"] == 0
    result = json.loads((out / "runs" / "rope-s0" / "result.json").read_text())
    assert result["config"]["task_options"]["eval_split"] == "test" and result["checkpoint_step"] == 20
    assert result["blas"] == blas_of_doctor()  # a run's last bits depend on the BLAS kernels too
    assert result["extensions_asked"] == ["linear", "yarn"]
    assert [e["type"] for e in result["extensions"]] == ["linear", "yarn"]
    assert result["extensions"][0]["lengths"][0]["loss"] != result["lengths"][0]["loss"]  # positions / 2 everywhere
    assert json.loads((out / "runs" / "alibi-s0" / "result.json").read_text())["extensions"] == []

    # Run again: every run is reused, the summary is the same.
    again = suite(root, out)
    assert again.returncode == 0, again.stderr
    assert sum("done before" in line for line in again.stdout.splitlines()) == 4
    assert json.loads((out / "summary.json").read_text()) == summary

    # The results copied elsewhere (suite.json and runs/*/result.json, as docs/results/ holds them) are all
    # reused: a result names its data by the suite's layout, not by the path of the directory that held it;
    # an older result's absolute path is read the same way.
    assert result["config"]["task_options"]["data"] == "corpus"
    moved = tmp_path / "elsewhere" / "suite"
    moved.mkdir(parents=True)
    shutil.copy(out / "suite.json", moved)
    for name in ("none-s0", "learned-s0", "rope-s0", "alibi-s0"):
        stored = json.loads((out / "runs" / name / "result.json").read_text())
        if name == "none-s0":
            stored["config"]["task_options"]["data"] = "/old/checkout/out/suite/corpus"
        (moved / "runs" / name).mkdir(parents=True)
        (moved / "runs" / name / "result.json").write_text(json.dumps(stored))
    copied = suite(root, moved)
    assert copied.returncode == 0, copied.stderr
    assert sum("done before" in line for line in copied.stdout.splitlines()) == 4
    assert json.loads((moved / "summary.json").read_text())["rows"] == summary["rows"]

    # An interrupted run (no result, only its step-10 checkpoint) resumes to the same numbers.
    rope = out / "runs" / "rope-s0"
    (rope / "result.json").unlink()
    shutil.rmtree(rope / "checkpoints" / "step-00000020")
    resumed = suite(root, out)
    assert resumed.returncode == 0, resumed.stderr
    assert "run 3/4 rope-s0: trained" in resumed.stdout
    again_result = json.loads((rope / "result.json").read_text())
    assert again_result["lengths"] == result["lengths"] and again_result["extensions"] == result["extensions"]
    # Its wall time is both processes' windows of throughput.jsonl (each window's tokens over its rate): the
    # steps before the checkpoint count too.
    config = again_result["config"]
    windows, previous = [], 0
    for line in (rope / "throughput.jsonl").read_text().splitlines():
        w = json.loads(line)
        windows.append((w["step"], (w["step"] - previous) * config["batch"] * config["seq_len"] / w["tokens_per_s"]))
        previous = w["step"]
    assert previous == 20 and any(step <= 10 for step, _ in windows)
    assert math.isclose(again_result["train_seconds"], sum(s for _, s in windows), rel_tol=1e-9)
    assert again_result["train_seconds"] > sum(s for step, s in windows if step > 10) > 0

    # report: the same table, and the JSON the run wrote.
    report = run("experiment", "report", out)
    assert report.returncode == 0 and report.stdout.splitlines()[-4:] == resumed.stdout.splitlines()[-4:]
    as_json = run("experiment", "report", out, "--json")
    assert json.loads(as_json.stdout) == summary

    # --markdown: one table row per summary row, each cell the summary's mean, n/a with its reason as a note.
    md = run("experiment", "report", out, "--markdown")
    assert md.returncode == 0, md.stderr
    lines = md.stdout.splitlines()
    assert lines[:2] == ["| encoding | 32 | 64 |", "|---|---|---|"]
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines[2:8]}
    assert list(rows) == [row["encoding"] for row in summary["rows"]]
    for encoding in ("none", "rope", "rope+linear", "rope+yarn", "alibi"):
        assert [cell.rstrip(" |") for cell in rows[encoding]] == \
            [f"{c['perplexity_mean']:.1f}" for c in cells[encoding]]  # one seed: no ± part
    assert rows["learned"][1] == "n/a [1] |"
    assert lines[8:] == ["", f"[1] {cells['learned'][1]['not_applicable']}"]
    refused = run("experiment", "report", out, "--markdown", "--json")
    assert refused.returncode != 0 and "--json excludes --markdown" in refused.stderr


def test_refusals(tree, tmp_path):  # noqa: F811
    root, _ = tree
    r = run("experiment", "run", "sorting", "--out", tmp_path / "p")
    assert (r.returncode, r.stderr) == (
        2, "posenc: [experiment] unknown suite 'sorting'; known: extrapolation, properties\n")
    assert not (tmp_path / "p").exists()
    r = run("experiment", "run", "extrapolation", "--quick", "--out", tmp_path / "p", "--seeds", 0)
    assert (r.returncode, r.stderr) == (2, "posenc: [experiment] seeds must be >= 1, got 0\n")
    r = run("experiment", "run", "extrapolation", "--quick", "--out", tmp_path / "p", "--encodings", "rope,foo")
    assert r.returncode == 2 and r.stderr.startswith("posenc: [encoding] unknown encoding 'foo'")
    assert not (tmp_path / "p").exists()  # refused before the corpus step
    out = tmp_path / "suite"
    assert suite(root, out, "--encodings", "rope").returncode == 0
    r = suite(root, out, "--encodings", "rope", "--steps", 30)
    assert (r.returncode, r.stderr) == (
        1, f"posenc: [experiment] {out}/runs/rope-s0/result.json was written for another configuration "
           "(steps 20, here 30): use another --out\n")
    r = run("experiment", "report", tmp_path / "nothing")
    assert (r.returncode, r.stderr) == (
        1, f"posenc: [experiment] {tmp_path}/nothing: no suite.json and no run results: not an experiment directory\n")
    # The corpus packages missing: the corpus step's own message, then the suite's.
    r = run("experiment", "run", "extrapolation", "--quick", "--out", tmp_path / "e", "--root", tmp_path / "empty")
    assert r.returncode == 1
    assert r.stderr == (f"posenc: [corpus] {tmp_path}/empty/usr/share/wordnet/data.noun: not found; install "
                        "Debian's wordnet-base (bash scripts/setup.sh)\n"
                        "posenc: [experiment] the corpus step (posenc-text corpus) failed; its message is above\n")


def test_jobs_give_the_same_results(tree, tmp_path):  # noqa: F811
    root, _ = tree
    sequential, parallel = tmp_path / "seq", tmp_path / "par"
    assert suite(root, sequential, "--encodings", "none,rope").returncode == 0
    r = suite(root, parallel, "--encodings", "none,rope", "--jobs", 2)
    assert r.returncode == 0, r.stderr
    # "job 1: rope-s0 trained; elapsed 3 s", in the order the jobs end.
    assert sorted(line.split(": ")[1].split(" ")[0] for line in r.stdout.splitlines()
                  if line.startswith("job ")) == ["none-s0", "rope-s0"]
    assert "run 2/2 rope-s0: done" in r.stdout
    # Each run is its own process with the same thread count: the numbers do not depend on --jobs.
    assert json.loads((parallel / "summary.json").read_text())["rows"] == \
        json.loads((sequential / "summary.json").read_text())["rows"]
    r = suite(root, parallel, "--jobs", 3)
    assert r.returncode == 2 and r.stderr.startswith("posenc: [experiment] jobs x threads must be in 1..")
