"""The Python package: its public names and signatures (a contract), and how
it finds the op library."""

import inspect
import math
import os
import subprocess
import sys
from pathlib import Path

import torch

import posenc
from test_analysis import SIGNATURES as ANALYSIS_SIGNATURES
from test_rope import SIGNATURES as ROPE_SIGNATURES

REPO = Path(__file__).resolve().parents[2]

# name -> the exact signature users rely on
SIGNATURES = {
    "sinusoidal": "(positions, dim, *, base=10000.0, layout='interleaved', precision='exact', scale=1.0, "
                  "dtype=torch.float32)",
    "learnable_sinusoidal": "(positions, omega, *, layout='interleaved', scale=1.0)",
    "learned": "(table, positions)",
    "absolute": "(kind, positions, dim, *, base=10000.0, scale=1.0, layout='interleaved', precision='exact', "
                "length=0, dtype=None, table=None, omega=None)",
    "absolute_kinds": "()",
    "sinusoidal_2d": "(height, width, dim, *, base=10000.0, scale=1.0, layout='interleaved', precision='exact', "
                     f"normalize=False, normalize_scale={2 * math.pi!r}, dtype=torch.float32)",
    "sinusoidal_3d": "(frames, height, width, dim, *, base=10000.0, scale=1.0, layout='interleaved', "
                     f"precision='exact', normalize=False, normalize_scale={2 * math.pi!r}, dtype=torch.float32)",
    "translation_matrix": "(delta, dim, *, base=10000.0, layout='interleaved')",
    "sinusoidal_frequencies": "(dim, *, base=10000.0)",
    # Relative position vectors and attention biases (issue 4).
    "relative_logits": "(q, table, max_distance, *, k_len=None, query_offset=0)",
    "relative_values": "(probs, table, max_distance, *, query_offset=0)",
    "relative_logits_2d": "(q, table_h, table_w, height, width)",
    "sinusoidal_relative_table": "(max_distance, dim, *, base=10000.0, omega=None, layout='interleaved', dtype=None)",
    "alibi_slopes": "(num_heads, *, dtype=torch.float32)",
    "alibi_bias": "(num_heads, q_len, k_len, *, causal=False, dtype=torch.float32, out=None)",
    "alibi_bias_2d": "(num_heads, height, width, *, distance='euclidean', dtype=torch.float32)",
    "t5_bucket": "(relative_position, *, bidirectional=True, num_buckets=32, max_distance=128)",
    "t5_bias": "(table, q_len, k_len, *, bidirectional=True, max_distance=128)",
    "t5_bias_2d": "(table_h, table_w, height, width, *, bidirectional=True, max_distance=128)",
    # Attention with any encoding inside (issue 5): the arguments, then the extras.
    "attention": "(q, k, v, *, causal=False, key_padding_mask=None, scale=None, rope=None, alibi_slopes=None, "
                 "t5_table=None, t5_num_buckets=32, t5_max_distance=128, rel_k=None, rel_v=None, max_distance=None, "
                 "rel_2d=None, return_weights=False, t5_bidirectional=None, xl_u=None, xl_v=None, bias=None, "
                 "path='auto', max_time=3600.0, offset_bias=None, grid_bias=None, fire=None, cope=None, rel_q=None, "
                 "rel_index=None)",
    # posenc check (issue 17 section 4): the options are the CLI's, by name (docs/check.md).
    "check": "(tensor_or_path, *, kind=None, hf_config=None, what=None, positions=None, tensor=None, input=None, "
             "input_file=None, **options)",
}


def test_public_names_and_signatures():
    # The RoPE and analysis names are checked in test_rope.py and test_analysis.py; together the
    # three lists are all of __all__.
    assert sorted(posenc.__all__) == sorted({**SIGNATURES, **ROPE_SIGNATURES, **ANALYSIS_SIGNATURES})
    for name, signature in SIGNATURES.items():
        function = getattr(posenc, name)
        assert str(inspect.signature(function)) == signature, name
        assert function.__doc__, name


def test_ops_are_registered_under_torch_ops():
    assert torch.ops.posenc.sinusoidal is not None
    assert torch.ops.posenc.absolute_kinds() == posenc.absolute_kinds()


def run_import(env_library):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    env.pop("POSENC_LIBRARY", None)
    if env_library is not None:
        env["POSENC_LIBRARY"] = env_library
    return subprocess.run([sys.executable, "-c", "import posenc"], env=env, capture_output=True, text=True,
                          cwd=str(REPO))


def test_missing_library_is_a_clear_import_error(tmp_path):
    missing = tmp_path / "nowhere" / "libposenc_nn.so"
    result = run_import(str(missing))
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last == (f"ImportError: posenc: the op library libposenc_nn.so was not found; tried {missing}. "
                    "Build it (cmake --build build --target posenc_nn) or set POSENC_LIBRARY to its path.")


def test_the_library_records_the_torch_it_was_built_against():
    from posenc import _library
    built = _library.built_against_torch(_library._loaded)
    assert built is not None and _library._release(built) == _library._release(torch.__version__)
    assert _library._release("1.13.0a0+gitunknown") == (1, 13, 0) == _library._release("1.13.0")


def test_a_library_built_against_another_torch_is_refused_in_one_line(tmp_path):
    # The real library with its record changed to another torch of the same length: refused before
    # it is loaded, naming both versions (loading it would fail on a symbol, or worse).
    from posenc import _library
    data = _library._loaded.read_bytes()
    built = _library.built_against_torch(_library._loaded)
    other = "9" + built[1:]
    marker = b"posenc-built-against-torch "
    copy = tmp_path / "libposenc_nn.so"
    copy.write_bytes(data.replace(marker + built.encode() + b"\n", marker + other.encode() + b"\n"))
    result = run_import(str(copy))
    assert result.returncode != 0
    torch_dir = Path(torch.__file__).parent
    assert result.stderr.strip().splitlines()[-1] == (
        f"ImportError: posenc: the op library {copy} was built against torch {other}, but this interpreter "
        f"imports torch {torch.__version__} ({torch_dir}); rebuild posenc against this torch (cmake --build "
        "build, or pip install . again), or run it with the torch it was built for")


def test_default_path_is_the_repository_build(monkeypatch):
    from posenc import _library
    monkeypatch.delenv("POSENC_LIBRARY", raising=False)
    assert _library.candidate_paths() == [REPO / "build" / "lib" / "libposenc_nn.so"]
    monkeypatch.setenv("POSENC_LIBRARY", "/some/where/libposenc_nn.so")
    assert _library.candidate_paths() == [Path("/some/where/libposenc_nn.so")]
