"""The posenc executable keeps the memory a training step frees for the next
step (docs/training.md, "Memory reuse"), unless the user set glibc's malloc
tunables themselves.

Measured from outside: the minor page faults of the child process
(getrusage), which count every page the kernel had to hand it again. glibc's
defaults give those pages back after each step (trimming the heap top,
unmapping large blocks), so the same run faults many times more."""

import os
import pathlib
import resource
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
RUN = ["train", "--task", "order", "--encoding", "rope", "--dim", "64", "--seq-len", "64", "--batch", "32",
       "--steps", "120", "--threads", "1"]
# A malloc tunable at its default value that leaves glibc's dynamic thresholds alone: posenc must then
# leave malloc as glibc has it.
GLIBC_DEFAULTS = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"}


def minor_faults(out, env_extra):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    r = subprocess.run([CLI, *RUN, "--out", str(out)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **env_extra})
    assert r.returncode == 0, r.stderr
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


def test_train_reuses_freed_memory_unless_malloc_is_tuned(tmp_path):
    kept = minor_faults(tmp_path / "kept", {})
    returned = minor_faults(tmp_path / "returned", GLIBC_DEFAULTS)
    # Measured 27k against 246k faults (a binary without the policy: 237k against 246k); the start-up,
    # about 25k (loading libtorch), is in both.
    assert returned > 3 * kept, (kept, returned)
    # Memory policy never changes what is computed.
    assert (tmp_path / "kept" / "metrics.jsonl").read_text() == (tmp_path / "returned" / "metrics.jsonl").read_text()
