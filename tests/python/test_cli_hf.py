"""`posenc table rope --hf-config` and `posenc analyze rope --hf-config`, run as subprocesses.

The table of a model's config must equal the HF frequencies of that config (rope_references.py, float64,
parameters written here by hand); --layer picks a layer type; --hf-config conflicts with --dim, --base and
the scaling options; bad configs give one line on stderr and exit code 2.
"""

import json
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

import rope_references as ref

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
EXACT_ATOL = 5e-7  # float32 tables: ~4 ulps of 1 (rope.h)


def run(*args):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def write(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def expected(positions, inv_freq, attention_factor=1.0):
    angle = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    return np.concatenate([np.cos(angle), np.sin(angle)], axis=1) * attention_factor


LLAMA31 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
           "rope_theta": 500000.0,
           "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 1152, "num_attention_heads": 4, "head_dim": 256,
          "num_hidden_layers": 6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
          "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}


def test_table_from_llama_config(tmp_path):
    cfg = write(tmp_path, LLAMA31)
    out = tmp_path / "t.npy"
    r = run("table", "rope", "--hf-config", cfg, "--positions", 300, "--out", out)
    assert r.returncode == 0, r.stderr
    t = np.load(out)
    assert t.shape == (300, 128) and t.dtype == np.float32
    inv, af = ref.hf_llama3(128, 500000.0, 8.0, 1.0, 4.0, 8192)
    np.testing.assert_allclose(t, expected(range(300), inv, af), rtol=0, atol=EXACT_ATOL)


def test_table_partial_yarn_equal_betas(tmp_path):
    cfg = write(tmp_path, {"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32,
                           "partial_rotary_factor": 0.4, "rope_theta": 10000.0, "max_position_embeddings": 8192,
                           "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048,
                                            "beta_fast": 2, "beta_slow": 2}})
    out = tmp_path / "t.npy"
    r = run("table", "rope", "--hf-config", cfg, "--positions", 50, "--start", 100, "--out", out)
    assert r.returncode == 0, r.stderr
    inv, af = ref.hf_yarn(32, 10000.0, 4.0, 2048, beta_fast=2, beta_slow=2)
    np.testing.assert_allclose(np.load(out), expected(range(100, 150), inv, af), rtol=0, atol=EXACT_ATOL * af)


def test_table_layer_of_gemma3(tmp_path):
    cfg = write(tmp_path, GEMMA3)
    for layer, inv in ((0, ref.default_inv_freq(256, 10000.0)), (5, ref.hf_linear(256, 1e6, 8.0)[0])):
        out = tmp_path / f"l{layer}.npy"
        r = run("table", "rope", "--hf-config", cfg, "--layer", layer, "--positions", 40, "--out", out)
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(np.load(out), expected(range(40), inv), rtol=0, atol=EXACT_ATOL)


def test_analyze_from_config(tmp_path):
    cfg = write(tmp_path, LLAMA31)
    r = run("analyze", "rope", "--hf-config", cfg, "--positions", 64, "--json")
    assert r.returncode == 0, r.stderr
    # The same table as the explicit options give.
    explicit = run("analyze", "rope", "--dim", 128, "--base", 500000, "--scaling", "llama3", "--factor", 8,
                   "--low-freq-factor", 1, "--high-freq-factor", 4, "--original-max-position-embeddings", 8192,
                   "--positions", 64, "--json")
    assert explicit.returncode == 0, explicit.stderr
    got, want = json.loads(r.stdout), json.loads(explicit.stdout)
    assert got["shape"] == [64, 128]
    for key in ("monotonicity", "translation_invariance", "symmetry", "monotone_range", "translation_residual"):
        assert got[key] == want[key], key


@pytest.mark.parametrize("args, message", [
    (["table", "rope", "--positions", 4, "--factor", 2], "[table] --factor conflicts with --hf-config (the config "
                                                         "gives the scaling)"),
    (["table", "rope", "--positions", 4, "--dim", 64], "[table] --dim conflicts with --hf-config (the config gives "
                                                       "the rotary dimension)"),
    (["table", "rope", "--positions", 4, "--base", 10], "[table] --base conflicts with --hf-config (the config "
                                                        "gives rope_theta)"),
    (["analyze", "rope", "--scaling", "linear"], "[analyze] --scaling conflicts with --hf-config (the config gives "
                                                 "the scaling)"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8], "[table] --hf-config does not apply to kind "
                                                            "'sinusoidal'"),
])
def test_conflicts(tmp_path, args, message):
    cfg = write(tmp_path, LLAMA31)
    tail = ["--out", tmp_path / "x.npy"] if args[0] == "table" else ["--json"]
    r = run(*args, "--hf-config", cfg, *tail)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert not (tmp_path / "x.npy").exists()


def test_bad_configs(tmp_path):
    bloom = write(tmp_path, {"model_type": "bloom", "n_head": 16}, "bloom.json")
    r = run("table", "rope", "--hf-config", bloom, "--positions", 4, "--out", tmp_path / "x.npy")
    assert r.returncode == 2
    assert r.stderr.rstrip("\n") == ("posenc: " + f"[table] {bloom}: model_type 'bloom' has no rotary embedding (it uses ALiBi): "
                                     "--hf-config needs a rotary model here")
    bad = write(tmp_path, {**LLAMA31, "rope_scaling": {"rope_type": "linear", "factor": -2}}, "bad.json")
    r = run("table", "rope", "--hf-config", bad, "--positions", 4, "--out", tmp_path / "x.npy")
    assert r.returncode == 2
    assert r.stderr.rstrip("\n") == ("posenc: " + f"[hf] {bad}: rope_scaling.factor must be > 0, got -2")
    r = run("table", "rope", "--layer", 3, "--dim", 8, "--positions", 4, "--out", tmp_path / "x.npy")
    assert r.returncode == 2 and r.stderr.rstrip("\n") == ("posenc: " + "[table] --layer needs --hf-config")
    gemma = write(tmp_path, GEMMA3, "gemma.json")
    r = run("table", "rope", "--hf-config", gemma, "--layer", 6, "--positions", 4, "--out", tmp_path / "x.npy")
    assert r.returncode == 2
    assert r.stderr.rstrip("\n") == ("posenc: " + f"[hf] {gemma}: layer 6 is out of range: the config has 6 layers (layer_types)")
    smollm3 = write(tmp_path, {"model_type": "smollm3", "hidden_size": 256, "num_attention_heads": 4,
                               "num_hidden_layers": 4}, "smollm3.json")
    r = run("table", "rope", "--hf-config", smollm3, "--layer", 3, "--positions", 4, "--out", tmp_path / "x.npy")
    assert r.returncode == 2
    assert r.stderr.rstrip("\n") == ("posenc: " + f"[table] {smollm3}: layer 3 of model_type 'smollm3' (no_rope) has "
                                     "no rotary embedding (it uses no positional encoding): choose a layer with one "
                                     "(--layer)")
    llama4 = write(tmp_path, {"model_type": "llama4_text", "hidden_size": 512, "num_attention_heads": 4,
                              "num_hidden_layers": 4}, "llama4.json")
    r = run("table", "rope", "--hf-config", llama4, "--layer", 3, "--positions", 4, "--out", tmp_path / "x.npy")
    assert (r.returncode, r.stderr.rstrip("\n")) == (2, "posenc: " + f"[table] {llama4}: layer 3 of model_type "
                                                     "'llama4_text' (full_attention) has no rotary embedding (it uses "
                                                     "only a query temperature by position): choose a layer with one "
                                                     "(--layer)")
    assert not (tmp_path / "x.npy").exists()
