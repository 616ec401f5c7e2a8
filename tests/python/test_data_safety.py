"""Issue 19: no user loses a run or a file to posenc, and both attention paths
agree on (or refuse) non-finite input.

Each test reproduces what went wrong before the fix: two trainers in one run
directory, a planted link at a temporary file's name, a FIFO given as a table,
fused and composed attention disagreeing on NaN / inf, NaN slopes accepted,
xPos turning NaN at long positions, torch's schema text instead of TypeError,
and a diverging run that exited 0."""

import math
import os
import pathlib
import signal
import subprocess
import time

import pytest
import torch

import posenc

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

LONG_RUN = ["--task", "lookback", "--encoding", "learned", "--layers", "1", "--dim", "16", "--heads", "2",
            "--seq-len", "8", "--batch", "4", "--steps", "100000", "--threads", "1", "--checkpoint-every", "1000"]
TINY_RUN = ["--task", "order", "--encoding", "rope", "--layers", "1", "--dim", "16", "--heads", "2",
            "--seq-len", "8", "--batch", "4", "--threads", "1"]


def run(*args, **kwargs):
    kwargs.setdefault("timeout", 120)
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, **kwargs)


# ------------------------------------------------------------------ run directories

def test_a_second_trainer_on_a_run_directory_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen([CLI, "train", *LONG_RUN, "--out", str(out), "--resume"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lock = out / ".lock"
        deadline = time.monotonic() + 60
        while not (lock.is_file() and lock.read_text() == f"{first.pid}\n"):
            assert first.poll() is None, "the first trainer ended early"
            assert time.monotonic() < deadline, "the first trainer never took the lock"
            time.sleep(0.05)
        second = run("train", *LONG_RUN, "--out", out, "--resume")
        assert (second.returncode, second.stderr) == (
            1, f"posenc: [train] {out} is in use by process {first.pid} (lock file {out}/.lock)\n")
    finally:
        first.kill()
        first.wait()
    # Killed, it holds nothing: the directory is usable again.
    again = run("train", *TINY_RUN, "--steps", "2", "--out", tmp_path / "other")
    assert again.returncode == 0, again.stderr


def test_a_report_never_writes_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("report.html.tmp", "report.json.tmp"):
        (out / name).symlink_to(victim)
    r = run("report", "--quick", "--out", out)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious"
    assert (out / "report.html").is_file() and not (out / "report.html").is_symlink()
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]


def test_ctrl_c_during_a_write_leaves_no_partial_file(tmp_path):
    """SIGINT while a 256 MB table is being written: the process ends by the signal, its temporary
    file is removed, and the target keeps its old contents (here: it never existed)."""
    target = tmp_path / "table.npy"
    interrupted = 0
    for _ in range(5):
        writer = subprocess.Popen([CLI, "table", "sinusoidal", "--positions", "500000", "--dim", "128",
                                   "--out", str(target)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Wait for the temporary file (".table.npy.tmp-<pid>-...") to appear, then interrupt.
            while writer.poll() is None and not any(p.name.startswith(".table.npy.tmp-") for p in tmp_path.iterdir()):
                time.sleep(0.001)
            if writer.poll() is None:
                writer.send_signal(signal.SIGINT)
        finally:
            code = writer.wait(timeout=60)
        assert [p.name for p in tmp_path.iterdir() if p.name != "table.npy"] == []
        if code == 0:  # the write won the race: the file is complete
            assert target.stat().st_size == 128 + 500000 * 128 * 4
            target.unlink()
            continue
        assert code == -signal.SIGINT and not target.exists()
        interrupted += 1
        break
    assert interrupted == 1, "the write always finished before the signal; make the table larger"


def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "t.npy"
    os.mkfifo(fifo)
    r = run("analyze", fifo, timeout=30)
    assert r.returncode != 0
    assert r.stderr.splitlines()[-1] == f"posenc: [npy] {fifo}: not a regular file"
    with pytest.raises((ValueError, RuntimeError), match="not a regular file"):
        posenc.load_tensor(fifo)


def test_a_diverging_run_fails_instead_of_finishing(tmp_path):
    r = run("train", *TINY_RUN, "--steps", "20", "--lr", "1e30", "--clip", "0", "--out", tmp_path / "run")
    assert r.returncode == 1
    assert r.stderr.startswith("posenc: [train] training diverged at step ")
    assert r.stderr.endswith("): lower lr, raise warmup or set clip\n")


# ------------------------------------------------------------------ attention

def qkv(seed, b=1, h=2, t=150, d=8):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, t, d, generator=g, dtype=torch.float64) for _ in range(3)]


def both_paths(q, k, v, **kwargs):
    fused = posenc.attention(q, k, v, return_weights=True, path="fused", **kwargs)
    composed = posenc.attention(q, k, v, return_weights=True, path="composed", **kwargs)
    return fused, composed


def assert_same_non_finite(fused, composed):
    """Same NaN and inf positions in output and weights, close values elsewhere
    (the two paths sum in different orders: a few ulps of the dtype)."""
    tolerance = 1e-12 if fused[0].dtype == torch.float64 else 2e-5
    for a, b in zip(fused, composed):
        assert torch.equal(a.isnan(), b.isnan())
        assert torch.equal(a.isinf(), b.isinf())
        finite = a.isfinite()
        assert torch.allclose(a[finite], b[finite], rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("spoil", ["nan q", "inf k", "-inf k", "nan k", "nan bias", "inf bias"])
def test_both_paths_propagate_nan_and_inf_alike(spoil, causal, dtype):
    q, k, v = (x.to(dtype) for x in qkv(1))
    bias = torch.zeros(2, 150, 150, dtype=dtype)  # > one key tile: causal blocks skip whole tiles
    what, where = spoil.split()
    value = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[what]
    if where == "q":
        q[0, 1, 5, 3] = value
    elif where == "k":
        k[0, 0, 7, 2] = value
    else:
        bias[1, 9, 4] = value
    fused, composed = both_paths(q, k, v, bias=bias, causal=causal)
    assert_same_non_finite(fused, composed)
    assert fused[0].isnan().any()  # something was spoilt


def test_a_nan_query_spoils_exactly_its_row():
    q, k, v = qkv(2)
    q[0, 1, 5, 3] = math.nan
    (out, weights), _ = both_paths(q, k, v)
    spoilt = out.isnan().any(-1)
    assert spoilt.sum() == 1 and spoilt[0, 1, 5]
    assert out[0, 1, 5].isnan().all() and weights[0, 1, 5].isnan().all()


@pytest.mark.parametrize("path", ["fused", "composed", "auto"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_slopes_and_tables_are_refused(path, bad):
    q, k, v = qkv(3)
    slopes = posenc.alibi_slopes(2, dtype=torch.float64)
    slopes[1] = bad
    with pytest.raises(ValueError, match=rf"^\[attention\] alibi_slopes must be finite, got {bad} at \[1\]$"):
        posenc.attention(q, k, v, alibi_slopes=slopes, path=path)
    table = torch.zeros(32, 2, dtype=torch.float64)
    table[4, 0] = bad
    with pytest.raises(ValueError, match=rf"^\[attention\] t5_table must be finite, got {bad} at \[4, 0\]$"):
        posenc.attention(q, k, v, t5_table=table, path=path)
    rel = torch.zeros(9, 8, dtype=torch.float64)
    rel[8, 7] = bad
    with pytest.raises(ValueError, match=rf"^\[attention\] rel_k must be finite, got {bad} at \[8, 7\]$"):
        posenc.attention(q, k, v, rel_k=rel, path=path)


# ------------------------------------------------------------------ xPos, Python arguments

def test_xpos_refuses_positions_whose_decay_leaves_the_float_range():
    q = torch.randn(1, 4, 64)
    near = torch.tensor([0, 30000])
    q_rot, k_rot = posenc.apply_xpos(q[:, :2], q[:, :2], near)
    assert q_rot.isfinite().all() and k_rot.isfinite().all()
    far = torch.tensor([0, 1, 2, 10_000_000])
    with pytest.raises(ValueError, match=r"^\[xpos\] positions must be within \d+ of xpos_center 0 \(beyond, the "
                                         r"decay factor zeta\^\(\(p - center\) \* power\) leaves float32's range\), "
                                         r"got 10000000$"):
        posenc.apply_xpos(q, q, far)


def test_a_wrong_argument_type_is_a_type_error_naming_it():
    with pytest.raises(TypeError) as caught:
        posenc.sinusoidal(3, 8.0)
    assert str(caught.value) == "[sinusoidal_range] dim must be int, got float (8.0)"


def test_a_degenerate_table_in_a_report_is_a_note_not_perfect_numbers(tmp_path):
    import json

    import numpy as np
    np.save(tmp_path / "zeros.npy", np.zeros((16, 8), dtype=np.float32))
    r = run("report", "--quick", "--table", tmp_path / "zeros.npy", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    sections = json.loads((tmp_path / "out" / "report.json").read_text())["encodings"]
    noted = [s for s in sections if s["note"] and "zeros.npy" in s["name"]]
    assert len(noted) == 1, [s["name"] for s in sections]
    assert noted[0]["note"] == "[analyze] table is all zeros: the indicators are undefined"


@pytest.mark.parametrize("task, option, owner", [
    ("order", "--max-span", "span"), ("lookback", "--max-span", "span"),
    ("order", "--lookback", "lookback"), ("copy", "--lookback", "lookback"), ("span", "--lookback", "lookback"),
])
def test_a_task_option_given_to_another_task_is_refused(tmp_path, task, option, owner):
    args = [a for a in TINY_RUN if a not in ("--task", "order")]
    r = run("train", "--task", task, *args, option, "3", "--steps", "2", "--out", tmp_path / "run")
    assert (r.returncode, r.stderr) == (
        2, f"posenc: [train] {option} does not apply to task '{task}' (only to '{owner}')\n")
    assert not (tmp_path / "run").exists()
