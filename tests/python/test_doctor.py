"""posenc doctor says what a speed figure depends on (OpenBLAS's kernel set
too), the benchmarks refuse a ratio against netlib's reference BLAS and run
their baseline on OpenBLAS's AVX-512 kernels where the CPU has AVX-512, and training never starts more threads
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


THREADS_NOTE = re.compile(r"posenc: note: libtorch runs (\d+) threads? on the (\d+) cores available to this process "
                          r"\(its default: the physical cores it detects\), and posenc's kernels with it; "
                          r"torch\.set_num_threads\(\2\), at::set_num_threads\(\2\) or OMP_NUM_THREADS=\2 uses them "
                          r"all \(posenc train and experiment take --threads, default \2\)\.\n")


def without_threads_note(stderr):
    """doctor's stderr less its note on libtorch's thread count, which depends on the machine (tested below)."""
    return THREADS_NOTE.sub("", stderr, count=1)


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


def test_doctor_notes_when_libtorch_leaves_cores_unused():
    """libtorch's default thread count is the physical cores it detects, which some virtual machines report as
    fewer than the affinity mask allows; doctor says so, and how to use them all, exactly when it happens."""
    cores = len(os.sched_getaffinity(0))
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    r = subprocess.run([CLI, "doctor", "--seconds", "0.1"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    threads = int(re.match(r"\S+, (\d+) threads; ", lines(r.stdout)["torch"]).group(1))
    note = THREADS_NOTE.search(r.stderr)
    assert (note is not None) == (threads < cores), r.stderr
    if note:
        assert (int(note.group(1)), int(note.group(2))) == (threads, cores)
    # Asked for every core, libtorch and posenc's kernels take them, and the note goes.
    r = subprocess.run([CLI, "doctor", "--seconds", "0.1"], capture_output=True, text=True, timeout=120,
                       env={**env, "OMP_NUM_THREADS": str(cores)})
    assert lines(r.stdout)["torch"].endswith(f", {cores} threads; posenc kernels {cores} OpenMP threads")
    assert THREADS_NOTE.search(r.stderr) is None


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
    assert without_threads_note(r.stderr).startswith("posenc: warning: libtorch runs on netlib's reference BLAS")


def test_a_benchmark_refuses_a_ratio_against_the_reference_blas(reference_blas):
    r = subprocess.run([str(BIN / "bench_sinusoidal")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **reference_blas})
    assert r.returncode == 3
    assert r.stdout.splitlines()[-1].startswith("NO RATIO: libtorch runs on netlib's reference BLAS")
    assert "BM_" not in r.stdout  # nothing was timed


def cpu_has_avx512():
    """From the kernel's own flags, not from posenc."""
    flags = next(l for l in pathlib.Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("flags"))
    return "avx512f" in flags.split()


@pytest.fixture
def openblas():
    if "OpenBLAS" not in lines(run("doctor", "--seconds", "0.1").stdout)["BLAS"]:
        pytest.skip("libtorch does not run on OpenBLAS here")


def test_doctor_names_openblas_kernels_and_notes_unused_avx512(openblas):
    # OPENBLAS_CORETYPE is OpenBLAS's own switch: it names the kernels doctor must report.
    r = run("doctor", "--seconds", "0.1", env={"OPENBLAS_CORETYPE": "Haswell"})
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"OpenBLAS \((OpenMP|pthread|serial)\), Haswell kernels: \S+", lines(r.stdout)["BLAS"])
    note = ("posenc: note: OpenBLAS runs its Haswell kernels (no AVX-512) on this AVX-512 CPU, as "
            "OPENBLAS_CORETYPE=Haswell in the environment asks; OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 "
            "kernels (compare: OPENBLAS_CORETYPE=SkylakeX posenc doctor; results differ in the last bits). The "
            "benchmarks run their eager baselines on them.\n")
    assert without_threads_note(r.stderr) == (note if cpu_has_avx512() else "")
    if cpu_has_avx512():
        r = run("doctor", "--seconds", "0.1", env={"OPENBLAS_CORETYPE": "SkylakeX"})
        assert ", SkylakeX kernels: " in lines(r.stdout)["BLAS"]
        assert without_threads_note(r.stderr) == ""


SMALL_RUN = ["--task", "order", "--encoding", "rope", "--layers", "1", "--dim", "32", "--heads", "2",
             "--seq-len", "16", "--batch", "8", "--steps", "12"]
AVX512_CORES = ("SkylakeX", "Cooperlake", "SapphireRapids")
SWITCHED = re.compile(r"posenc: note: OpenBLAS chose its (\w+) kernels \(no AVX-512\) on this AVX-512 CPU; posenc "
                      r"switched to its SkylakeX kernels \(OPENBLAS_CORETYPE=SkylakeX\), as train, eval and experiment "
                      r"do \(set OPENBLAS_CORETYPE to keep another choice\)\.\n")


def test_doctor_and_training_run_on_the_avx512_kernels_unless_the_user_chose_others(openblas, tmp_path):
    """An OpenBLAS that does not know the CPU falls back to kernels without AVX-512 (Debian's 0.3.21 takes
    Prescott's on some virtualized Xeons, a quarter of the GEMM rate): doctor, train, eval and experiment then
    switch to OPENBLAS_CORETYPE=SkylakeX, in the process where OpenBLAS allows it. A value the user set is kept
    (the Haswell test above). Where OpenBLAS knows the CPU, nothing switches and nothing is printed."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "POSENC_OPENBLAS_CHOSE")}
    r = subprocess.run([CLI, "doctor", "--seconds", "0.1"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    r.stderr = without_threads_note(r.stderr)
    core = re.fullmatch(r"OpenBLAS \((?:OpenMP|pthread|serial)\), (\w+) kernels: \S+", lines(r.stdout)["BLAS"])
    assert core, lines(r.stdout)["BLAS"]
    if not cpu_has_avx512():
        assert r.stderr == ""
        return
    assert core.group(1) in AVX512_CORES
    switched = SWITCHED.fullmatch(r.stderr)
    assert r.stderr == "" or (switched and core.group(1) == "SkylakeX" and switched.group(1) not in AVX512_CORES), \
        r.stderr
    # A switched run is the run a process started on those kernels makes, to the byte (the kernels change the
    # last bits, so this also shows the switch took effect where it happened).
    for name, extra in (("unset", {}), ("pinned", {"OPENBLAS_CORETYPE": core.group(1)})):
        t = subprocess.run([CLI, "train", *SMALL_RUN, "--out", tmp_path / name],
                           capture_output=True, text=True, timeout=300, env={**env, **extra})
        assert t.returncode == 0, t.stderr
    for f in ("metrics.jsonl", "checkpoints/step-00000012/model.pt", "checkpoints/step-00000012/optimizer.pt"):
        assert (tmp_path / "unset" / f).read_bytes() == (tmp_path / "pinned" / f).read_bytes(), f
    # A value the user set is left alone, even one without AVX-512.
    pinned = subprocess.run([CLI, "doctor", "--seconds", "0.1"], capture_output=True, text=True, timeout=120,
                            env={**env, "OPENBLAS_CORETYPE": "Prescott"})
    assert ", Prescott kernels: " in lines(pinned.stdout)["BLAS"] and "switched" not in pinned.stderr


def test_a_benchmark_runs_its_baseline_on_the_avx512_kernels(openblas):
    """posenc's kernels use AVX-512 where the CPU has it, so the eager baseline must too, whatever
    OPENBLAS_CORETYPE the environment pins."""
    def baseline_lines(coretype):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        r = subprocess.run([str(BIN / "bench_sinusoidal"), "--benchmark_filter=^$"], capture_output=True,
                           text=True, timeout=300, env={**env, "OPENBLAS_CORETYPE": coretype})
        return [l for l in r.stdout.splitlines() if l.startswith("baseline BLAS:")]

    pinned = baseline_lines("Haswell")
    if not cpu_has_avx512():
        assert len(pinned) == 1 and ", Haswell kernels (" in pinned[0], pinned
        return
    assert len(pinned) == 2, pinned
    assert pinned[0] == ("baseline BLAS: OpenBLAS took its Haswell kernels (no AVX-512) on this AVX-512 CPU, as "
                         "OPENBLAS_CORETYPE=Haswell asked; starting again with OPENBLAS_CORETYPE=SkylakeX")
    assert ", SkylakeX kernels (" in pinned[1]
    already = baseline_lines("SkylakeX")
    assert len(already) == 1 and ", SkylakeX kernels (" in already[0], already


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
