"""`posenc train`, `posenc eval` and `posenc encodings`, run as subprocesses.

The central property: a training run killed with SIGKILL and resumed with
--resume ends with byte-identical checkpoint files (model, optimizer,
generator, state) and metrics.jsonl to an uninterrupted run with the same seed
and thread count. Also: a corrupted newest checkpoint is reported on stderr and
the previous one used; evaluation at several lengths, with a learned table too
short for some; the encoding list; bad input gives one line on stderr with the
exact message and exit 2 (bad arguments) or 1 (runtime failure). The binary
comes from $POSENC_CLI, default <repo>/build/bin/posenc. Models are tiny and use
one thread, so the whole file runs in well under a minute on a busy machine.
"""

import json
import math
import os
import pathlib
import pty
import resource
import signal
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))


def _catalog_names():
    """The registry's names, from `posenc encodings --json` (the descriptors; empty when the CLI is missing,
    and the tests that run it then fail naming it)."""
    try:
        out = subprocess.run([CLI, "encodings", "--json"], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.CalledProcessError):
        return []
    return [entry["name"] for entry in json.loads(out.stdout)]


ENCODINGS = _catalog_names()
KNOWN = ", ".join(ENCODINGS)
# The names the issues promise (a subset: new families join without touching this file).
PROMISED = ["none", "nope", "sinusoidal", "learned", "learnable-sinusoidal", "rope", "p-rope", "rope-xpos", "alibi",
            "t5", "kerple", "kerple-power", "fire", "dpb", "shaw", "shaw-sinusoidal", "shaw-learnable-sinusoidal",
            "xl"]

# A decoder with dropout (so torch's generator state matters on resume), an
# input and a relative encoding, and a log interval that does not divide the
# checkpoint interval (so resumes land inside a metrics window).
KILL_RUN = ["--task", "lookback", "--encoding", "learned+shaw", "--layers", "2", "--dim", "16", "--heads", "2",
            "--seq-len", "12", "--batch", "8", "--steps", "300", "--warmup", "20", "--dropout", "0.1",
            "--checkpoint-every", "20", "--log-every", "7", "--threads", "1", "--seed", "5"]

SMALL = {"task": "order", "layers": 1, "dim": 16, "heads": 2, "seq-len": 8, "batch": 8, "steps": 30, "warmup": 5,
         "checkpoint-every": 10, "log-every": 10, "threads": 1}


def small_run(**changes):
    """SMALL as arguments, with changes (dim=10, max_positions=4) applied."""
    options = dict(SMALL, **{k.replace("_", "-"): v for k, v in changes.items()})
    return [str(a) for k, v in options.items() for a in (f"--{k}", v)]


SMALL_RUN = small_run()

CHECKPOINT_FILES = ["MANIFEST", "model.pt", "optimizer.pt", "rng.pt", "state.json"]


def cli_path():
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return CLI


def run(*args, **kwargs):
    return subprocess.run([cli_path(), *map(str, args)], capture_output=True, text=True, timeout=120, **kwargs)


def train(out, *args):
    r = run("train", *args, "--out", out)
    assert r.returncode == 0, r.stderr
    return r


def one_error_line(r, code, message):
    """Exactly one line on stderr, `posenc: MESSAGE`, and the exit code."""
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stderr == f"posenc: {message}\n"


@pytest.fixture(scope="module")
def rope_run(tmp_path_factory):
    """order with rope at seq_len 8, 30 steps: checkpoints at 10, 20, 30."""
    out = tmp_path_factory.mktemp("rope") / "run"
    r = train(out, *SMALL_RUN, "--encoding", "rope")
    return out, r


# ---------------------------------------------------------------- train


def test_train_writes_config_metrics_checkpoints_and_a_summary(rope_run):
    out, r = rope_run
    config = json.loads((out / "config.json").read_text())
    assert config["task"] == "order" and config["encoding"] == "rope" and config["model"] == "encoder"
    assert config["seq_len"] == 8 and config["max_positions"] == 8 and config["threads"] == 1
    assert config["encoding_parts"] == ["rope"] and "posenc_version" in config
    assert config["encoding_parameters"]["base"] == 10000.0
    lines = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [l["step"] for l in lines] == [10, 20, 30]
    assert [l["tokens"] for l in lines] == [10 * 64, 20 * 64, 30 * 64]
    assert lines[-1]["lr"] == 0.0  # the cosine reaches 0 at the last step
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "step-00000010", "step-00000020", "step-00000030"]
    for p in (out / "checkpoints" / "step-00000030").iterdir():
        assert p.name in CHECKPOINT_FILES
    assert r.stdout.startswith("trained order with rope: steps 1..30 of 30 in ")
    assert r.stdout.endswith(f"; checkpoint {out}/checkpoints/step-00000030\n")
    # Not a terminal: plain progress lines, one per --log-every.
    progress = r.stderr.splitlines()
    assert len(progress) == 3 and all(l.startswith(f"step {s}/30 loss ") for l, s in zip(progress, (10, 20, 30)))


def test_progress_bar_on_a_terminal(tmp_path):
    leader, follower = pty.openpty()
    try:
        r = subprocess.run([cli_path(), "train", *SMALL_RUN, "--encoding", "alibi", "--out", tmp_path / "run"],
                           stdout=subprocess.PIPE, stderr=follower, timeout=120)
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
    assert r.returncode == 0
    text = seen.decode()
    assert text.count("\r[") == 3, text  # one redraw per report, on one line
    assert "] 30/30 loss " in text and " tok/s ETA " in text
    assert text.endswith("\n")


# Randomized positions draw once per step from their own seed stream: a resume must draw the same.
@pytest.mark.parametrize("extra", [[], ["--random-positions", "40"]], ids=["plain", "random-positions"])
def test_sigkill_and_resume_is_bit_identical(tmp_path, extra):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    kill_run = KILL_RUN + extra
    train(straight, *kill_run)

    proc = subprocess.Popen([cli_path(), "train", *kill_run, "--out", killed],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Killed once checkpoint 40 exists and metrics.jsonl has gone past it (step 42), so the resume must
    # cut the record back to the checkpoint (the kill usually lands well before checkpoint 60).
    second = killed / "checkpoints" / "step-00000040" / "MANIFEST"
    metrics = killed / "metrics.jsonl"

    def past_checkpoint():
        return second.exists() and metrics.exists() and '"step":42,' in metrics.read_text()

    deadline = time.monotonic() + 60
    while not past_checkpoint() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (killed / "checkpoints" / "step-00000300").exists()

    r = run("train", *kill_run, "--out", killed, "--resume")
    assert r.returncode == 0, r.stderr
    assert "posenc: warning" not in r.stderr or "is incomplete (no MANIFEST)" in r.stderr, r.stderr
    assert (straight / "metrics.jsonl").read_bytes() == (killed / "metrics.jsonl").read_bytes()
    last = pathlib.Path("checkpoints") / "step-00000300"
    for name in CHECKPOINT_FILES:
        assert (straight / last / name).read_bytes() == (killed / last / name).read_bytes(), name
    # Throughput is timing, not reproducible, but has one line per report and no duplicates.
    steps = [json.loads(l)["step"] for l in (killed / "throughput.jsonl").read_text().splitlines()]
    assert steps == [json.loads(l)["step"] for l in (straight / "metrics.jsonl").read_text().splitlines()]


def test_corrupted_newest_checkpoint_is_reported_and_the_previous_used(tmp_path, rope_run):
    source, _ = rope_run
    out = tmp_path / "run"
    subprocess.run(["cp", "-r", source, out], check=True)
    model = out / "checkpoints" / "step-00000030" / "model.pt"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x10
    model.write_bytes(bytes(data))
    before = (out / "metrics.jsonl").read_bytes()

    r = run("eval", "--checkpoint", out, "--lengths", "8")
    assert r.returncode == 0
    assert r.stderr == ("posenc: warning: checkpoint step-00000030 is corrupted (model.pt: checksum mismatch); "
                        "evaluating step-00000020\n")
    assert r.stdout.startswith(f"checkpoint {out}/checkpoints/step-00000020: order with rope")

    r = run("train", *SMALL_RUN, "--encoding", "rope", "--out", out, "--resume")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == ("posenc: warning: checkpoint step-00000030 is corrupted (model.pt: checksum "
                                        "mismatch); resuming from step-00000020")
    assert "steps 21..30 of 30" in r.stdout
    assert (out / "metrics.jsonl").read_bytes() == before
    assert model.read_bytes() == (source / "checkpoints" / "step-00000030" / "model.pt").read_bytes()


def test_resume_refuses_another_configuration_and_fresh_runs_refuse_a_used_directory(rope_run):
    out, _ = rope_run
    r = run("train", *SMALL_RUN, "--encoding", "alibi", "--out", out, "--resume")
    one_error_line(r, 1, f"[checkpoint] {out}/checkpoints/step-00000030 was written for encoding 'rope', "
                         "this run uses 'alibi'")
    r = run("train", *SMALL_RUN, "--encoding", "rope", "--out", out)
    one_error_line(r, 2, f"[train] {out} already holds a run (metrics.jsonl or checkpoints); resume it or choose "
                         "another directory")
    r = run("train", *SMALL_RUN, "--encoding", "rope", "--out", out, "--resume")
    assert r.returncode == 0 and r.stdout == f"{out} is already at step 30 of 30; nothing to train\n"


# ---------------------------------------------------------------- eval


def test_eval_at_several_lengths(rope_run):
    out, _ = rope_run
    r = run("eval", "--checkpoint", out, "--lengths", "8,16,32", "--batches", "2", "--json")
    assert r.returncode == 0 and r.stderr == ""
    report = json.loads(r.stdout)
    assert report["checkpoint"] == f"{out}/checkpoints/step-00000030" and report["step"] == 30
    assert report["task"] == "order" and report["train_seq_len"] == 8
    assert [row["seq_len"] for row in report["lengths"]] == [8, 16, 32]
    for row in report["lengths"]:
        assert row["count"] == 16  # 2 batches of 8 examples
        assert 0.0 <= row["accuracy"] <= 1.0 and row["loss"] > 0
    text = run("eval", "--checkpoint", out / "checkpoints" / "step-00000020", "--batches", "1")
    assert text.returncode == 0
    rows = text.stdout.splitlines()
    assert rows[1].split() == ["seq_len", "loss", "accuracy", "count"]
    assert [row.split()[0] for row in rows[2:]] == ["8", "16", "32"]  # default: x1, x2, x4


def test_eval_names_the_learned_table_limit_and_goes_on(tmp_path):
    out = tmp_path / "run"
    train(out, *small_run(steps=10), "--encoding", "learned")
    r = run("eval", "--checkpoint", out, "--lengths", "8,12,6", "--batches", "1", "--json")
    assert r.returncode == 1
    assert r.stderr == ("posenc: eval at seq_len 12: [learned] position 8 is outside the table of 8 rows "
                        "(valid 0..7)\n")
    rows = json.loads(r.stdout)["lengths"]
    assert rows[1] == {"seq_len": 12, "error": "[learned] position 8 is outside the table of 8 rows (valid 0..7)"}
    assert rows[0]["count"] == 8 and rows[2]["count"] == 8


def eval_multiply_adds(lengths, batches, *, dim=16, layers=1, batch=8, head=2):
    """The encoder's napkin math, written out: per batch, each layer's projections (4 d^2) and
    FFN (2 d 4d) per token, q.k and p.v (2 d) per (query, key) pair, and the 2-wide head."""
    total = 0
    for t in lengths:
        tokens = batch * t
        per_layer = tokens * (4 * dim * dim + 2 * dim * 4 * dim) + batch * 2 * dim * t * t
        total += batches * (layers * per_layer + tokens * dim * head)
    return total


def test_eval_estimates_its_work_and_refuses_what_exceeds_the_limits(rope_run):
    out, _ = rope_run
    r = run("eval", "--checkpoint", out, "--lengths", "300000")
    work = eval_multiply_adds([300000], 8)
    seconds = work / 3e10
    assert 3600 < seconds < 7200  # "1 h N min", refused by the default 1 h bound
    memory = 4 * (8 * 300000 * (6 * 16 + 4 * 16) + 32 * 16 + 16 * 16 * 4 + 2 * 16 * 64 + 16 * 2) / 2**30
    one_error_line(r, 1, f"[eval] this needs about 1 h {round(seconds / 60) - 60} min ({work:.1e} multiply-adds at an "
                         f"assumed 3e+10 per second) and about {memory:.1f} GiB of memory (one batch of 8 sequences "
                         f"at seq_len 300000); the time limit is 1 h 0 min: pass --max-time "
                         f"{math.ceil(seconds / 60)}m to allow it, or --force")
    # A hundred million batches at the default lengths: tiny batches, endless work.
    r = run("eval", "--checkpoint", out, "--batches", "100000000")
    assert r.returncode == 1 and r.stdout == ""
    work = eval_multiply_adds([8, 16, 32], 100000000)
    assert r.stderr.startswith("posenc: [eval] this needs about ")
    assert f"({work:.1e} multiply-adds at an assumed 3e+10 per second)" in r.stderr
    assert "(one batch of 8 sequences at seq_len 32); the time limit is 1 h 0 min" in r.stderr
    assert r.stderr.endswith(f": pass --max-time {math.ceil(work / 3e10 / 60)}m to allow it, or --force\n")
    # The limits are options; --force runs anyway.
    r = run("eval", "--checkpoint", out, "--batches", "1", "--max-time", "0.00001s")
    assert r.returncode == 1 and "the time limit is 0.0 s (--max-time): pass --max-time 1m" in r.stderr
    r = run("eval", "--checkpoint", out, "--batches", "1", "--max-memory", "1K")
    assert r.returncode == 1 and r.stderr.startswith("posenc: [eval] this needs about ")
    assert "; 1.0 KiB is allowed by --max-memory: pass --max-memory 1M to allow it, or --force\n" in r.stderr
    assert run("eval", "--checkpoint", out, "--batches", "1", "--max-time", "0.00001s", "--force").returncode == 0
    for duration in ["2d", "0s", "-5m", "h", "10ms", "1e999", "1e308h", "20M"]:
        one_error_line(run("eval", "--checkpoint", out, "--max-time", duration), 2,
                       f"[eval] --max-time must be a duration such as 90s, 20m or 2h, got '{duration}'")


def test_eval_refuses_foreign_and_truncated_checkpoints(tmp_path, rope_run):
    source, _ = rope_run
    one_error_line(run("eval", "--checkpoint", tmp_path), 1,
                   f"[checkpoint] {tmp_path} is not a posenc run (no config.json)")
    foreign = tmp_path / "step-00000010"
    foreign.mkdir()
    (foreign / "model.pt").write_bytes(b"not a model")
    one_error_line(run("eval", "--checkpoint", foreign), 1,
                   f"[checkpoint] {foreign} is not a posenc checkpoint (no MANIFEST)")

    out = tmp_path / "run"
    subprocess.run(["cp", "-r", source, out], check=True)
    size = {}
    for step in ("00000010", "00000020", "00000030"):
        model = out / "checkpoints" / f"step-{step}" / "model.pt"
        size[step] = model.stat().st_size
        os.truncate(model, 100)
    one_error_line(run("eval", "--checkpoint", out / "checkpoints" / "step-00000030"), 1,
                   f"[checkpoint] {out}/checkpoints/step-00000030 is corrupted (model.pt: truncated to 100 of "
                   f"{size['00000030']} bytes)")
    r = run("eval", "--checkpoint", out)
    one_error_line(r, 1, f"[checkpoint] no valid checkpoint in {out}/checkpoints: " + ", ".join(
        f"step-{s} is corrupted (model.pt: truncated to 100 of {size[s]} bytes)"
        for s in ("00000030", "00000020", "00000010")))


# ---------------------------------------------------------------- encodings and bad input


def test_encodings_lists_every_name_with_point_and_parameters():
    r = run("encodings", "--json")
    assert r.returncode == 0 and r.stderr == ""
    entries = json.loads(r.stdout)
    assert [e["name"] for e in entries] == ENCODINGS
    assert set(PROMISED) <= set(ENCODINGS)
    points = {e["name"]: e["point"] for e in entries}
    assert points["fire"] == "logit bias" and points["dpb"] == "logit bias"
    assert points["rope"] == "query/key" and points["alibi"] == "logit bias"
    assert points["shaw"] == "relative vectors" and points["learned"] == "input"
    assert entries[ENCODINGS.index("t5")]["parameters"]["t5_num_buckets"].startswith("32 ")
    text = run("encodings")
    assert text.returncode == 0
    first_words = [line.split()[0] for line in text.stdout.splitlines()[1:] if not line.startswith(" ")]
    assert first_words[:len(ENCODINGS)] == ENCODINGS


@pytest.mark.parametrize("changes, message", [
    ({"encoding": "foo"}, f"[encoding] unknown encoding 'foo'; known: {KNOWN} (combine with '+')"),
    ({"encoding": "rope", "dim": 10, "heads": 4},
     "[encoding] dim must be divisible by num_heads, got dim 10 and num_heads 4"),
    ({"encoding": "rope", "dim": 10, "heads": 2}, "[encoding] rope needs an even head_dim, got 5"),
    ({"encoding": "alibi+t5"},
     "[encoding] 'alibi+t5' has two logit bias encodings (alibi, t5); use at most one per point"),
    ({"encoding": "rope", "steps": 0}, "[train] steps must be >= 1, got 0"),
    ({"encoding": "learned", "max_positions": 4}, "[train] max_positions must be >= seq_len (8), got 4"),
    ({"encoding": "rope", "attention": "flash"}, "[train] attention must be 'fused' or 'composed', got 'flash'"),
    ({"encoding": "alibi", "random_positions": 64},
     "[train] random_positions needs an input or query/key encoding (absolute or rotary), got 'alibi'"),
    ({"encoding": "learned+alibi", "random_positions": 64, "max_positions": 32},
     "[train] random_positions 64 needs max_positions >= 64 (rows of the learned table), got 32"),
    ({"encoding": "rope", "random_positions": 4}, "[train] random_positions must be 0 (off) or >= seq_len (8), got 4"),
])
def test_bad_training_arguments_exit_2_before_writing(tmp_path, changes, message):
    out = tmp_path / "run"
    r = run("train", *small_run(**changes), "--out", out)
    one_error_line(r, 2, message)
    assert not out.exists()


def test_random_positions_are_recorded_and_change_training_only(tmp_path):
    plain, randomized = tmp_path / "plain", tmp_path / "randomized"
    train(plain, *small_run(encoding="rope"))
    train(randomized, *small_run(encoding="rope", random_positions=64))
    config = json.loads((randomized / "config.json").read_text())
    assert config["random_positions"] == 64 and config["max_positions"] == 64
    assert json.loads((plain / "config.json").read_text())["random_positions"] == 0
    # Same seed, same data: only the positions differ, so the trajectories do.
    assert (plain / "metrics.jsonl").read_text() != (randomized / "metrics.jsonl").read_text()
    # Evaluation uses 0..T-1 (no draw): two evaluations agree exactly.
    a = run("eval", "--checkpoint", randomized, "--lengths", "8", "--json")
    b = run("eval", "--checkpoint", randomized, "--lengths", "8", "--json")
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["lengths"] == json.loads(b.stdout)["lengths"]


def test_layer_encodings_are_recorded_and_checked(tmp_path):
    out = tmp_path / "run"
    train(out, *small_run(task="lookback", encoding="rope", layers=3,
                          layer_encodings="rope:base=10000,rope:base=1000000,alibi"))
    assert json.loads((out / "config.json").read_text())["layer_encodings"] == \
        "rope:base=10000,rope:base=1000000,alibi"
    bad = tmp_path / "bad"
    r = run("train", *small_run(task="lookback", encoding="rope", layer_encodings="rope:base=x"), "--out", bad)
    one_error_line(r, 2, "[encoding] layer encoding 'rope:base=x': base must be a number, got 'x'")
    assert not bad.exists()


def test_unknown_task_and_missing_options_exit_2(tmp_path):
    r = run("train", "--task", "sort", "--encoding", "rope", "--out", tmp_path / "run")
    one_error_line(r, 2, "[task] unknown task 'sort'; known: order, span, lookback, copy, text, mlm, text-classify, "
                      "text-span")
    r = run("train", "--task", "order", "--out", tmp_path / "run")
    assert r.returncode == 2 and "--encoding is required" in r.stderr


INT64 = "-9223372036854775808..9223372036854775807"
UINT64 = "0..18446744073709551615"


@pytest.mark.parametrize("args, message", [
    # CLI11 alone would wrap -1 to 2^64 - 1 for the unsigned seed, and read 0x10 as sixteen.
    (["train", *SMALL_RUN, "--encoding", "rope", "--seed", "-1"],
     f"[train] --seed must be a decimal integer in {UINT64}, got '-1'"),
    (["train", *SMALL_RUN, "--encoding", "rope", "--steps", "0x10"],
     f"[train] --steps must be a decimal integer in {INT64}, got '0x10'"),
    (["train", *SMALL_RUN, "--encoding", "rope", "--batch", "99999999999999999999"],
     f"[train] --batch must be a decimal integer in {INT64}, got '99999999999999999999'"),
    (["eval", "--checkpoint", "missing", "--lengths", "8,0x10"],
     f"[eval] --lengths must be a decimal integer in {INT64}, got '0x10'"),
    (["eval", "--checkpoint", "missing", "--batches", "1.5"],
     f"[eval] --batches must be a decimal integer in {INT64}, got '1.5'"),
])
def test_integer_options_are_plain_decimal(tmp_path, args, message):
    r = run(*args, "--out", tmp_path / "run") if args[0] == "train" else run(*args, cwd=tmp_path)
    one_error_line(r, 2, message)
    assert list(tmp_path.iterdir()) == []


def test_leading_zeros_are_decimal(tmp_path):
    out = tmp_path / "run"
    train(out, *small_run(seq_len="010", steps="02", checkpoint_every=1, log_every=1), "--encoding", "rope")
    config = json.loads((out / "config.json").read_text())
    assert (config["seq_len"], config["steps"]) == (10, 2)  # not octal 8


def test_libtorch_allocation_failure_is_one_line_naming_the_command_and_size(tmp_path):
    # The token embedding [vocab, dim] = 10^9 x 16 float32 is 64 GB; under an 8 GiB address-space limit
    # libtorch's allocator fails with "[enforce fail at alloc_cpu.cpp:...] ... you tried to allocate
    # 64000000000 bytes ...".
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    r = run("train", *small_run(vocab_size=10 ** 9), "--encoding", "rope", "--out", tmp_path / "run",
            preexec_fn=limit_memory)
    one_error_line(r, 1, "[train] out of memory: needed 64.0 GB more")
