"""The posenc command line, run as a subprocess.

Tables are loaded with numpy and compared with float64 references written
plainly below from the formulas in include/posenc/kernels/*.h; bad input must
give exactly one line on stderr and the documented exit code (2 for bad
arguments, 1 for runtime failures). The binary comes from $POSENC_CLI,
default <repo>/build/bin/posenc.
"""

import math
import os
import pathlib
import resource
import subprocess

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

# Kernel headers promise float32 values within 5e-7 of the exact value
# (Precision::kExact, |p| <= 2^24); the float64 references below are exact to
# ~1e-12 at these positions.
EXACT_ATOL = 5e-7

KINDS = [
    "sinusoidal", "index", "normalized", "binary", "signed-binary", "sine-binary", "sine-only",
    "sinusoidal-2d", "sinusoidal-3d", "rope",
]


def run(*args, cwd=None, preexec_fn=None):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          preexec_fn=preexec_fn, timeout=120)


def table(tmp_path, *args):
    """Runs `posenc table ARGS --out tmp/t.npy` and loads the result."""
    out = tmp_path / "t.npy"
    r = run("table", *args, "--out", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    a = np.load(out)
    assert a.dtype == np.float32
    return a


# ---------------------------------------------------------------- references

def sinusoidal_ref(positions, dim, base=10000.0, scale=1.0, layout="interleaved"):
    p = np.asarray(positions, dtype=np.float64)[:, None]
    omega = base ** (-2.0 * np.arange(dim // 2, dtype=np.float64) / dim)
    s = scale * np.sin(p * omega)
    c = scale * np.cos(p * omega)
    out = np.empty((p.shape[0], dim))
    if layout == "interleaved":
        out[:, 0::2], out[:, 1::2] = s, c
    elif layout == "half":
        out[:, : dim // 2], out[:, dim // 2:] = s, c
    elif layout == "cos-sin":
        out[:, 0::2], out[:, 1::2] = c, s
    else:
        raise ValueError(layout)
    return out


def sinusoidal_fp32_ref(positions, dim, base=10000.0):
    """The common float32 formula: omega and p rounded to float32, product in float32."""
    omega32 = (base ** (-2.0 * np.arange(dim // 2) / dim)).astype(np.float32)
    angle = (np.asarray(positions, dtype=np.float32)[:, None] * omega32).astype(np.float64)
    out = np.empty((len(positions), dim))
    out[:, 0::2], out[:, 1::2] = np.sin(angle), np.cos(angle)
    return out


def naive_ref(kind, positions, dim, length=None, base=10000.0):
    p = np.asarray(positions, dtype=np.int64)[:, None]
    j = np.arange(dim)[None, :]
    if kind == "index":
        return np.broadcast_to(p, (len(positions), dim)).astype(np.float64)
    if kind == "normalized":
        length = len(positions) if length is None else length
        value = p / (length - 1) if length > 1 else 0.0 * p
        return np.broadcast_to(value, (len(positions), dim)).astype(np.float64)
    if kind == "binary":
        return ((p >> j) & 1).astype(np.float64)
    if kind == "signed-binary":
        return 2.0 * ((p >> j) & 1) - 1.0
    if kind == "sine-binary":
        return np.sin(p * math.pi / 2.0 ** (j + 1))
    if kind == "sine-only":
        return np.sin(p * base ** (-j / dim))
    raise ValueError(kind)


def grid_ref(sizes, dim, base=10000.0, scale=1.0, layout="interleaved", normalize=False,
             normalize_scale=2 * math.pi):
    """Row-major cells over the grid; each axis (t, y, x order) gets D/axes channels."""
    coords = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
    parts = []
    for c, size in zip(coords, sizes):
        c = c.reshape(-1).astype(np.float64)
        if normalize:
            c = c / (size - 1) * normalize_scale if size > 1 else 0.0 * c
        parts.append(sinusoidal_ref(c, dim // len(sizes), base, scale, layout))
    return np.concatenate(parts, axis=1)


# ---------------------------------------------------------------- tables

@pytest.mark.parametrize("layout", ["interleaved", "half", "cos-sin"])
def test_sinusoidal_layouts(tmp_path, layout):
    a = table(tmp_path, "sinusoidal", "--positions", 300, "--dim", 64, "--layout", layout)
    assert a.shape == (300, 64)
    np.testing.assert_allclose(a, sinusoidal_ref(range(300), 64, layout=layout), rtol=0, atol=EXACT_ATOL)


def test_sinusoidal_base_scale_start(tmp_path):
    a = table(tmp_path, "sinusoidal", "--positions", 50, "--dim", 16, "--start", -20, "--base", 500,
              "--scale", 2.5)
    ref = sinusoidal_ref(range(-20, 30), 16, base=500.0, scale=2.5)
    np.testing.assert_allclose(a, ref, rtol=0, atol=2.5 * EXACT_ATOL)


def test_sinusoidal_precision_near_2_24(tmp_path):
    start = 2 ** 24 - 100
    positions = range(start, start + 100)
    exact = table(tmp_path, "sinusoidal", "--positions", 100, "--dim", 32, "--start", start)
    np.testing.assert_allclose(exact, sinusoidal_ref(positions, 32), rtol=0, atol=EXACT_ATOL)
    fp32 = table(tmp_path, "sinusoidal", "--positions", 100, "--dim", 32, "--start", start,
                 "--precision", "fp32")
    # The float32 formula: same sin/cos of a float32 angle, rounded to float32 (~1 ulp).
    np.testing.assert_allclose(fp32, sinusoidal_fp32_ref(positions, 32), rtol=0, atol=EXACT_ATOL)
    # Its float32 product p*omega is off by whole radians this far out.
    assert np.abs(fp32.astype(np.float64) - sinusoidal_ref(positions, 32)).max() > 0.5


@pytest.mark.parametrize("kind", ["index", "normalized", "binary", "signed-binary", "sine-binary", "sine-only"])
def test_naive_kinds(tmp_path, kind):
    a = table(tmp_path, kind, "--positions", 200, "--dim", 12)
    ref = naive_ref(kind, range(200), 12)
    if kind in ("index", "binary", "signed-binary"):
        np.testing.assert_array_equal(a, ref)  # small integers are exact in float32
    else:
        np.testing.assert_allclose(a, ref, rtol=0, atol=EXACT_ATOL)


def test_naive_options(tmp_path):
    a = table(tmp_path, "normalized", "--positions", 10, "--dim", 3, "--length", 5)
    np.testing.assert_allclose(a, naive_ref("normalized", range(10), 3, length=5), rtol=0, atol=1e-7)
    a = table(tmp_path, "normalized", "--positions", 1, "--dim", 2)
    np.testing.assert_array_equal(a, np.zeros((1, 2)))  # L = 1: 0 by definition
    a = table(tmp_path, "sine-only", "--positions", 40, "--dim", 8, "--base", 100)
    np.testing.assert_allclose(a, naive_ref("sine-only", range(40), 8, base=100.0), rtol=0, atol=EXACT_ATOL)
    a = table(tmp_path, "binary", "--positions", 8, "--dim", 4, "--start", 1000)
    np.testing.assert_array_equal(a, naive_ref("binary", range(1000, 1008), 4))


@pytest.mark.parametrize("layout", ["interleaved", "half", "cos-sin"])
def test_sinusoidal_2d(tmp_path, layout):
    a = table(tmp_path, "sinusoidal-2d", "--height", 5, "--width", 7, "--dim", 24, "--layout", layout)
    assert a.shape == (35, 24)
    np.testing.assert_allclose(a, grid_ref((5, 7), 24, layout=layout), rtol=0, atol=EXACT_ATOL)


def test_sinusoidal_2d_normalized(tmp_path):
    a = table(tmp_path, "sinusoidal-2d", "--height", 4, "--width", 1, "--dim", 16, "--base", 100,
              "--scale", 0.5, "--normalize", "--normalize-scale", 3)
    ref = grid_ref((4, 1), 16, base=100.0, scale=0.5, normalize=True, normalize_scale=3.0)
    np.testing.assert_allclose(a, ref, rtol=0, atol=EXACT_ATOL)
    a = table(tmp_path, "sinusoidal-2d", "--height", 3, "--width", 6, "--dim", 8, "--normalize")
    np.testing.assert_allclose(a, grid_ref((3, 6), 8, normalize=True), rtol=0, atol=EXACT_ATOL)


def test_sinusoidal_3d(tmp_path):
    a = table(tmp_path, "sinusoidal-3d", "--frames", 3, "--height", 4, "--width", 5, "--dim", 36,
              "--layout", "half")
    assert a.shape == (60, 36)
    np.testing.assert_allclose(a, grid_ref((3, 4, 5), 36, layout="half"), rtol=0, atol=EXACT_ATOL)
    a = table(tmp_path, "sinusoidal-3d", "--frames", 2, "--height", 3, "--width", 4, "--dim", 12, "--normalize")
    np.testing.assert_allclose(a, grid_ref((2, 3, 4), 12, normalize=True), rtol=0, atol=EXACT_ATOL)


def test_csv_matches_npy(tmp_path):
    r = run("table", "sinusoidal", "--positions", 30, "--dim", 10, "--out", tmp_path / "t.csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"wrote {tmp_path / 't.csv'}: sinusoidal table [30, 10] float32\n"
    from_csv = np.loadtxt(tmp_path / "t.csv", delimiter=",", dtype=np.float64)
    from_npy = table(tmp_path, "sinusoidal", "--positions", 30, "--dim", 10)
    assert from_csv.shape == (30, 10)
    # The CSV text reads back to the very same float32 values.
    np.testing.assert_array_equal(from_csv.astype(np.float32), from_npy)


def test_default_output_file(tmp_path):
    r = run("table", "sinusoidal-2d", "--height", 2, "--width", 3, "--dim", 8, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "wrote sinusoidal-2d.npy: sinusoidal-2d table [6, 8] float32\n"
    assert np.load(tmp_path / "sinusoidal-2d.npy").shape == (6, 8)


def test_list():
    r = run("table", "--list")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert [line.split()[0] for line in lines] == KINDS
    # Summaries start in one column.
    assert len({len(line) - len(line[len(line.split()[0]):].lstrip()) for line in lines}) == 1
    assert "base^(-2i/D)" in lines[0]


@pytest.mark.parametrize("args", [["--help"], ["table", "--help"], ["demo", "--help"]])
def test_help(args):
    r = run(*args)
    assert r.returncode == 0
    assert r.stderr == ""
    assert "Usage: posenc" in r.stdout
    if args[0] == "table":
        for option in ["--positions", "--dim", "--layout", "--precision", "--height", "--normalize", "--out"]:
            assert option in r.stdout


def test_demo(tmp_path):
    out = tmp_path / "demo"
    r = run("demo", "--out", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert sorted(p.name for p in out.iterdir()) == sorted(k + ".npy" for k in KINDS)
    shapes = {"sinusoidal": (256, 64), "index": (256, 64), "binary": (256, 16), "sinusoidal-2d": (256, 64),
              "sinusoidal-3d": (256, 96), "rope": (256, 64)}
    for kind, shape in shapes.items():
        assert np.load(out / f"{kind}.npy").shape == shape
    np.testing.assert_allclose(np.load(out / "sinusoidal.npy"), sinusoidal_ref(range(256), 64), rtol=0,
                               atol=EXACT_ATOL)
    np.testing.assert_allclose(np.load(out / "sinusoidal-3d.npy"), grid_ref((4, 8, 8), 96), rtol=0,
                               atol=EXACT_ATOL)
    # One summary line per kind: kind, [rows, cols], min, max, mean|x|, self, next, first, file,
    # each number checked against numpy on the file that was written.
    rows = {line.split()[0]: line for line in r.stdout.splitlines() if line.split() and line.split()[0] in KINDS}
    assert list(rows) == KINDS
    for kind, line in rows.items():
        pe = np.load(out / f"{kind}.npy").astype(np.float64)
        fields = line.replace("[", " ").replace("]", " ").replace(",", " ").split()
        assert fields[0] == kind and fields[-1] == str(out / f"{kind}.npy")
        assert (int(fields[1]), int(fields[2])) == pe.shape
        expected = [pe.min(), pe.max(), np.abs(pe).mean(), np.mean(np.sum(pe * pe, axis=1)),
                    np.mean(np.sum(pe[:-1] * pe[1:], axis=1)), pe[0] @ pe[1]]
        # Printed with 4 significant digits.
        np.testing.assert_allclose([float(f) for f in fields[3:9]], expected, rtol=1e-3, atol=1e-12,
                                   err_msg=line)


# ---------------------------------------------------------------- bad input

BAD_ARGUMENTS = [
    (["table", "sinusoidal", "--positions", 4, "--dim", 7], "[sinusoidal] dim must be even, got 7"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 0], "[sinusoidal] dim must be positive, got 0"),
    (["table", "sinusoidal", "--positions", 4, "--dim", -8], "[sinusoidal] dim must be positive, got -8"),
    (["table", "sinusoidal", "--positions", 0, "--dim", 8], "[sinusoidal] positions must be at least 1, got 0"),
    (["table", "index", "--positions", -3, "--dim", 8], "[index] positions must be at least 1, got -3"),
    (["table", "sinusoidal", "--positions", 100000, "--dim", 100000],
     "[sinusoidal] positions x dim must be at most 2147483648 values, got 100000 x 100000"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--base", 0],
     "[sinusoidal] base must be finite and > 0, got 0"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--base", -2],
     "[sinusoidal] base must be finite and > 0, got -2"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--base", "nan"],
     "[sinusoidal] base must be finite and > 0, got nan"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--base", "inf"],
     "[sinusoidal] base must be finite and > 0, got inf"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--scale", "inf"],
     "[sinusoidal] scale must be finite, got inf"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--layout", "diagonal"],
     "[sinusoidal] layout must be one of interleaved, half, cos-sin, got 'diagonal'"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--precision", "fp16"],
     "[sinusoidal] precision must be one of exact, fp32, got 'fp16'"),
    (["table", "binary", "--positions", 4, "--dim", 8, "--start", -1], "[binary] positions must be >= 0, got -1"),
    (["table", "normalized", "--positions", 4, "--dim", 8, "--length", -2],
     "[normalized] length must be at least 1, got -2"),
    (["table", "sine-only", "--positions", 4, "--dim", 8, "--base", 0],
     "[sine-only] base must be finite and > 0, got 0"),
    (["table", "sinusoidal-2d", "--height", 4, "--width", 4, "--dim", 6],
     "[sinusoidal-2d] dim must be divisible by 4 (an even share per axis), got 6"),
    (["table", "sinusoidal-3d", "--frames", 2, "--height", 4, "--width", 4, "--dim", 8],
     "[sinusoidal-3d] dim must be divisible by 6 (an even share per axis), got 8"),
    (["table", "sinusoidal-2d", "--height", 0, "--width", 4, "--dim", 8],
     "[sinusoidal-2d] height must be at least 1, got 0"),
    (["table", "sinusoidal-3d", "--frames", -1, "--height", 4, "--width", 4, "--dim", 12],
     "[sinusoidal-3d] frames must be at least 1, got -1"),
    (["table", "sinusoidal-2d", "--height", 100000, "--width", 100000, "--dim", 8],
     "[sinusoidal-2d] grid cells x dim must be at most 2147483648 values, got 100000 x 100000 x 8"),
    (["table", "sinusoidal-2d", "--height", 4, "--width", 4, "--dim", 8, "--layout", "x"],
     "[sinusoidal-2d] layout must be one of interleaved, half, cos-sin, got 'x'"),
    (["table", "rotary", "--positions", 4, "--dim", 8],
     "[table] KIND must be one of sinusoidal, index, normalized, binary, signed-binary, sine-binary, sine-only, "
     "sinusoidal-2d, sinusoidal-3d, rope, got 'rotary'"),
    (["table"], "[table] KIND is required (posenc table --list shows them)"),
    (["table", "sinusoidal", "--positions", 4], "[table] --dim is required for kind 'sinusoidal'"),
    (["table", "sinusoidal-3d", "--height", 4, "--width", 4, "--dim", 12],
     "[table] --frames is required for kind 'sinusoidal-3d'"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--height", 3],
     "[table] --height does not apply to kind 'sinusoidal'"),
    (["table", "sinusoidal-2d", "--height", 4, "--width", 4, "--dim", 8, "--positions", 4],
     "[table] --positions does not apply to kind 'sinusoidal-2d'"),
    (["table", "sinusoidal-2d", "--height", 4, "--width", 4, "--dim", 8, "--frames", 2],
     "[table] --frames does not apply to kind 'sinusoidal-2d'"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--out", "t.txt"],
     "[table] output file must end in .npy or .csv, got 't.txt'"),
    # Parse errors from CLI11.
    (["table", "sinusoidal", "--positions", "abc", "--dim", 8],
     "[table] --positions must be a decimal integer in -9223372036854775808..9223372036854775807, got 'abc'"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--bogus"],
     "The following argument was not expected: --bogus"),
    (["table", "sinusoidal-2d", "--height", 4, "--width", 4, "--dim", 8, "--normalize-scale", 2],
     "--normalize-scale requires --normalize"),
    ([], "A subcommand is required"),
]


def _case_id(case):
    args = case.values[0] if hasattr(case, "values") else case[0]
    return " ".join(map(str, args)) or "(no arguments)"


@pytest.mark.parametrize("args,message", BAD_ARGUMENTS, ids=[_case_id(c) for c in BAD_ARGUMENTS])
def test_bad_arguments(tmp_path, args, message):
    r = run(*args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_unwritable_output_is_a_runtime_error(tmp_path):
    r = run("table", "sinusoidal", "--positions", 4, "--dim", 8, "--out", "missing/t.npy", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "posenc: [npy] missing/t.npy: cannot create a file in 'missing': No such file or directory\n"
    (tmp_path / "file").write_text("")
    r = run("demo", "--out", "file", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "posenc: [demo] cannot create directory 'file': Not a directory\n"


def test_out_of_memory(tmp_path):
    # 2^31 float32 values (8 GiB) under a 2 GiB address-space limit.
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    r = run("table", "sinusoidal", "--positions", 65536, "--dim", 32768, cwd=tmp_path, preexec_fn=limit_memory)
    # The command that ran out, and no guess at why.
    assert (r.returncode, r.stderr, r.stdout) == (1, "posenc: [table] out of memory\n", "")


# ---------------------------------------------------------------- integers, version, limits (issue 19)

INT64 = "-9223372036854775808..9223372036854775807"
UINT64 = "0..18446744073709551615"

# Every integer option takes plain decimal text only: CLI11 alone reads "0x10" as 16, "-1" for an unsigned
# option as 2^64 - 1, and an int64 past its range as the largest int64.
INTEGER_ARGUMENTS = [
    (["table", "sinusoidal", "--positions", "0x10", "--dim", 8],
     f"[table] --positions must be a decimal integer in {INT64}, got '0x10'"),
    (["table", "sinusoidal", "--positions", 4, "--dim", "1e3"],
     f"[table] --dim must be a decimal integer in {INT64}, got '1e3'"),
    (["table", "sinusoidal", "--positions", "+4", "--dim", 8],
     f"[table] --positions must be a decimal integer in {INT64}, got '+4'"),
    (["table", "sinusoidal", "--positions", "99999999999999999999", "--dim", 8],
     f"[table] --positions must be a decimal integer in {INT64}, got '99999999999999999999'"),
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--start", "-9223372036854775809"],
     f"[table] --start must be a decimal integer in {INT64}, got '-9223372036854775809'"),
    (["table", "rope", "--positions", 4, "--dim", 8, "--seq-len", "0x100"],
     f"[table] --seq-len must be a decimal integer in {INT64}, got '0x100'"),
    (["probe", "sinusoidal", "--seed", -1], f"[probe] --seed must be a decimal integer in {UINT64}, got '-1'"),
    (["probe", "sinusoidal", "--seed", "18446744073709551616"],
     f"[probe] --seed must be a decimal integer in {UINT64}, got '18446744073709551616'"),
    (["probe", "sinusoidal", "--folds", "05x"], f"[probe] --folds must be a decimal integer in {INT64}, got '05x'"),
    (["analyze", "sinusoidal", "--window", "0x8"], f"[analyze] --window must be a decimal integer in {INT64}, got '0x8'"),
    (["report", "--seed", "-1"], f"[report] --seed must be a decimal integer in {UINT64}, got '-1'"),
]


@pytest.mark.parametrize("args,message", INTEGER_ARGUMENTS, ids=[_case_id(c) for c in INTEGER_ARGUMENTS])
def test_integers_are_plain_decimal(tmp_path, args, message):
    r = run(*args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert list(tmp_path.iterdir()) == []


def test_leading_zeros_are_decimal(tmp_path):
    # "010" is ten, not octal eight; "-010" is minus ten.
    a = table(tmp_path, "index", "--positions", "010", "--dim", "01", "--start", "-010")
    np.testing.assert_array_equal(a, np.arange(-10, 0, dtype=np.float32)[:, None])
    # The largest values of each type are accepted as written.
    r = run("probe", "sinusoidal", "--positions", 16, "--dim", 8, "--seed", "18446744073709551615", "--json")
    assert r.returncode == 0, r.stderr
    assert '"seed": 18446744073709551615' in r.stdout


def project_version():
    text = (REPO / "CMakeLists.txt").read_text()
    return text.split("project(posenc VERSION ", 1)[1].split()[0]


def test_version_names_the_build():
    r = run("--version")
    assert (r.returncode, r.stderr) == (0, "")
    version, kernels = r.stdout.rstrip("\n").split(", kernels ")
    assert version == f"posenc {project_version()}"
    build, isa = kernels.split(": ")
    assert build in ("native (-march=native)", "portable (-march=x86-64)")
    assert isa  # the vector instructions the kernels use, e.g. "AVX-512F AVX2 FMA" or "SSE2"


# Positions are exact in double up to 2^53 (the kernels form angles and values from a double position);
# beyond, neighbouring positions merge, and start + N - 1 can overflow int64.
EXACT = 2 ** 53
LIMIT_ARGUMENTS = [
    (["table", "sinusoidal", "--positions", 10, "--dim", 8, "--start", 2 ** 63 - 8],
     f"[table] the last position --start + --positions - 1 must be at most {EXACT} (2^53; positions are exact "
     f"in double), got {2 ** 63 - 8} + 10 - 1"),
    (["table", "index", "--positions", 2, "--dim", 1, "--start", EXACT],
     f"[table] the last position --start + --positions - 1 must be at most {EXACT} (2^53; positions are exact "
     f"in double), got {EXACT} + 2 - 1"),
    (["table", "rope", "--positions", 10, "--dim", 8, "--start", 2 ** 63 - 1],
     f"[table] the last position --start + --positions - 1 must be at most {EXACT} (2^53; positions are exact "
     f"in double), got {2 ** 63 - 1} + 10 - 1"),
    (["table", "sine-only", "--positions", 10, "--dim", 8, "--start", -2 ** 63],
     f"[table] --start must be at least {-EXACT} (-2^53; positions are exact in double), got {-2 ** 63}"),
    (["analyze", "sinusoidal", "--start", 2 ** 63 - 100],  # 256 positions by default
     f"[analyze] the last position --start + --positions - 1 must be at most {EXACT} (2^53; positions are exact "
     f"in double), got {2 ** 63 - 100} + 256 - 1"),
    # The table is float32: |scale| above the largest float32 would write inf.
    (["table", "sinusoidal", "--positions", 4, "--dim", 8, "--scale", "1e308"],
     "[table] --scale must be at most 3.4028234663852886e+38 in magnitude (the largest float32: the table is "
     "written as float32), got 1e+308"),
    (["table", "sinusoidal-2d", "--height", 2, "--width", 2, "--dim", 8, "--scale", "-3.5e38"],
     "[table] --scale must be at most 3.4028234663852886e+38 in magnitude (the largest float32: the table is "
     "written as float32), got -3.5e+38"),
    # Non-finite --base / --scale, wherever the table options are read.
    (["table", "rope", "--positions", 4, "--dim", 8, "--base", "inf"], "[rope] base must be finite and > 0, got inf"),
    (["table", "sine-only", "--positions", 4, "--dim", 8, "--base", "-inf"],
     "[sine-only] base must be finite and > 0, got -inf"),
    (["table", "sinusoidal-3d", "--frames", 1, "--height", 2, "--width", 2, "--dim", 12, "--scale", "nan"],
     "[sinusoidal-3d] scale must be finite, got nan"),
    (["analyze", "sinusoidal", "--scale", "inf"], "[sinusoidal] scale must be finite, got inf"),
    (["probe", "sinusoidal-2d", "--base", "nan"], "[sinusoidal-2d] base must be finite and > 0, got nan"),
    (["plot", "rope", "--base", "nan", "--figure", "encoding", "--out", "r.png"],
     "[rope] base must be finite and > 0, got nan"),
]


@pytest.mark.parametrize("args,message", LIMIT_ARGUMENTS, ids=[_case_id(c) for c in LIMIT_ARGUMENTS])
def test_position_and_scale_limits(tmp_path, args, message):
    r = run(*args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert list(tmp_path.iterdir()) == []


def test_limits_themselves_are_accepted(tmp_path):
    a = table(tmp_path, "index", "--positions", 1, "--dim", 1, "--start", EXACT)
    assert a[0, 0] == np.float32(EXACT)
    a = table(tmp_path, "index", "--positions", 1, "--dim", 1, "--start", -EXACT)
    assert a[0, 0] == np.float32(-EXACT)
    largest = float(np.finfo(np.float32).max)
    a = table(tmp_path, "sinusoidal", "--positions", 4, "--dim", 2, "--scale", repr(largest))
    assert np.isfinite(a).all()
    assert a[0, 1] == np.float32(largest)  # cos(0) * scale


# ---------------------------------------------------------------- options that apply to each kind

# Written from the kernels (include/posenc/kernels/absolute.h, naive.h, sinusoidal_nd.h, rope.h): the options
# each kind reads. Every other option is refused rather than silently ignored.
ONE_D = {"--positions", "--start", "--dim"}
GRID = {"--height", "--width", "--dim", "--base", "--scale", "--layout", "--precision", "--normalize"}
APPLIES = {
    "sinusoidal": ONE_D | {"--base", "--scale", "--layout", "--precision"},
    "index": ONE_D,
    "normalized": ONE_D | {"--length"},
    "binary": ONE_D,
    "signed-binary": ONE_D,
    "sine-binary": ONE_D,
    "sine-only": ONE_D | {"--base"},
    "sinusoidal-2d": GRID,
    "sinusoidal-3d": GRID | {"--frames"},
    "rope": ONE_D | {"--base", "--precision", "--scaling"},
}
# Each option with a valid value ("--scaling" stands for the RoPE scaling group, "--normalize" for
# --normalize [--normalize-scale]).
OPTION_VALUES = {
    "--positions": [4], "--start": [3], "--length": [3], "--frames": [2], "--height": [2], "--width": [3],
    "--dim": [12], "--base": [100], "--scale": [2], "--layout": ["half"], "--precision": ["fp32"],
    "--normalize": ["--normalize-scale", 3], "--scaling": ["linear", "--factor", 2],
}
SIZES = {"sinusoidal-2d": ["--height", 2, "--width", 3, "--dim", 12],
         "sinusoidal-3d": ["--frames", 2, "--height", 2, "--width", 3, "--dim", 12]}
NOT_APPLYING = [(kind, option) for kind in KINDS for option in OPTION_VALUES if option not in APPLIES[kind]]


def sizes(kind):
    return SIZES.get(kind, ["--positions", 4, "--dim", 12])


@pytest.mark.parametrize("kind,option", NOT_APPLYING, ids=[f"{k} {o}" for k, o in NOT_APPLYING])
def test_options_that_do_not_apply_are_refused(tmp_path, kind, option):
    r = run("table", kind, *sizes(kind), option, *OPTION_VALUES[option], cwd=tmp_path)
    message = f"[table] {option} does not apply to kind '{kind}'"
    assert (r.returncode, r.stderr, r.stdout) == (2, f"posenc: {message}\n", "")
    assert list(tmp_path.iterdir()) == []
    # The table sources of analyze / plot / probe share the rule.
    r = run("analyze", kind, option, *OPTION_VALUES[option], cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, f"posenc: [analyze] {option} does not apply to kind '{kind}'\n")


@pytest.mark.parametrize("kind", KINDS)
def test_options_that_apply_are_accepted(tmp_path, kind):
    given = [a for option in sorted(APPLIES[kind] - set(sizes(kind))) for a in (option, *OPTION_VALUES[option])]
    a = table(tmp_path, kind, *sizes(kind), *given)
    assert a.shape[1] == 12


def test_options_of_the_rope_group_and_needs():
    r = run("table", "sine-binary", "--positions", 4, "--dim", 8, "--seq-len", 9)
    assert (r.returncode, r.stderr) == (2, "posenc: [table] --seq-len does not apply to kind 'sine-binary'\n")
    r = run("probe", "sinusoidal", "--factor", 2)
    assert (r.returncode, r.stderr) == (2, "posenc: [probe] --factor does not apply to kind 'sinusoidal'\n")
    # --normalize-scale needs --normalize; with it, rope refuses the first.
    r = run("table", "rope", "--positions", 4, "--dim", 8, "--normalize", "--normalize-scale", 1)
    assert (r.returncode, r.stderr) == (2, "posenc: [table] --normalize does not apply to kind 'rope'\n")
