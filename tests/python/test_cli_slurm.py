"""`posenc experiment run SUITE --slurm` (docs/experiments.md, "On a cluster"):
the runs not finished yet as one Slurm job array plus a report job.

Without Slurm: the scripts' text, the sbatch calls, job.json and every refusal,
with a fake `sbatch` (and `squeue`) on PATH; the array script is then run by
hand, task by task, as Slurm would. With Slurm: a real single-node cluster on
localhost (Debian's slurm-wlm and munge, daemons started here, never through
systemd), whose results must equal a local run's to the last bit.
The binary comes from $POSENC_CLI."""

import json
import os
import pathlib
import shutil
import socket
import stat
import subprocess
import tempfile
import time

import pytest

from test_cli_corpus import CLI, tree  # noqa: F401  (the package-tree fixture)

SELF = os.path.realpath(CLI)  # what the scripts run: posenc's own /proc/self/exe


def posenc(*args, env=None, cwd=None):
    if not os.path.exists(CLI):
        pytest.fail(f"{CLI} not found: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def suite_args(tree_root, out, *extra):
    return ("experiment", "run", "extrapolation", "--quick", "--out", out, "--root", tree_root, "--vocab-size", 100,
            "--threads", 1, *extra)


def with_path(*dirs):
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(map(str, dirs))
    return env


def fake_tool(bin_dir, name, body):
    """A /bin/sh script named `name` in bin_dir. Its PATH is ours (only fakes): builtins and absolute paths only."""
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return tool


def recording_sbatch(bin_dir, log_dir):
    """Writes its arguments to log_dir/call<N> (one a line) and prints job id 4241 + N, as --parsable does."""
    return fake_tool(bin_dir, "sbatch", f"""n=0
[ -f {log_dir}/count ] && read n < {log_dir}/count
n=$((n + 1))
echo "$n" > {log_dir}/count
printf '%s\\n' "$@" > {log_dir}/call$n
echo "$((4241 + n));cluster"
""")


def calls(log_dir):
    return [(log_dir / f"call{n}").read_text().splitlines() for n in range(1, 10) if (log_dir / f"call{n}").exists()]


def expected_array_script(out, workdir, runs, extra_directives, command):
    return ("#!/bin/bash\n"
            "# posenc experiment run extrapolation --slurm: one array task per run not finished at submission;\n"
            "# task i runs runs[i], the process `posenc experiment run --jobs N` would start for it.\n"
            "#SBATCH --job-name=posenc-extrapolation\n"
            f"#SBATCH --array=0-{len(runs) - 1}\n"
            f"#SBATCH --output={out}/slurm/%A_%a.out\n"
            "#SBATCH --cpus-per-task=1\n"
            f"#SBATCH --chdir={workdir}\n"
            + "".join(f"#SBATCH {d}\n" for d in extra_directives) +
            "set -euo pipefail\n"
            f"runs=({' '.join(runs)})\n"
            f"exec {' '.join(command)} --only \"${{runs[$SLURM_ARRAY_TASK_ID]}}\"\n")


def test_scripts_submission_and_resumption_with_a_fake_sbatch(tree, tmp_path):  # noqa: F811
    root, _ = tree
    out, log, fake_bin = tmp_path / "suite", tmp_path / "log", tmp_path / "bin"
    log.mkdir()
    recording_sbatch(fake_bin, log)
    env = with_path(fake_bin)
    # One run finished before: the array gets only the other.
    r = posenc(*suite_args(root, out, "--encodings", "none"))
    assert r.returncode == 0, r.stderr
    finished = (out / "runs" / "none-s0" / "result.json").read_text()

    slurm = ("--slurm", "--partition", "debug", "--time", "00:10:00", "--sbatch-arg=--mem=1G",
             "--sbatch-arg=--comment=posenc test")
    r = posenc(*suite_args(root, out, "--encodings", "none,rope", *slurm), env=env, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.splitlines() == [
        f"submitted Slurm job array 4242: 1 runs; when it finishes: posenc experiment report {out}",
        f"report job 4243 writes the summary after it ({out}/slurm/report.out)"]
    assert calls(log) == [["--parsable", f"{out}/slurm/array.sh"],
                          ["--parsable", "--dependency=afterany:4242", f"{out}/slurm/report.sh"]]
    directives = ["--partition=debug", "--time=00:10:00", "--mem=1G", '"--comment=posenc test"']
    # The argv a --jobs child gets, posenc's absolute path first.
    command = [SELF, "experiment", "run", "extrapolation", "--out", str(out), "--threads", "1", "--root", str(root),
               "--quick", "--vocab-size", "100", "--encodings", "none,rope"]
    assert (out / "slurm" / "array.sh").read_text() == expected_array_script(out, tmp_path, ["rope-s0"], directives,
                                                                             command)
    assert (out / "slurm" / "report.sh").read_text() == (
        "#!/bin/bash\n"
        "# posenc experiment run extrapolation --slurm: the summary once the array has ended\n"
        "# (submitted with --dependency=afterany:ARRAY; runs that failed are left out of it).\n"
        "#SBATCH --job-name=posenc-extrapolation-report\n"
        f"#SBATCH --output={out}/slurm/report.out\n"
        "#SBATCH --cpus-per-task=1\n"
        f"#SBATCH --chdir={tmp_path}\n"
        + "".join(f"#SBATCH {d}\n" for d in directives) +
        "set -euo pipefail\n"
        f"exec {SELF} experiment report {out}\n")
    job = json.loads((out / "slurm" / "job.json").read_text())
    assert time.strptime(job.pop("submitted"), "%Y-%m-%dT%H:%M:%SZ")
    assert job == {"job_id": "4242", "runs": ["rope-s0"], "script": f"{out}/slurm/array.sh",
                   "report_job_id": "4243", "report_script": f"{out}/slurm/report.sh"}

    # While squeue lists that array, a second submission would train rope-s0 twice at once.
    fake_tool(fake_bin, "squeue", 'echo "4242_[0]"\n')
    r = posenc(*suite_args(root, out, "--encodings", "none,rope", "--slurm"), env=env)
    assert (r.returncode, r.stderr) == (
        1, f"posenc: [experiment] {out}/slurm/job.json: Slurm job array 4242 is still queued or running (squeue): "
           "wait for it or scancel it, then submit again\n")
    (fake_bin / "squeue").unlink()

    # The scripts as Slurm runs them: task 0 trains rope-s0 beside the finished run, the report sums up both.
    env_task = dict(os.environ, SLURM_ARRAY_TASK_ID="0")
    task = subprocess.run(["bash", out / "slurm" / "array.sh"], capture_output=True, text=True, env=env_task,
                          cwd="/", timeout=300)
    assert task.returncode == 0, task.stderr
    assert (out / "runs" / "none-s0" / "result.json").read_text() == finished
    report = subprocess.run(["bash", out / "slurm" / "report.sh"], capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"] == 2 and [row["encoding"] for row in summary["rows"]] == \
        ["none", "rope", "rope+linear", "rope+yarn"]

    # Everything finished: nothing is submitted, the summary is written as without --slurm.
    r = posenc(*suite_args(root, out, "--encodings", "none,rope", "--slurm"), env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "nothing to submit to Slurm: all 2 runs are finished"
    assert sum("done before" in line for line in lines) == 2 and len(calls(log)) == 2
    assert json.loads((out / "summary.json").read_text()) == summary


def test_refusals_and_sbatch_failures(tree, tmp_path):  # noqa: F811
    root, _ = tree
    out = tmp_path / "suite"
    empty_bin = tmp_path / "empty"
    empty_bin.mkdir()
    # Checked before the corpus step: nothing is written.
    r = posenc(*suite_args(root, out, "--slurm"), env=with_path(empty_bin))
    assert (r.returncode, r.stdout, r.stderr) == (
        1, "", "posenc: [experiment] --slurm needs sbatch on PATH (Debian: apt-get install slurm-client), not found\n")
    assert not out.exists()

    refusals = {
        ("--slurm", "--jobs", 2):
            "--slurm runs each run as an array task: --jobs must be 1 with it, got 2",
        ("--slurm", "--only", "rope-s0"):
            "--slurm submits the whole suite: --only cannot go with it, got 'rope-s0'",
        ("--partition", "debug"):
            "--partition, --time and --sbatch-arg go with --slurm",
        ("--slurm", "--time", "1h"):
            "--time must be a Slurm time limit such as 04:00:00, 90 (minutes) or 1-12:00:00, got '1h'",
        ("--slurm", "--partition", "a b"):
            "--partition must be a Slurm partition name, got 'a b'",
        ("--slurm", "--sbatch-arg", "mem=4G"):
            "--sbatch-arg must be one sbatch option such as --sbatch-arg=--mem=4G, got 'mem=4G'",
        ("--slurm", "--sbatch-arg=--array=0-1"):
            "--sbatch-arg cannot set --array: posenc sets it to the runs not finished yet, got '--array=0-1'",
    }
    fake_bin = tmp_path / "bin"
    recording_sbatch(fake_bin, tmp_path)
    for extra, message in refusals.items():
        r = posenc(*suite_args(root, out, *extra), env=with_path(fake_bin))
        assert (r.returncode, r.stderr) == (2, f"posenc: [experiment] {message}\n"), extra
    assert not out.exists() and not (tmp_path / "count").exists()

    # sbatch refuses (no controller): its first stderr line, exit status 1; a finished run is kept.
    assert posenc(*suite_args(root, out, "--encodings", "none")).returncode == 0
    finished = (out / "runs" / "none-s0" / "result.json").read_text()
    failing_bin = tmp_path / "failing"
    fake_tool(failing_bin, "sbatch", "echo 'sbatch: error: Batch job submission failed: Unable to contact slurm "
                                     "controller (connect failure)' >&2\necho 'second line' >&2\nexit 1\n")
    r = posenc(*suite_args(root, out, "--encodings", "none,rope", "--slurm"), env=with_path(failing_bin))
    assert (r.returncode, r.stderr) == (
        1, "posenc: [experiment] sbatch failed (exit 1): sbatch: error: Batch job submission failed: Unable to "
           "contact slurm controller (connect failure)\n")
    assert (out / "runs" / "none-s0" / "result.json").read_text() == finished
    assert not (out / "slurm" / "job.json").exists()


# --- a real Slurm cluster of one node on localhost ---------------------------------------------------------------

SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
SLURM_TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 1024


def slurm_conf(d, cpus):
    """One controller and one node, both this host; munge through our own socket; no accounting, no cgroups."""
    ctld_port = free_port()
    slurmd_port = free_port()
    while slurmd_port == ctld_port:
        slurmd_port = free_port()
    return f"""ClusterName=posenctest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={max(1, memory_mib() // 2)} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def logs(d):
    text = ""
    for name in ("munged.err", "slurmctld.log", "slurmd.log"):
        p = d / name
        if p.exists():
            text += f"--- {name} (last lines)\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:]) + "\n"
    return text


@pytest.fixture
def slurm_cluster():
    """SLURM_CONF's environment for a cluster running until the test ends (daemons killed even on failure)."""
    missing = [t for t in SLURM_TOOLS if shutil.which(t, path=SBIN) is None]
    if missing:
        pytest.skip(f"Slurm or munge not installed (no {', '.join(missing)}): apt-get install slurm-wlm munge "
                    "(bash scripts/setup.sh)")
    if os.geteuid() != 0:
        pytest.skip("the localhost Slurm cluster runs its daemons as root (SlurmUser=root); run the tests as root")
    # Short: munge's socket path must fit in sun_path (108 bytes).
    d = pathlib.Path(tempfile.mkdtemp(prefix="posenc-slurm-"))
    daemons = []
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"), PATH=SBIN)
    try:
        for sub in ("state", "spool", "munge", "key"):
            (d / sub).mkdir()
        (d / "key").chmod(0o700)
        key = d / "key" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        (d / "slurm.conf").write_text(slurm_conf(d, len(os.sched_getaffinity(0))))
        with open(d / "munged.err", "w") as err:
            daemons.append(subprocess.Popen(
                [shutil.which("munged", path=SBIN), "--foreground", "--force", f"--key-file={key}",
                 f"--socket={d}/munge/munge.socket", f"--pid-file={d}/munge/munged.pid",
                 f"--seed-file={d}/munge/munged.seed", f"--log-file={d}/munge/munged.log"],
                stdout=subprocess.DEVNULL, stderr=err, env=env))
        deadline = time.monotonic() + 20
        while not (d / "munge" / "munge.socket").exists():
            assert daemons[0].poll() is None and time.monotonic() < deadline, "munged did not start\n" + logs(d)
            time.sleep(0.1)
        for daemon in (["slurmctld", "-D"], ["slurmd", "-D", "-N", "localhost"]):
            daemons.append(subprocess.Popen([shutil.which(daemon[0], path=SBIN), *daemon[1:]],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        deadline = time.monotonic() + 60
        while True:
            state = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%t"], capture_output=True,
                                   text=True, env=env, timeout=30).stdout.strip()
            if state == "idle":
                break
            assert all(p.poll() is None for p in daemons), "a Slurm daemon ended\n" + logs(d)
            assert time.monotonic() < deadline, f"the node is not idle after 60 s ({state!r})\n" + logs(d)
            time.sleep(0.5)
        yield env, d
    finally:
        # Jobs first (their slurmstepd outlives slurmd), then the daemons, newest first.
        if len(daemons) >= 2 and daemons[1].poll() is None:
            subprocess.run(["scancel", "--user", "root"], capture_output=True, env=env, timeout=30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and subprocess.run(
                    ["squeue", "--noheader"], capture_output=True, text=True, env=env, timeout=30).stdout.strip():
                time.sleep(0.5)
        for p in reversed(daemons):
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)


def test_a_real_slurm_array_equals_a_local_run(slurm_cluster, tree, tmp_path):  # noqa: F811
    env, d = slurm_cluster
    root, _ = tree
    on_slurm, local = tmp_path / "slurm", tmp_path / "local"
    r = posenc(*suite_args(root, on_slurm, "--slurm", "--time", "00:10:00"), env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr + logs(d)
    job = json.loads((on_slurm / "slurm" / "job.json").read_text())
    assert job["runs"] == ["none-s0", "learned-s0", "rope-s0", "alibi-s0"] and job["report_job_id"]
    assert f"submitted Slurm job array {job['job_id']}: 4 runs; when it finishes: posenc experiment report " \
           f"{on_slurm}" in r.stdout
    # The local reference trains meanwhile (results are bit-reproducible per thread count, whatever the load).
    reference = subprocess.Popen([CLI, *map(str, suite_args(root, local))], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while subprocess.run(["squeue", "--noheader", "--format", "%i %T %r"], capture_output=True, text=True,
                             env=env, timeout=30).stdout.strip():
            assert time.monotonic() < deadline, "the job array did not finish in 300 s\n" + logs(d)
            time.sleep(1)
        _, reference_err = reference.communicate(timeout=300)
    finally:
        if reference.poll() is None:
            reference.kill()
            reference.wait()
    assert reference.returncode == 0, reference_err
    for task in range(4):
        log = on_slurm / "slurm" / f"{job['job_id']}_{task}.out"
        assert log.exists(), logs(d)
    for name in job["runs"]:
        assert (on_slurm / "runs" / name / "result.json").exists(), \
            (on_slurm / "slurm" / f"{job['job_id']}_{job['runs'].index(name)}.out").read_text()
    # The report job ran after the array and wrote the summary; `posenc experiment report` writes the same.
    assert (on_slurm / "summary.json").exists(), (on_slurm / "slurm" / "report.out").read_text()
    by_report_job = json.loads((on_slurm / "summary.json").read_text())
    report = posenc("experiment", "report", on_slurm)
    assert report.returncode == 0, report.stderr
    summary = json.loads((on_slurm / "summary.json").read_text())
    assert summary == by_report_job and summary["runs"] == 4
    # Every number as the local run wrote it (JSON equality: exact floats).
    assert summary == json.loads((local / "summary.json").read_text())
    for name in job["runs"]:
        a = json.loads((on_slurm / "runs" / name / "result.json").read_text())
        b = json.loads((local / "runs" / name / "result.json").read_text())
        assert (a["lengths"], a["extensions"]) == (b["lengths"], b["extensions"]), name
