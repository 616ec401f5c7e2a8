"""posenc doctor says what a speed figure depends on, the benchmarks refuse a
ratio against netlib's reference BLAS, and training never starts more threads
than the process has cores.

The expectations come from outside posenc: the alternatives link Debian
resolves libblas.so.3 through, and the affinity mask Python reads. A run with
the reference BLAS forced (LD_LIBRARY_PATH to a link to it) shows both the
warning and the benchmarks' refusal whatever the machine has installed."""

import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
BIN = pathlib.Path(CLI).parent
REFERENCE_BLAS = pathlib.Path("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3")
SYSTEM_BLAS = pathlib.Path("/usr/lib/x86_64-linux-gnu/libblas.so.3")
TINY_RUN = ["--task", "order", "--encoding", "rope", "--layers", "1", "--dim", "16", "--heads", "2",
            "--seq-len", "8", "--batch", "4", "--steps", "2"]


def run(*args, env=None, **kwargs):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=None if env is None else {**os.environ, **env}, **kwargs)


def lines(stdout):
    """{'posenc': '...', 'torch': '...', ...}: each line's first word and the rest."""
    return {l.split()[0]: l.split(maxsplit=1)[1] for l in stdout.splitlines()}


def test_doctor_names_the_blas_the_cores_and_a_gemm_rate():
    r = run("doctor", "--seconds", "0.2")
    assert r.returncode == 0, r.stderr
    info = lines(r.stdout)
    assert list(info) == ["posenc", "torch", "cores", "BLAS", "GEMM"]
    assert re.fullmatch(r"\d+\.\d+\.\d+, kernels (native|portable) \(-march=\S+\): [A-Z0-9- ]+", info["posenc"])
    assert info["cores"] == f"{len(os.sched_getaffinity(0))} available to this process (CPU affinity)"
    resolved = os.path.realpath(SYSTEM_BLAS)
    assert info["BLAS"].endswith(": " + resolved)
    reference = resolved == str(REFERENCE_BLAS.resolve())
    assert info["BLAS"].startswith("reference BLAS (netlib)" if reference else "OpenBLAS")
    assert float(info["GEMM"].split()[0]) > 0
    # Both thread counts: OpenBLAS sizes its own team, which libtorch's count does not show.
    openblas = "" if reference else r", OpenBLAS \d+ threads"
    assert re.fullmatch(r"\d+\.\d GFLOP/s \(float32, 1024 x 1024 x 1024, 0\.2 s; libtorch \d+ threads" + openblas + r"\)",
                        info["GEMM"]), info["GEMM"]
    assert ("reference BLAS" in r.stderr) == reference


@pytest.fixture
def reference_blas(tmp_path):
    """LD_LIBRARY_PATH under which libtorch loads netlib's reference BLAS."""
    if not REFERENCE_BLAS.exists():
        pytest.fail(f"{REFERENCE_BLAS} missing: Debian's libblas3 comes with libtorch")
    (tmp_path / "libblas.so.3").symlink_to(REFERENCE_BLAS.resolve())
    return {"LD_LIBRARY_PATH": str(tmp_path)}


def test_doctor_warns_on_the_reference_blas(reference_blas):
    r = run("doctor", "--seconds", "0.1", env=reference_blas)
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout)["BLAS"] == f"reference BLAS (netlib): {REFERENCE_BLAS.resolve()}"
    assert r.stderr.startswith("posenc: warning: libtorch runs on netlib's reference BLAS")


def test_a_benchmark_refuses_a_ratio_against_the_reference_blas(reference_blas):
    r = subprocess.run([str(BIN / "bench_sinusoidal")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **reference_blas})
    assert r.returncode == 3
    assert r.stdout.splitlines()[-1].startswith("NO RATIO: libtorch runs on netlib's reference BLAS")
    assert "BM_" not in r.stdout  # nothing was timed


def test_doctor_refuses_a_bad_duration():
    r = run("doctor", "--seconds", "0")
    assert (r.returncode, r.stderr) == (2, "posenc: [doctor] seconds must be in (0, 60], got 0\n")


def test_train_refuses_more_threads_than_cores(tmp_path):
    cores = len(os.sched_getaffinity(0))
    for threads in (cores + 1, 10000):
        r = run("train", *TINY_RUN, "--threads", threads, "--out", tmp_path / "run")
        assert (r.returncode, r.stderr) == (
            2, f"posenc: [train] threads must be in 1..{cores} (the cores available to this process), "
               f"got {threads}\n")


def test_train_defaults_to_the_cores_of_its_affinity_mask(tmp_path):
    first = sorted(os.sched_getaffinity(0))[0]
    r = run("train", *TINY_RUN, "--out", tmp_path / "run", preexec_fn=lambda: os.sched_setaffinity(0, {first}))
    assert r.returncode == 0, r.stderr
    assert '"threads": 1,' in (tmp_path / "run" / "config.json").read_text()
