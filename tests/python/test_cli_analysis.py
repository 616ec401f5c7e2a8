"""`posenc analyze`, `posenc plot` and `posenc probe`, run as subprocesses.

The indicators, the monotone range and the shapes are checked against plain
float64 numpy references written below from the definitions in
include/posenc/analysis/{indicators,monotone_range}.h (not from our C++); the
translation residual by its properties (exact operator: ~0 for the sinusoid
and RoPE; least squares: ~0 for a rotated sinusoid, ~1 for noise). Files are
written here with struct + json + numpy in the layouts real checkpoints use
(BERT, GPT-2, ViT), never with posenc code. Bad input must give exactly one
line on stderr, exit code 2 and no file. The binary comes from $POSENC_CLI,
default <repo>/build/bin/posenc.
"""

import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest

from analysis_references import reference_indicators, reference_monotone_range, reference_proximity

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

KINDS = ("sinusoidal, index, normalized, binary, signed-binary, sine-binary, sine-only, sinusoidal-2d, "
         "sinusoidal-3d, rope")

# Both sides sum float64 products in different orders over at most ~1e5 terms:
# agreement to ~1e-12 relative; 1e-9 leaves room without hiding a wrong formula.
INDICATOR_TOL = 1e-9


def run(*args, cwd=None):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def analyze_json(*args, cwd=None):
    r = run("analyze", *args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return json.loads(r.stdout)


# ---------------------------------------------------------------- references

def sinusoidal_ref(n, dim, base=10000.0):
    p = np.arange(n, dtype=np.float64)[:, None]
    omega = base ** (-2.0 * np.arange(dim // 2) / dim)
    out = np.empty((n, dim))
    out[:, 0::2], out[:, 1::2] = np.sin(p * omega), np.cos(p * omega)
    return out


def check_against_reference(result, table, kind="dot", window=None):
    s = reference_proximity(table, kind)
    ref = reference_indicators(s, window)
    mono, inv, sym = ref["monotonicity"], ref["translation_invariance"], ref["symmetry"]
    assert result["monotonicity"] == pytest.approx(mono, abs=INDICATOR_TOL)
    assert result["translation_invariance"] == pytest.approx(inv, abs=INDICATOR_TOL)
    assert result["symmetry"] == pytest.approx(sym, abs=INDICATOR_TOL)
    assert result["window"] == (table.shape[0] - 1 if window is None else window)
    m = reference_monotone_range(s)
    assert result["monotone_range"] == m["range"]
    dist = result["monotone_range_distribution"]
    assert dist["all_censored"] == m["all_censored"]
    if not m["all_censored"]:
        assert (dist["min"], dist["max"], dist["uncensored_rows"]) == (m["min"], m["max"], m["uncensored_rows"])
        assert dist["mean"] == pytest.approx(m["mean"], rel=1e-12)


# ---------------------------------------------------------------- files, written plainly

SAFETENSORS_DTYPES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("float16"): "F16"}


def write_safetensors(path, tensors):
    """tensors: list of (name, array); laid out in that order, header padded to 8 bytes."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors:
        array = np.ascontiguousarray(array)
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bert_checkpoint(path, positions):
    """The embedding block of a BERT checkpoint; `positions` is the position table."""
    rng = np.random.default_rng(3)
    dim = positions.shape[1]
    tensors = [
        ("bert.embeddings.LayerNorm.bias", np.zeros(dim, np.float32)),
        ("bert.embeddings.LayerNorm.weight", np.ones(dim, np.float32)),
        ("bert.embeddings.position_embeddings.weight", positions),
        ("bert.embeddings.token_type_embeddings.weight", rng.normal(0, 0.02, (2, dim)).astype(np.float32)),
        ("bert.embeddings.word_embeddings.weight", rng.normal(0, 0.02, (30, dim)).astype(np.float32)),
    ]
    write_safetensors(path, tensors)
    return [name for name, _ in tensors]


# ---------------------------------------------------------------- analyze

ANALYZE_KEYS = ["source", "shape", "description", "monotonicity", "translation_invariance", "symmetry", "window",
                "monotone_range", "monotone_range_distribution", "proximity", "translation_residual", "translation"]


def test_analyze_sinusoidal_is_translation_invariant_and_symmetric():
    j = analyze_json("sinusoidal")
    assert list(j)[:len(ANALYZE_KEYS)] == ANALYZE_KEYS
    assert (j["source"], j["shape"], j["proximity"], j["window"]) == ("sinusoidal", [256, 128], "dot", 255)
    # S[i, j] = sum_k cos((i - j) w_k) exactly: Toeplitz and symmetric; float64 table, so ~1e-15 off.
    assert j["translation_invariance"] == pytest.approx(1.0, abs=1e-12)
    assert j["symmetry"] == pytest.approx(1.0, abs=1e-12)
    # The block rotation moves every row exactly: float64 rounding only.
    assert j["translation"]["method"] == "exact"
    assert j["translation"]["deltas"] == [1, 2, 4, 8, 16, 32, 64]
    assert len(j["translation"]["residuals"]) == 7
    assert j["translation_residual"] == max(j["translation"]["residuals"])
    assert 0 <= j["translation_residual"] < 1e-12
    # Monotonicity and the monotone range against the float64 reference.
    check_against_reference(j, sinusoidal_ref(256, 128))
    assert 0.5 < j["monotonicity"] < 1  # falls with ripples, not strictly


def test_analyze_rope_uses_its_rotation():
    j = analyze_json("rope", "--positions", 64, "--dim", 32)
    assert j["shape"] == [64, 32]
    assert j["translation"]["method"] == "exact"
    assert j["translation_residual"] < 1e-12  # rotation of float64 cos/sin pairs
    assert j["translation_invariance"] == pytest.approx(1.0, abs=1e-12)


def test_analyze_defaults_per_kind():
    assert analyze_json("binary")["shape"] == [256, 8]  # ceil(log2 256) bits
    assert analyze_json("sine-binary", "--positions", 100)["shape"] == [100, 7]
    grid = analyze_json("sinusoidal-2d")
    assert grid["shape"] == [256, 128]
    # A flattened grid has no known operator (a row shift wraps): least squares.
    assert grid["translation"]["method"] == "least-squares"
    assert analyze_json("sinusoidal-3d")["shape"] == [256, 126]  # the multiple of 6 nearest 128


def test_analyze_random_table_against_reference(tmp_path):
    rng = np.random.default_rng(0)
    table = rng.normal(size=(256, 8))
    np.save(tmp_path / "random.npy", table)
    j = analyze_json("random.npy", cwd=tmp_path)
    assert (j["source"], j["shape"]) == ("random.npy", [256, 8])
    check_against_reference(j, table)
    # Noise cannot be translated: the out-of-sample fit is no better than T = 0
    # (8 columns fitted on >= 150 pairs inflate the held-out error by a few percent).
    assert j["translation"]["method"] == "least-squares"
    assert 0.9 < j["translation_residual"] < 1.3
    # Window and cosine proximity reach the indicators.
    small = table[:40, :6]
    np.save(tmp_path / "small.npy", small)
    check_against_reference(analyze_json("small.npy", "--window", 5, cwd=tmp_path), small, window=5)
    check_against_reference(analyze_json("small.npy", "--proximity", "cosine", cwd=tmp_path), small, kind="cosine")


def test_analyze_least_squares_finds_a_hidden_rotation(tmp_path):
    # A sinusoid seen through a random orthogonal Q is still exactly translatable
    # (T' = Q^T T Q), but only least squares can find it.
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(32, 32)))
    np.save(tmp_path / "rotated.npy", sinusoidal_ref(200, 32) @ q)
    j = analyze_json("rotated.npy", cwd=tmp_path)
    assert j["translation"]["method"] == "least-squares"
    # Ridge (lambda = 1e-10 trace/D) and float64 solves leave ~1e-6; 1e-3 is far below noise's ~1.
    assert j["translation_residual"] < 1e-3
    assert j["translation_invariance"] == pytest.approx(1.0, abs=1e-9)  # Q keeps dot products


def test_analyze_text_summary_matches_json():
    r = run("analyze", "sinusoidal", "--positions", 64, "--dim", 16)
    assert r.returncode == 0 and r.stderr == ""
    j = analyze_json("sinusoidal", "--positions", 64, "--dim", 16)
    lines = r.stdout.splitlines()
    assert lines[0] == "sinusoidal: table [64, 16], dot proximity, window 63"
    values = {line[:24].strip(): line[24:].split()[0] for line in lines[1:]}
    assert float(values["monotonicity"]) == pytest.approx(j["monotonicity"], abs=5e-5)  # printed with 4 decimals
    assert float(values["translation invariance"]) == pytest.approx(j["translation_invariance"], abs=5e-5)
    assert float(values["symmetry"]) == pytest.approx(j["symmetry"], abs=5e-5)
    assert values["monotone range"] in (str(j["monotone_range"]), ">=")
    assert "exact" in lines[-1]


def test_analyze_safetensors_like_bert(tmp_path):
    positions = sinusoidal_ref(64, 16).astype(np.float32)
    names = bert_checkpoint(tmp_path / "bert.safetensors", positions)
    np.save(tmp_path / "pe.npy", positions)
    from_npy = analyze_json("pe.npy", cwd=tmp_path)
    # Without --tensor: the one tensor named like a position table.
    picked = analyze_json("bert.safetensors", cwd=tmp_path)
    named = analyze_json("bert.safetensors", "--tensor", "bert.embeddings.position_embeddings.weight", cwd=tmp_path)
    assert picked["source"] == named["source"] == "bert.safetensors:bert.embeddings.position_embeddings.weight"
    assert picked["shape"] == [64, 16]
    # The same float32 values give the same numbers, whatever the container.
    for key in ANALYZE_KEYS[3:]:
        assert picked[key] == named[key] == from_npy[key], key
    check_against_reference(picked, positions.astype(np.float64))
    # Another tensor by name.
    words = analyze_json("bert.safetensors", "--tensor", "bert.embeddings.word_embeddings.weight", cwd=tmp_path)
    assert words["shape"] == [30, 16]
    # A missing name lists the names present.
    r = run("analyze", "bert.safetensors", "--tensor", "bert.embeddings.position_ids", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("posenc: [tensor file] bert.safetensors has no tensor 'bert.embeddings.position_ids'; "
                        f"it holds: {', '.join(names)}\n")


def test_analyze_gpt2_and_vit_layouts(tmp_path):
    wpe = np.random.default_rng(2).normal(0, 0.02, (48, 12)).astype(np.float32)
    write_safetensors(tmp_path / "gpt2.safetensors", [
        ("transformer.h.0.attn.c_attn.weight", np.zeros((12, 36), np.float32)),
        ("transformer.wpe.weight", wpe),
        ("transformer.wte.weight", np.zeros((50, 12), np.float32)),
    ])
    j = analyze_json("gpt2.safetensors", cwd=tmp_path)
    assert (j["source"], j["shape"]) == ("gpt2.safetensors:transformer.wpe.weight", [48, 12])
    check_against_reference(j, wpe.astype(np.float64))
    # ViT stores [1, N, D]; float16 values widen exactly.
    pos = sinusoidal_ref(50, 8).astype(np.float16)[None]
    write_safetensors(tmp_path / "vit.safetensors", [("vit.embeddings.position_embeddings", pos)])
    j = analyze_json("vit.safetensors", cwd=tmp_path)
    assert j["shape"] == [50, 8]
    check_against_reference(j, pos[0].astype(np.float64))


# ---------------------------------------------------------------- plot

def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("figure,size", [("encoding", (720, 600)), ("similarity", (720, 600)), ("decay", (720, 480))])
def test_plot_sizes(tmp_path, figure, size):
    out = tmp_path / f"{figure}.png"
    r = run("plot", "sinusoidal", "--figure", figure, "--out", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == f"wrote {out}: {figure} figure of sinusoidal [256, 128], {size[0]} x {size[1]} PNG\n"
    assert png_size(out) == size


def test_plot_file_source_and_options(tmp_path):
    np.save(tmp_path / "pe.npy", sinusoidal_ref(40, 8))
    r = run("plot", "pe.npy", "--figure", "decay", "--reference", 3, "--proximity", "cosine", "--out", "d.png",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert png_size(tmp_path / "d.png") == (720, 480)
    r = run("plot", "rope", "--positions", 32, "--dim", 8, "--figure", "similarity", "--out", "s.png", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert png_size(tmp_path / "s.png") == (720, 600)


# ---------------------------------------------------------------- probe

def test_probe_json():
    r = run("probe", "sinusoidal", "--positions", 128, "--dim", 32, "--seed", 7, "--json")
    assert r.returncode == 0 and r.stderr == ""
    j = json.loads(r.stdout)
    assert list(j) == ["source", "shape", "absolute_mae", "relative_error", "folds", "seed", "pairs", "protocol"]
    assert (j["source"], j["shape"], j["folds"], j["seed"], j["pairs"], j["protocol"]) == \
        ("sinusoidal", [128, 32], 5, 7, 4096, "default")
    # The sinusoid's lowest frequencies encode p almost linearly: every held-out position is recovered.
    assert j["absolute_mae"] == 0
    assert 0 <= j["relative_error"] < 0.05


def test_probe_options_and_file(tmp_path):
    # A constant table tells nothing: the regression predicts the mean, the classifier is at chance.
    np.save(tmp_path / "const.npy", np.ones((60, 4)))
    r = run("probe", "const.npy", "--folds", 3, "--pairs", 200, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert (j["folds"], j["seed"], j["pairs"]) == (3, 0, 200)
    assert j["absolute_mae"] > 10  # ~N/4 = 15 for predicting the mean of 0..59
    assert j["relative_error"] == 0.5  # every pair gets the same logit: exactly half wrong
    r = run("probe", "index", "--positions", 50, "--dim", 2)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("index: table [50, 2], 5 folds, seed 0\nabsolute MAE")


# ---------------------------------------------------------------- bad input

BAD_ARGUMENTS = [
    (["analyze"], "[analyze] SOURCE is required: a kind (posenc table --list) or a .npy / .safetensors file"),
    (["analyze", "rotary"], f"[analyze] SOURCE must be a .npy or .safetensors file or one of {KINDS}, got 'rotary'"),
    (["analyze", "sinusoidal", "--proximity", "l2"], "[analyze] --proximity must be dot or cosine, got 'l2'"),
    (["analyze", "sinusoidal", "--window", 256],
     "[analyze] --window must be in [1, 255] for a table of 256 positions, got 256"),
    (["analyze", "sinusoidal", "--tensor", "w"], "[analyze] --tensor applies only to a .npy or .safetensors SOURCE"),
    (["analyze", "pe.npy", "--dim", 8], "[analyze] --dim does not apply to a file source"),
    (["analyze", "sinusoidal", "--height", 3], "[analyze] --height does not apply to kind 'sinusoidal'"),
    (["analyze", "rope", "--layout", "half"], "[analyze] --layout does not apply to kind 'rope'"),
    (["analyze", "sinusoidal", "--dim", 7], "[sinusoidal] dim must be even, got 7"),
    (["analyze", "sinusoidal", "--positions", 1], "[analyze] the table must have at least 2 positions, got 1"),
    (["plot", "sinusoidal", "--out", "x.png"], "[plot] --figure is required: encoding, similarity or decay"),
    (["plot", "sinusoidal", "--figure", "heat", "--out", "x.png"],
     "[plot] figure must be one of encoding, similarity, decay, got 'heat'"),
    (["plot", "sinusoidal", "--figure", "decay"], "[plot] --out FILE.png is required"),
    (["plot", "sinusoidal", "--figure", "decay", "--out", "x.jpg"], "[plot] output file must end in .png, got 'x.jpg'"),
    (["plot", "sinusoidal", "--figure", "encoding", "--reference", 3, "--out", "x.png"],
     "[plot] --reference applies only to --figure decay"),
    (["plot", "sinusoidal", "--figure", "encoding", "--proximity", "cosine", "--out", "x.png"],
     "[plot] --proximity does not apply to --figure encoding"),
    (["plot", "sinusoidal", "--figure", "decay", "--reference", 256, "--out", "x.png"],
     "[plot] reference must be in [0, 255] for 256 positions, got 256"),
    (["probe", "sinusoidal", "--pairs", 0], "[probe] pairs must be >= 1, got 0"),
    # Too few positions for the folds: say what to change (this read "folds must be in [2, 1]").
    (["probe", "sinusoidal", "--positions", 3],
     "[probe] the table has 3 positions; 5 folds need at least 5 (one held-out position per fold): "
     "use 2 .. 3 folds or a table of at least 5 positions"),
    (["probe", "sinusoidal", "--positions", 1],
     "[probe] the table has 1 position; the probes need at least 2 (cross-validation holds out positions in at "
     "least 2 folds)"),
    (["probe", "sinusoidal", "--positions", 2, "--folds", 2],
     "[probe] the table has 2 positions, hence 1 pair; 2 folds need at least 2 (one held-out pair per fold): "
     "use a table of at least 3 positions"),
    # Refused before S (8 GiB here) is computed, not after.
    (["plot", "sinusoidal", "--positions", 32768, "--dim", 2, "--figure", "similarity", "--out", "x.png"],
     "[plot] rows must be <= 32767 (Cairo's largest image), got 32768"),
    (["analyze", "sinusoidal", "--max-memory", "lots"],
     "[analyze] --max-memory must be a size such as 16G, 512M or 1000000 (bytes), got 'lots'"),
    (["plot", "sinusoidal", "--figure", "similarity", "--max-memory", "-1G", "--out", "x.png"],
     "[plot] --max-memory must be a size such as 16G, 512M or 1000000 (bytes), got '-1G'"),
] + [
    (["analyze", "sinusoidal", "--max-memory", size],
     f"[analyze] --max-memory must be a size such as 16G, 512M or 1000000 (bytes), got '{size}'")
    for size in ["16GB", "16X", "0", "0G", "G", "1e999", "1e308T", "1.5 G"]
]


@pytest.mark.parametrize("args,message", BAD_ARGUMENTS, ids=[" ".join(map(str, a)) for a, _ in BAD_ARGUMENTS])
def test_bad_arguments(tmp_path, args, message):
    r = run(*args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_bad_files(tmp_path):
    table = np.zeros((10, 4))
    table[3, 1] = np.nan
    np.save(tmp_path / "nan.npy", table)
    write_safetensors(tmp_path / "w.safetensors", [("w", np.zeros((2, 3, 4), np.float32))])
    np.save(tmp_path / "pe.npy", np.zeros((5, 2)))
    cases = [
        (["analyze", "nan.npy"], "[analyze] the array of nan.npy has a non-finite value at (3, 1): nan"),
        (["analyze", "w.safetensors"],
         "[analyze] tensor 'w' of w.safetensors must be 2-D [positions, dim] (leading 1s are squeezed), got [2, 3, 4]"),
        (["plot", "pe.npy", "--tensor", "x", "--figure", "decay", "--out", "x.png"], "[tensor file] pe.npy holds one unnamed array; --tensor does not apply"),
    ]
    for args, message in cases:
        r = run(*args, cwd=tmp_path)
        assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", ""), args
    assert not (tmp_path / "x.png").exists()


# ------------------------------------------------- degenerate and extreme tables

def test_analyze_refuses_degenerate_tables(tmp_path):
    # Each of these read as a perfect sinusoid (invariance 1, symmetry 1, residual 0).
    row = sinusoidal_ref(1, 8)[0] + 0.5
    np.save(tmp_path / "zero.npy", np.zeros((32, 8)))
    np.save(tmp_path / "constant.npy", np.tile(row, (32, 1)))
    np.save(tmp_path / "multiples.npy", np.arange(1.0, 33.0)[:, None] * row[None, :])
    cases = [
        (["analyze", "zero.npy"], "[analyze] table is all zeros: the indicators are undefined"),
        (["analyze", "constant.npy"],
         "[analyze] table has all rows equal (a constant table): the indicators are undefined"),
        (["analyze", "multiples.npy", "--proximity", "cosine"],
         "[analyze] the cosine proximity of the table is the same for every pair of positions 1 .. 31 apart: "
         "the indicators are undefined"),
    ]
    for args, message in cases:
        r = run(*args, cwd=tmp_path)
        assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", ""), args
    # Their dot proximity varies: analysed, and checked against the plain reference.
    check_against_reference(analyze_json("multiples.npy", cwd=tmp_path), np.load(tmp_path / "multiples.npy"))


def test_analyze_duplicated_rows_are_analysed(tmp_path):
    # Every row twice: the statistics are defined (and far from perfect), so not refused.
    table = np.repeat(np.random.default_rng(4).normal(size=(24, 6)), 2, axis=0)
    np.save(tmp_path / "twice.npy", table)
    result = analyze_json("twice.npy", cwd=tmp_path)
    check_against_reference(result, table)
    assert result["translation_invariance"] < 0.9


@pytest.mark.parametrize("scale", [1e-100, 1e80, 1e-250, 1e250])
def test_analyze_does_not_depend_on_scale(tmp_path, scale):
    # Scale-free by design; 1e-100 and 1e80 gave wrong or null indicators.
    table = sinusoidal_ref(64, 16)
    np.save(tmp_path / "t.npy", table)
    np.save(tmp_path / "scaled.npy", table * scale)
    want = analyze_json("t.npy", cwd=tmp_path)
    got = analyze_json("scaled.npy", cwd=tmp_path)
    for key in ("monotonicity", "translation_invariance", "symmetry"):
        assert got[key] is not None, key
        # Each value rounded once by the scaling: ~1e-16, summed over ~4000 terms.
        assert got[key] == pytest.approx(want[key], abs=1e-12), key
    assert got["monotone_range"] == want["monotone_range"]
    # The near-singular ridge fit of a sinusoid amplifies that rounding ~1e5 times.
    assert got["translation_residual"] == pytest.approx(want["translation_residual"], rel=1e-3)


def test_plot_near_1e300_is_drawn(tmp_path):
    # Dot proximity of such a table overflows float64: it drew grey (non-finite)
    # cells; now the table is drawn divided by 1e300 (pixels: tests/report/pictures_test.cpp).
    np.save(tmp_path / "huge.npy", sinusoidal_ref(32, 8) * 1e300)
    for figure in ("encoding", "similarity", "decay"):
        r = run("plot", "huge.npy", "--figure", figure, "--out", f"{figure}.png", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert png_size(tmp_path / f"{figure}.png") == ((720, 480) if figure == "decay" else (720, 600))


def max_rss_kib(*args):
    """Peak resident memory of one posenc run, measured by a fresh parent (so earlier runs do not count)."""
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run(["/usr/bin/python3", "-c", probe, CLI, *map(str, args)], capture_output=True, text=True,
                         timeout=300)
    code, rss = out.stdout.split()
    return int(code), int(rss)


def test_plot_decay_memory_is_linear(tmp_path):
    # One row of S is drawn: O(N D). Building S at N = 16384 took 2 GiB.
    code, rss = max_rss_kib("plot", "sinusoidal", "--positions", 16384, "--dim", 16, "--figure", "decay",
                            "--out", str(tmp_path / "d.png"))
    assert code == 0
    assert rss < 300 * 1024  # the table is 2 MiB; S would be 2048 MiB


def test_analyze_refuses_past_the_memory_limit(tmp_path):
    r = run("analyze", "sinusoidal", "--positions", 1024, "--dim", 16, "--max-memory", "1M", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    # One line naming the estimate, its largest part, the limit and the options.
    import re
    assert re.fullmatch(r"posenc: \[analyze\] this needs about \d+\.\d MiB of memory \(S alone: 8\.0 MiB for 1024 "
                        r"positions\) and about \d+\.\d s; 1\.0 MiB is allowed by --max-memory: pass --max-memory "
                        r"\d+M to allow it, or --force\n", r.stderr), r.stderr
    allow = re.search(r"pass --max-memory (\d+M)", r.stderr).group(1)
    assert run("analyze", "sinusoidal", "--positions", 1024, "--dim", 16, "--max-memory", allow).returncode == 0
    forced = run("analyze", "sinusoidal", "--positions", 1024, "--dim", 16, "--max-memory", "1M", "--force")
    assert forced.returncode == 0 and forced.stderr == ""  # no progress: stderr is not a terminal here
    r = run("plot", "sinusoidal", "--positions", 1024, "--figure", "similarity", "--max-memory", "1M",
            "--out", "s.png", cwd=tmp_path)
    assert r.returncode == 1 and "(S alone: 8.0 MiB for 1024 positions)" in r.stderr
    assert not (tmp_path / "s.png").exists()


def test_analyze_progress_only_on_a_terminal(tmp_path):
    # stderr a terminal: the steps and the share done, rewritten in place, then cleared.
    import pty
    np.save(tmp_path / "t.npy", sinusoidal_ref(64, 8))
    leader, follower = pty.openpty()
    try:
        r = subprocess.run([CLI, "analyze", "t.npy"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=follower,
                           timeout=120)
        os.close(follower)
        follower = None
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    assert r.returncode == 0
    lines = [line.strip() for line in seen.decode().split("\r") if line.strip()]
    assert lines[0] == "[analyze] proximity: 0%"
    assert lines[1].startswith("[analyze] indicators: ")
    assert "[analyze] translation delta 1 (1 of 5): " in " ".join(lines)
    assert seen.endswith(b"\r")  # the last line is cleared
    # Redirected: nothing on stderr (test_analyze_refuses_past_the_memory_limit checks the same with --force).
    assert run("analyze", "t.npy", cwd=tmp_path).stderr == ""
