"""posenc check / posenc.check: tensors broken on purpose in each usual way
must be diagnosed with that cause and its numbers; a correct tensor matches
(exit 0); bad usage gives one exact line and exit 2.

The broken tensors are built here from plain float64 formulas (numpy /
torch, the references of the other tests), never by posenc: a test compares
posenc's diagnosis with an independent construction of the mistake."""

import json
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch

import posenc
import bias_references as bref
import references
import rope_references as rref

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

# Positions 0..63 plus four at every power of two up to 2^20: every band of
# the report is populated and float32 angles are far off at the end.
FAR_POSITIONS = list(range(64)) + [2 ** k + j for k in range(6, 21) for j in range(4)]


def run(*args):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


def run_json(*args):
    r = run(*args, "--json")
    assert r.returncode in (0, 1), r.stderr
    assert r.stderr == ""
    report = json.loads(r.stdout)
    assert report["matches"] == (r.returncode == 0)
    return report


def hypothesis(report, name):
    return next(h for h in report["hypotheses"] if h["name"] == name)


def explaining(report):
    return [h["name"] for h in report["hypotheses"] if h["explains"]]


def rope_cos_sin(positions, inv_freq, factor=1.0):
    """[N, R] float64: cos(p w_j) in [0, R/2), sin in [R/2, R), times factor."""
    angles = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    return factor * np.concatenate([np.cos(angles), np.sin(angles)], axis=1)


def save_npy(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, np.ascontiguousarray(array))
    return path


def save_st(tmp_path, name, tensors):
    path = tmp_path / name
    posenc.save_tensor(path, tensors)
    return path


# ---------------------------------------------------------------------------
# A correct tensor matches


def test_correct_cos_sin_matches(tmp_path):
    inv = rref.default_inv_freq(32, 10000.0)
    path = save_npy(tmp_path, "cs.npy", rope_cos_sin(FAR_POSITIONS, inv).astype(np.float32))
    r = run("check", "rope", path, "--positions", ",".join(map(str, FAR_POSITIONS)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "result: matches" in r.stdout
    assert "matches: max abs error" in r.stdout
    report = run_json("check", "rope", path, "--positions", ",".join(map(str, FAR_POSITIONS)))
    # float32 tolerance: 2^-21 of the value range (1).
    assert report["tolerance"] == pytest.approx(2.0 ** -21)
    assert report["max_abs_error"] <= report["tolerance"]
    assert report["hypotheses"] == []
    assert [b["lo"] for b in report["bands"]][:4] == [0, 1, 2, 4]
    assert report["bands"][-1]["lo"] == 2 ** 20


def test_correct_tensor_matches_in_python_too():
    table = torch.tensor(references.sinusoidal(range(50), 16), dtype=torch.float32)
    report = posenc.check(table, kind="sinusoidal")
    assert report["matches"] is True
    assert report["diagnosis"][0].startswith("matches: max abs error")


def test_bfloat16_tolerance():
    exact = references.sinusoidal(range(40), 16)
    report = posenc.check(torch.tensor(exact).to(torch.bfloat16), kind="sinusoidal")
    assert report["matches"] is True
    assert report["tolerance"] == pytest.approx(2.0 ** -6)
    # bf16 rounding of values near 1 is up to 2^-9 (half of 2^-8), more than float32's tolerance allows.
    assert report["max_abs_error"] > 2.0 ** -21


# ---------------------------------------------------------------------------
# Each broken tensor, diagnosed


def test_float32_angles_up_to_2_20(tmp_path):
    # The common float32 formula: omega and p rounded to float32, the product in float32.
    inv32 = np.array(rref.default_inv_freq(64, 10000.0), dtype=np.float32)
    p32 = np.array(FAR_POSITIONS, dtype=np.float32)
    angles = (p32[:, None] * inv32[None, :]).astype(np.float32).astype(np.float64)
    broken = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    path = save_npy(tmp_path, "fp32.npy", broken)
    positions = ",".join(map(str, FAR_POSITIONS))
    r = run("check", "rope", path, "--positions", positions)
    assert r.returncode == 1
    assert "result: does not match" in r.stdout
    report = run_json("check", "rope", path, "--positions", positions)
    # The error grows with the position: tiny at p = 1, large at p ~ 2^20.
    bands = {b["lo"]: b["max_abs"] for b in report["bands"]}
    assert bands[1] < 1e-7
    assert bands[2 ** 20] > 1e-2
    assert report["max_abs_error"] == bands[2 ** 20]
    assert explaining(report) == ["fp32-angles"]
    assert hypothesis(report, "fp32-angles")["max_abs_error"] <= report["tolerance"]
    diagnosis = report["diagnosis"][0]
    assert diagnosis.startswith("float32 angles: the error grows with the position")
    assert "matches posenc's precision=fp32 mode" in diagnosis
    assert "[1048576, 2097152)" in diagnosis


def test_other_rope_layout(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 40, 32, dtype=torch.float64)
    interleaved = rref.reference_rope(x, torch.arange(40), layout="interleaved")
    path = save_st(tmp_path, "q.safetensors", {"q": interleaved.float(), "x": x.float()})
    report = run_json("check", "rope", path, "--tensor", "q", "--input", "x")
    assert report["what"] == "rotated"
    assert not report["matches"]
    assert explaining(report) == ["other-layout"]
    h = hypothesis(report, "other-layout")
    assert "interleaved" in h["description"]
    assert any(d.startswith("other-layout: the other layout: interleaved") for d in report["diagnosis"])
    # And the same through Python, with the input as a tensor.
    py = posenc.check(interleaved.float(), kind="rope", input=x.float())
    assert explaining(py) == ["other-layout"]
    assert py["max_abs_error"] == pytest.approx(report["max_abs_error"])


def test_missing_attention_factor(tmp_path):
    # LongRoPE with an explicit attention factor 1.5; the port forgot it.
    short = [1.0 + 0.1 * i for i in range(8)]
    long = [2.0 + 0.5 * i for i in range(8)]
    inv, factor = rref.hf_longrope(16, 10000.0, 4096, short, long, seq_len=64, factor=1.0, attention_factor=1.5)
    assert factor == 1.5
    broken = rope_cos_sin(range(64), inv).astype(np.float32)  # no factor
    path = save_npy(tmp_path, "cs.npy", broken)
    args = ["--scaling", "longrope", "--short-factor", ",".join(map(str, short)), "--long-factor",
            ",".join(map(str, long)), "--original-max-position-embeddings", 4096, "--attention-factor", 1.5]
    report = run_json("check", "rope", path, *args)
    assert not report["matches"]
    assert "no-attention-factor" in explaining(report)
    assert "constant-factor" in explaining(report)
    # The fitted constant is 1/1.5, and the description says so.
    assert report["ratio"] == pytest.approx(1 / 1.5, rel=1e-6)
    assert "1/c = 1.5" in hypothesis(report, "constant-factor")["description"]
    assert any(d.startswith("no-attention-factor: the scaling's attention factor left out")
               for d in report["diagnosis"])


def test_positions_off_by_one(tmp_path):
    broken = references.sinusoidal(range(1, 101), 32).astype(np.float32)  # row p holds PE(p + 1)
    path = save_npy(tmp_path, "pe.npy", broken)
    report = run_json("check", "sinusoidal", path)
    assert not report["matches"]
    assert explaining(report) == ["positions+1"]
    assert any(d.startswith("positions+1: positions off by one: p+1 used for row p") for d in report["diagnosis"])


def test_partial_rotary_on_the_wrong_channels(tmp_path):
    torch.manual_seed(1)
    x = torch.randn(1, 2, 24, 64, dtype=torch.float64)
    # rotary_dim 32 applied to channels [32, 64) instead of [0, 32).
    rotated_tail = rref.reference_rope(x[..., 32:], torch.arange(24), dim=32)
    broken = torch.cat([x[..., :32], rotated_tail], dim=-1).float()
    path = save_st(tmp_path, "k.safetensors", {"k": broken, "k_in": x.float()})
    report = run_json("check", "rope", path, "--tensor", "k", "--input", "k_in", "--rotary-dim", 32)
    assert not report["matches"]
    assert explaining(report) == ["rotary-last-channels"]
    channels = {c["name"]: c for c in report["channels"]}
    assert (channels["rotated"]["first"], channels["rotated"]["count"]) == (0, 32)
    assert (channels["pass-through"]["first"], channels["pass-through"]["count"]) == (32, 32)
    assert channels["rotated"]["max_abs"] > 0.1 and channels["pass-through"]["max_abs"] > 0.1
    assert any(d.startswith("channels compared separately: rotated [0, 32)") for d in report["diagnosis"])


def t5_table(num_buckets=32, heads=4, seed=2):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(num_buckets, heads, generator=g, dtype=torch.float64)


def t5_reference(table, q_len, k_len, offset, sign=1, bidirectional=True, max_distance=128):
    """out[h, i, j] = table[bucket(sign * (j - (i + offset))), h] (HF's bucket, verbatim)."""
    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    rel = sign * (j - (i + offset))
    buckets = bref.hf_relative_position_bucket(rel, bidirectional, table.shape[0], max_distance)
    return table[buckets].permute(2, 0, 1)


def test_transposed_bias(tmp_path):
    table = t5_table()
    # Built for (Tk, Tq) = (20, 7), stored as (Tq, Tk): the bias transposed.
    broken = t5_reference(table, 20, 7, 3).transpose(1, 2).contiguous()
    path = save_st(tmp_path, "bias.safetensors", {"bias": broken.unsqueeze(0).float(), "table": table.float()})
    report = run_json("check", "t5", path, "--tensor", "bias", "--input", "table", "--query-offset", 3)
    assert report["what"] == "bias"
    assert report["shape"] == [1, 4, 7, 20]
    assert not report["matches"]
    assert explaining(report) == ["transposed"]
    assert any(d.startswith("transposed: the bias transposed") for d in report["diagnosis"])


def test_flipped_offset_sign(tmp_path):
    table = t5_table()
    broken = t5_reference(table, 7, 20, 3, sign=-1)  # bucket(i' - j)
    report = posenc.check(broken.float(), kind="t5", input=table.float(), query_offset=3)
    assert not report["matches"]
    assert explaining(report) == ["offset-sign"]
    correct = posenc.check(t5_reference(table, 7, 20, 3).float(), kind="t5", input=table.float(), query_offset=3)
    assert correct["matches"] is True


def test_alibi_signed_offset_flipped(tmp_path):
    slopes = bref.get_slopes(8)
    i = np.arange(16)[:, None]
    j = np.arange(16)[None, :]
    broken = np.stack([m * (i - j) for m in slopes]).astype(np.float32)  # m*(i - j): sign flipped, no |.|
    path = save_npy(tmp_path, "alibi.npy", broken)
    report = run_json("check", "alibi", path)
    assert not report["matches"]
    assert explaining(report) == ["offset-sign"]
    correct = np.stack([-m * np.abs(j - i) for m in slopes]).astype(np.float32)
    r = run("check", "alibi", save_npy(tmp_path, "ok.npy", correct))
    assert r.returncode == 0, r.stdout


def test_table_in_the_other_sin_cos_layout(tmp_path):
    broken = references.sinusoidal(range(128), 64, layout="half").astype(np.float32)  # concatenated sin | cos
    path = save_npy(tmp_path, "pe.npy", broken)
    report = run_json("check", "sinusoidal", path)  # interleaved expected
    assert not report["matches"]
    assert explaining(report) == ["layout-half"]
    assert "all sines, then all cosines" in hypothesis(report, "layout-half")["description"]


def test_sinusoidal_float32_angles_in_python():
    positions = FAR_POSITIONS
    broken = torch.tensor(references.sinusoidal_fp32_formula(positions, 32), dtype=torch.float32)
    report = posenc.check(broken, kind="sinusoidal", positions=positions)
    assert explaining(report) == ["fp32-angles"]
    assert report["diagnosis"][0].startswith("float32 angles: the error grows with the position")


# ---------------------------------------------------------------------------
# Bad usage: one exact line, exit 2


def test_missing_file(tmp_path):
    r = run("check", "rope", tmp_path / "nope.npy")
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == f"posenc: [check] no such file: {tmp_path / 'nope.npy'}\n"


def test_unknown_tensor_name_lists_the_names(tmp_path):
    path = save_st(tmp_path, "t.safetensors", {"q": torch.zeros(4, 8), "x": torch.zeros(4, 8)})
    r = run("check", "rope", path, "--tensor", "k")
    assert r.returncode == 2
    assert r.stderr == f"posenc: [tensor file] {path} has no tensor 'k'; it holds: q, x\n"


def test_shape_that_fits_no_what(tmp_path):
    path = save_npy(tmp_path, "v.npy", np.zeros(7, dtype=np.float32))
    r = run("check", "sinusoidal", path)
    assert r.returncode == 2
    assert r.stderr == (f"posenc: [check] the tensor {path} has shape [7], which fits no --what (cos-sin, table: "
                        "[positions, dim]; rotated: (..., positions, head_dim); bias: (heads, q_len, k_len))\n")


def test_shape_that_fits_not_this_what(tmp_path):
    path = save_npy(tmp_path, "b.npy", np.zeros((2, 3, 4), dtype=np.float32))
    r = run("check", "sinusoidal", path)
    assert r.returncode == 2
    assert r.stderr == ("posenc: [check] --what table needs a 2-D tensor [positions, dim] (leading 1s are squeezed), "
                        "got [2, 3, 4]\n")


def test_what_that_does_not_fit_the_kind(tmp_path):
    path = save_npy(tmp_path, "t.npy", np.zeros((4, 8), dtype=np.float32))
    r = run("check", "rope", path, "--what", "bias")
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] --what bias does not apply to kind 'rope' (it takes cos-sin or rotated)\n"


def test_rotated_needs_an_input(tmp_path):
    path = save_npy(tmp_path, "q.npy", np.zeros((4, 8), dtype=np.float32))
    r = run("check", "rope", path, "--what", "rotated")
    assert r.returncode == 2
    assert r.stderr == ("posenc: [check] --what rotated needs the unrotated input: --input NAME (a tensor of the "
                        "same file) or --input-file FILE\n")


def test_bad_positions_list(tmp_path):
    path = save_npy(tmp_path, "t.npy", np.zeros((4, 8), dtype=np.float32))
    r = run("check", "rope", path, "--positions", "0,1,x")
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] --positions must be integers or ranges a:b separated by commas, got '0,1,x'\n"
    r = run("check", "rope", path, "--positions", "0:3")
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] --positions must list 4 positions (the tensor's rows), got 3\n"


def test_scaling_options_refused_for_other_kinds(tmp_path):
    path = save_npy(tmp_path, "t.npy", np.zeros((4, 8), dtype=np.float32))
    r = run("check", "sinusoidal", path, "--factor", 2)
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] --factor does not apply to kind 'sinusoidal'\n"


def test_python_errors():
    with pytest.raises(ValueError, match=r"^\[check\] unknown option 'bogus'; known: hf_config, layer, start"):
        posenc.check(torch.zeros(4, 8), kind="sinusoidal", bogus=1)
    with pytest.raises(TypeError, match=r"^\[check\] tensor must be float16, bfloat16, float32 or float64, got int64$"):
        posenc.check(torch.zeros(4, 8, dtype=torch.long), kind="sinusoidal")
    with pytest.raises(ValueError, match=r"^\[check\] KIND must be one of rope, alibi, t5, sinusoidal, "):
        posenc.check(torch.zeros(4, 8), kind="nope")


# ---------------------------------------------------------------------------
# --hf-config: the scheme from a Hugging Face config.json (posenc::hf)

LLAMA31 = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 4,
           "rope_theta": 500000.0, "max_position_embeddings": 8192,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192}}


def test_hf_config_rope(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA31))
    inv, _ = rref.hf_llama3(64, 500000.0, 8.0, 1.0, 4.0, 8192)
    good = save_npy(tmp_path, "good.npy", rope_cos_sin(range(100), inv).astype(np.float32))
    r = run("check", "--hf-config", config, good)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"reference  cos-sin: {config}: rope rotary_dim 64, base 500000, scaling llama3" in r.stdout
    # The port ignored rope_scaling: plain base^(-2j/R) frequencies.
    plain = save_npy(tmp_path, "plain.npy",
                     rope_cos_sin(range(100), rref.default_inv_freq(64, 500000.0)).astype(np.float32))
    report = run_json("check", "--hf-config", config, plain)
    assert explaining(report) == ["no-scaling"]
    py = posenc.check(plain, hf_config=config)
    assert explaining(py) == ["no-scaling"]


def test_hf_config_refuses_a_kind_and_scaling_options(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA31))
    path = save_npy(tmp_path, "t.npy", np.zeros((4, 64), dtype=np.float32))
    r = run("check", "--hf-config", config, "rope", path)
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] KIND does not apply with --hf-config (the config gives the scheme), got 'rope'\n"
    r = run("check", "--hf-config", config, path, "--factor", 2)
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] the RoPE scaling options conflict with --hf-config (the config gives the scaling)\n"


def test_hf_config_alibi(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "bloom", "n_head": 8, "hidden_size": 64, "n_layer": 2}))
    slopes = bref.get_slopes(8)
    i = np.arange(12)[:, None]
    j = np.arange(12)[None, :]
    bias = np.stack([-m * np.abs(j - i) for m in slopes]).astype(np.float32)
    report = run_json("check", "--hf-config", config, save_npy(tmp_path, "b.npy", bias))
    assert report["kind"] == "alibi" and report["matches"]
    wrong_heads = save_npy(tmp_path, "b4.npy", bias[:4])
    r = run("check", "--hf-config", config, wrong_heads)
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] the bias must have 8 heads (the config's), got 4\n"


def test_hf_config_nope_layer_has_nothing_to_check(tmp_path):
    # Cohere 2: RoPE on the sliding layers, none on every 4th (full attention).
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "cohere2", "hidden_size": 256, "num_attention_heads": 4,
                                  "num_hidden_layers": 4, "rope_theta": 50000}))
    path = save_npy(tmp_path, "t.npy", np.zeros((4, 64), dtype=np.float32))
    r = run("check", "--hf-config", config, "--layer", 3, path)
    assert r.returncode == 2
    assert r.stderr == (f"posenc: [check] {config}: layer 3 (full_attention) has no positional encoding (NoPE): "
                        "nothing to check; choose a layer with one\n")
    inv = rref.default_inv_freq(64, 50000.0)
    good = save_npy(tmp_path, "good.npy", rope_cos_sin(range(16), inv).astype(np.float32))
    assert run_json("check", "--hf-config", config, "--layer", 2, good)["matches"]


def test_options_the_kind_does_not_read_are_refused(tmp_path):
    path = save_npy(tmp_path, "b.npy", np.zeros((2, 3, 3), dtype=np.float32))
    r = run("check", "alibi", path, "--base", 500)
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] --base does not apply to kind 'alibi'\n"
    r = run("check", "alibi", path, "--max-distance", 64)
    assert r.returncode == 2
    assert r.stderr == "posenc: [check] --max-distance does not apply to kind 'alibi'\n"
