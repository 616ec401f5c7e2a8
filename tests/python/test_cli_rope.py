"""`posenc table rope`, run as a subprocess.

The written table must be [N, D] float32 with cos(p * w_i) * a in columns
0 .. D/2-1 and sin(p * w_i) * a in D/2 .. D-1 (a = the scaling's attention
factor). The float64 frequencies come from rope_references.py (the Hugging
Face transformers formulas, modeling_rope_utils.py, written plainly), not
from our C++.
Bad input must give one line on stderr, exit code 2 and no file. The binary
comes from $POSENC_CLI, default <repo>/build/bin/posenc.
"""

import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

import rope_references as ref

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

# rope.h promises float32 tables within a few float32 ulps of the exact value
# (exact precision); 5e-7 is ~4 ulps of 1, scaled by the attention factor.
# The float64 references are exact to ~1e-11 at these positions.
EXACT_ATOL = 5e-7


def run(*args, cwd=None):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def rope_table(tmp_path, *args, name="t.npy"):
    """Runs `posenc table rope ARGS --out tmp/NAME` and loads the result."""
    out = tmp_path / name
    r = run("table", "rope", *args, "--out", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    a = np.load(out)
    assert a.dtype == np.float32
    return a


def csv_list(values):
    return ",".join(repr(float(v)) for v in values)


# ---------------------------------------------------------------- references (HF, float64)

def default_inv_freq(dim, base):
    return np.asarray(ref.default_inv_freq(dim, base))


def table_ref(positions, inv_freq, attention_factor=1.0):
    inv_freq = np.asarray(inv_freq, dtype=np.float64)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return attention_factor * np.concatenate([np.cos(angle), np.sin(angle)], axis=1)


def check(a, positions, inv_freq, attention_factor=1.0):
    # inv_freq, attention_factor: as the rope_references functions return them
    assert a.shape == (len(positions), 2 * len(inv_freq))
    np.testing.assert_allclose(a, table_ref(positions, inv_freq, attention_factor), rtol=0,
                               atol=EXACT_ATOL * attention_factor)


# ---------------------------------------------------------------- tables

def test_default(tmp_path):
    a = rope_table(tmp_path, "--positions", 300, "--dim", 64)
    check(a, range(300), default_inv_freq(64, 10000.0))
    # Row 0 is cos = 1, sin = 0 exactly.
    np.testing.assert_array_equal(a[0], np.r_[np.ones(32), np.zeros(32)])


def test_start_and_base(tmp_path):
    a = rope_table(tmp_path, "--positions", 130, "--dim", 128, "--start", -40, "--base", 500000)
    check(a, range(-40, 90), default_inv_freq(128, 500000.0))


def test_far_positions_exact_and_fp32(tmp_path):
    start = 2 ** 24 - 100
    positions = range(start, start + 100)
    exact = rope_table(tmp_path, "--positions", 100, "--dim", 32, "--start", start)
    check(exact, positions, default_inv_freq(32, 10000.0))
    fp32 = rope_table(tmp_path, "--positions", 100, "--dim", 32, "--start", start, "--precision", "fp32")
    # The common float32 formula: float32 omega times float32 p, rounded to float32.
    omega32 = default_inv_freq(32, 10000.0).astype(np.float32)
    angle = (np.asarray(positions, dtype=np.float32)[:, None] * omega32).astype(np.float64)
    np.testing.assert_allclose(fp32, np.concatenate([np.cos(angle), np.sin(angle)], axis=1), rtol=0,
                               atol=EXACT_ATOL)
    # ... whose angles are off by whole radians this far out.
    assert np.abs(fp32.astype(np.float64) - table_ref(positions, default_inv_freq(32, 10000.0))).max() > 0.5


@pytest.mark.parametrize("factor", [2.0, 8.0])
def test_linear(tmp_path, factor):
    a = rope_table(tmp_path, "--positions", 200, "--dim", 64, "--scaling", "linear", "--factor", factor)
    check(a, range(200), *ref.hf_linear(64, 10000.0, factor))


def test_ntk(tmp_path):
    a = rope_table(tmp_path, "--positions", 200, "--dim", 64, "--scaling", "ntk", "--factor", 4)
    check(a, range(200), *ref.hf_ntk(64, 10000.0, 4.0))


@pytest.mark.parametrize("seq_len", [None, 100, 512, 513, 2048])
def test_dynamic_regimes(tmp_path, seq_len):
    extra = [] if seq_len is None else ["--seq-len", seq_len]
    a = rope_table(tmp_path, "--positions", 160, "--dim", 64, "--scaling", "dynamic", "--factor", 2,
                   "--original-max-position-embeddings", 512, *extra)
    check(a, range(160), *ref.hf_dynamic(64, 10000.0, 2.0, 512, seq_len))
    if seq_len is None or seq_len <= 512:  # the default spectrum up to L0
        check(a, range(160), default_inv_freq(64, 10000.0))


def test_default_seq_len_is_the_table_length(tmp_path):
    # Without --seq-len the regime is that of max position + 1, as Hugging Face picks it.
    a = rope_table(tmp_path, "--positions", 1000, "--dim", 32, "--scaling", "dynamic", "--factor", 2,
                   "--original-max-position-embeddings", 512)
    check(a, range(1000), *ref.hf_dynamic(32, 10000.0, 2.0, 512, seq_len=1000))
    short, long = [1.0] * 8, [4.0] * 8
    longrope = ["--scaling", "longrope", "--short-factor", csv_list(short), "--long-factor", csv_list(long),
                "--original-max-position-embeddings", 4096, "--factor", 1]
    a = rope_table(tmp_path, "--positions", 10, "--dim", 16, "--start", 4087, *longrope)  # last position 4096
    check(a, range(4087, 4097), default_inv_freq(16, 10000.0) / 4.0)
    a = rope_table(tmp_path, "--positions", 10, "--dim", 16, "--start", 4086, *longrope)  # last position 4095
    check(a, range(4086, 4096), default_inv_freq(16, 10000.0))
    a = rope_table(tmp_path, "--positions", 10, "--dim", 16, "--start", 4087, *longrope, "--seq-len", 100)
    check(a, range(4087, 4097), default_inv_freq(16, 10000.0))


YARN_CASES = {
    "qwen2.5": (dict(factor=4.0, original=32768), ["--factor", 4, "--original-max-position-embeddings", 32768]),
    "deepseek-v2": (dict(factor=40.0, original=4096, mscale=0.707, mscale_all_dim=0.707, beta_fast=32.0,
                         beta_slow=1.0),
                    ["--factor", 40, "--original-max-position-embeddings", 4096, "--mscale", 0.707,
                     "--mscale-all-dim", 0.707, "--beta-fast", 32, "--beta-slow", 1]),
    "mscale ratio": (dict(factor=16.0, original=4096, mscale=1.0, mscale_all_dim=0.5),
                     ["--factor", 16, "--original-max-position-embeddings", 4096, "--mscale", 1,
                      "--mscale-all-dim", 0.5]),
    "no truncate": (dict(factor=32.0, original=4096, truncate=False, beta_fast=16.0, beta_slow=2.0),
                    ["--factor", 32, "--original-max-position-embeddings", 4096, "--no-truncate", "--beta-fast", 16,
                     "--beta-slow", 2]),
    "attention factor": (dict(factor=4.0, original=4096, attention_factor=0.8),
                         ["--factor", 4, "--original-max-position-embeddings", 4096, "--attention-factor", 0.8]),
    "factor from max": (dict(factor=163840 / 4096, original=4096),
                        ["--max-position-embeddings", 163840, "--original-max-position-embeddings", 4096]),
}


@pytest.mark.parametrize("case", list(YARN_CASES))
def test_yarn(tmp_path, case):
    kwargs, args = YARN_CASES[case]
    kwargs = dict(kwargs)
    factor, original = kwargs.pop("factor"), kwargs.pop("original")
    a = rope_table(tmp_path, "--positions", 300, "--dim", 128, "--base", 1000000, "--scaling", "yarn", *args)
    check(a, range(300), *ref.hf_yarn(128, 1000000.0, factor, original, **kwargs))


def test_yarn_attention_factor_on_the_table(tmp_path):
    # cos^2 + sin^2 = a^2 with a = 0.1 ln 4 + 1 (YaRN), row by row.
    a = rope_table(tmp_path, "--positions", 50, "--dim", 16, "--scaling", "yarn", "--factor", 4,
                   "--original-max-position-embeddings", 64).astype(np.float64)
    norms = a[:, :8] ** 2 + a[:, 8:] ** 2
    np.testing.assert_allclose(norms, (0.1 * math.log(4) + 1) ** 2, rtol=0, atol=4 * EXACT_ATOL)


@pytest.mark.parametrize("seq_len", [None, 4096, 4097])
def test_longrope_regimes(tmp_path, seq_len):
    short = [1.0 + 0.05 * i for i in range(16)]
    long = [1.5 + 2.5 * i for i in range(16)]
    extra = [] if seq_len is None else ["--seq-len", seq_len]
    a = rope_table(tmp_path, "--positions", 100, "--dim", 32, "--scaling", "longrope",
                   "--short-factor", csv_list(short), "--long-factor", csv_list(long),
                   "--original-max-position-embeddings", 4096, "--max-position-embeddings", 131072, *extra)
    check(a, range(100), *ref.hf_longrope(32, 10000.0, 4096, short, long, seq_len=seq_len, factor=131072 / 4096))
    # Phi-3-mini-128k's attention factor, sqrt(1 + ln 32 / ln 4096) = sqrt(17/12), scales row 0.
    np.testing.assert_allclose(a[0, :16], math.sqrt(17 / 12), rtol=0, atol=EXACT_ATOL * 1.2)


def test_longrope_factor_and_attention_override(tmp_path):
    short = [1.0] * 8
    long = [4.0] * 8
    a = rope_table(tmp_path, "--positions", 20, "--dim", 16, "--scaling", "longrope",
                   "--short-factor", csv_list(short), "--long-factor", csv_list(long),
                   "--original-max-position-embeddings", 64, "--factor", 8, "--attention-factor", 1.5,
                   "--seq-len", 65)
    check(a, range(20), default_inv_freq(16, 10000.0) / 4.0, 1.5)


def test_llama3(tmp_path):
    args = ["--scaling", "llama3", "--factor", 8, "--low-freq-factor", 1, "--high-freq-factor", 4,
            "--original-max-position-embeddings", 8192]
    a = rope_table(tmp_path, "--positions", 300, "--dim", 128, "--base", 500000, *args)
    check(a, range(300), *ref.hf_llama3(128, 500000.0, 8.0, 1.0, 4.0, 8192))


def test_csv_matches_npy(tmp_path):
    args = ["--positions", 40, "--dim", 12, "--scaling", "yarn", "--factor", 2,
            "--original-max-position-embeddings", 128]
    r = run("table", "rope", *args, "--out", tmp_path / "t.csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"wrote {tmp_path / 't.csv'}: rope table [40, 12] float32\n"
    from_csv = np.loadtxt(tmp_path / "t.csv", delimiter=",", dtype=np.float64)
    np.testing.assert_array_equal(from_csv.astype(np.float32), rope_table(tmp_path, *args))


def test_default_output_file(tmp_path):
    r = run("table", "rope", "--positions", 3, "--dim", 8, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "wrote rope.npy: rope table [3, 8] float32\n"
    assert np.load(tmp_path / "rope.npy").shape == (3, 8)


def test_list_and_help():
    r = run("table", "--list")
    assert r.returncode == 0
    assert [line.split()[0] for line in r.stdout.splitlines()][-1] == "rope"
    r = run("table", "--help")
    assert r.returncode == 0 and r.stderr == ""
    for option in ["--scaling", "--factor", "--original-max-position-embeddings", "--max-position-embeddings",
                   "--beta-fast", "--beta-slow", "--mscale", "--mscale-all-dim", "--no-truncate",
                   "--attention-factor", "--short-factor", "--long-factor", "--low-freq-factor",
                   "--high-freq-factor", "--seq-len"]:
        assert option in r.stdout, option


# ---------------------------------------------------------------- bad input

ROPE = ["table", "rope", "--positions", 4, "--dim", 8]
LONGROPE = [*ROPE, "--scaling", "longrope", "--original-max-position-embeddings", 64, "--factor", 2]

BAD_ARGUMENTS = [
    ([*ROPE, "--scaling", "linear", "--factor", 0], "[rope] factor must be finite and > 0, got 0"),
    ([*ROPE, "--scaling", "linear", "--factor", "nan"], "[rope] factor must be finite and > 0, got nan"),
    ([*ROPE, "--scaling", "linear"], "[rope] linear needs factor"),
    ([*ROPE, "--scaling", "su"],
     "[rope] rope_type must be one of default, linear, ntk, dynamic, yarn, longrope, llama3, proportional, got 'su'"),
    ([*ROPE, "--beta-fast", 16], "[rope] key 'beta_fast' is not used by rope_type 'default'"),
    ([*ROPE, "--scaling", "linear", "--factor", 2, "--no-truncate"],
     "[rope] key 'truncate' is not used by rope_type 'linear'"),
    ([*ROPE, "--scaling", "yarn", "--factor", 4], "[rope] yarn needs original_max_position_embeddings"),
    ([*ROPE, "--scaling", "yarn", "--original-max-position-embeddings", 64],
     "[rope] yarn needs factor (or max_position_embeddings)"),
    ([*ROPE, "--scaling", "yarn", "--factor", 4, "--original-max-position-embeddings", 64, "--beta-fast", 0.5],
     "[rope] beta_fast must be at least beta_slow (1), got 0.5"),
    ([*ROPE, "--scaling", "dynamic", "--factor", 2, "--original-max-position-embeddings", 0],
     "[rope] original_max_position_embeddings must be positive, got 0"),
    ([*LONGROPE, "--short-factor", "1,1,1", "--long-factor", "1,1,1,1"],
     "[rope] longrope short_factor must have dim/2 = 4 values, got 3"),
    ([*LONGROPE, "--short-factor", "1,1,1,1", "--long-factor", "1,1,0,1"],
     "[rope] longrope long_factor[2] must be finite and > 0, got 0"),
    ([*LONGROPE, "--short-factor", "1,1,1,1"], "[rope] longrope needs long_factor"),
    ([*ROPE, "--scaling", "llama3", "--factor", 8, "--original-max-position-embeddings", 8192,
      "--low-freq-factor", 4, "--high-freq-factor", 1],
     "[rope] high_freq_factor must be finite and greater than low_freq_factor (4), got 1"),
    ([*ROPE, "--seq-len", 0], "[rope] seq_len must be positive, got 0"),
    (["table", "rope", "--positions", 4, "--dim", 7], "[rope] dim must be even, got 7"),
    (["table", "rope", "--positions", 4, "--dim", 0], "[rope] dim must be positive, got 0"),
    (["table", "rope", "--positions", 0, "--dim", 8], "[rope] positions must be at least 1, got 0"),
    (["table", "rope", "--positions", 100000, "--dim", 100000],
     "[rope] positions x dim must be at most 2147483648 values, got 100000 x 100000"),
    ([*ROPE, "--base", 0], "[rope] base must be finite and > 0, got 0"),
    ([*ROPE, "--precision", "fp16"], "[rope] precision must be one of exact, fp32, got 'fp16'"),
    ([*ROPE, "--layout", "half"], "[table] --layout does not apply to kind 'rope'"),
    ([*ROPE, "--scale", 2], "[table] --scale does not apply to kind 'rope'"),
    ([*ROPE, "--height", 3], "[table] --height does not apply to kind 'rope'"),
    ([*ROPE, "--length", 3], "[table] --length does not apply to kind 'rope'"),
    (["table", "rope", "--positions", 4], "[table] --dim is required for kind 'rope'"),
    (["table", "rope", "--dim", 8], "[table] --positions is required for kind 'rope'"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--factor", 2],
     "[table] --factor does not apply to kind 'sinusoidal'"),
    (["table", "sinusoidal-2d", "--height", 2, "--width", 2, "--dim", 8, "--seq-len", 2],
     "[table] --seq-len does not apply to kind 'sinusoidal-2d'"),
    (["table", "index", "--positions", 4, "--dim", 8, "--scaling", "linear"],
     "[table] --scaling does not apply to kind 'index'"),
    ([*LONGROPE, "--short-factor", "1,x"], "Could not convert: --short-factor = 1,x"),
    ([*ROPE, "--factor", "two"], "Could not convert: --factor = two"),
]


def _case_id(case):
    return " ".join(map(str, case[0]))


@pytest.mark.parametrize("args,message", BAD_ARGUMENTS, ids=[_case_id(c) for c in BAD_ARGUMENTS])
def test_bad_arguments(tmp_path, args, message):
    r = run(*args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert list(tmp_path.iterdir()) == []  # nothing written
