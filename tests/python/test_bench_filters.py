"""A benchmark's ratios need both of their sides timed in the same run: a
--benchmark_filter that selects nothing, or one side only, ends the run with
a one-line error (exit 2) before any paired rounds, never with PASS for
nothing measured."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))).parent


def bench(name, *args):
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name, error", [
    ("bench_attention", "error: --benchmark_filter selected no family of this benchmark\n"),
    ("bench_attention_backward", "error: --benchmark_filter selected no family of this benchmark\n"),
    ("bench_relative", "error: benchmark run/posenc_logits did not run: its ratio needs both sides measured in the "
                       "same run; widen --benchmark_filter or leave it out\n"),
])
def test_a_filter_that_selects_nothing_is_an_error(name, error):
    r = bench(name, "--benchmark_filter=^$")
    # Google Benchmark's own lines first ("Failed to match any benchmarks ..."), then ours.
    assert (r.returncode, r.stderr.splitlines(keepends=True)[-1]) == (2, error), r.stdout[-2000:]
    assert "PASS" not in r.stdout


def test_a_filter_that_selects_one_side_stops_before_the_paired_rounds():
    r = bench("bench_attention", "--benchmark_filter=run/ours_none/")
    # Google Benchmark's context (machine, caches) first, then ours.
    assert (r.returncode, r.stderr.splitlines(keepends=True)[-1]) == (2, "error: benchmark run/eager_none did not run: its ratio needs both sides "
                                           "measured in the same run; widen --benchmark_filter or leave it out\n")
    assert r.stdout.rstrip().endswith("fastest | paired median:")  # nothing reported after the header
