"""Files and arguments that posenc.load_tensor / load_tensors / save_tensor
refuse, with the exact messages: a missing tensor name lists the names
present, an ambiguous file asks for a name, values torch cannot hold, dtypes a
file cannot hold, metadata where the format has none."""

import struct

import numpy as np
import pytest
import torch

import posenc
from test_tensor_files import entry, safetensors_bytes


def raises(error, message, function, *args, **kwargs):
    with pytest.raises(error) as info:
        function(*args, **kwargs)
    assert str(info.value) == message


@pytest.fixture
def three(tmp_path):
    """Three tensors, none named like a position table; messages list the names sorted, not in file order."""
    path = tmp_path / "three.safetensors"
    path.write_bytes(safetensors_bytes([entry(n, np.zeros(2, dtype=np.float32)) for n in ("w", "b", "a.c")]))
    return path


def test_a_missing_name_lists_the_names_present(three):
    raises(ValueError, f"[tensor file] {three} has no tensor 'a.b'; it holds: a.c, b, w", posenc.load_tensor, three,
           "a.b")


def test_an_ambiguous_file_asks_for_a_name(three):
    raises(ValueError, f"[tensor file] {three} holds 3 tensors; name one of: a.c, b, w", posenc.load_tensor, three)


def test_a_npy_file_refuses_a_name(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.zeros(3, dtype=np.float32))
    raises(ValueError, f"[tensor file] {path} holds one unnamed array; --tensor does not apply", posenc.load_tensor,
           path, "x")


def test_unsupported_file_types(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\0" * 16)
    raises(ValueError, f"[tensor file] {path}: unsupported file type; expected .npy or .safetensors",
           posenc.load_tensor, path)
    raises(ValueError, f"[tensor file] {path}: unsupported file type; expected .npy or .safetensors",
           posenc.save_tensor, path, torch.zeros(2))


def test_uint64_values_beyond_int64_are_refused(tmp_path):
    path = tmp_path / "big.safetensors"
    path.write_bytes(safetensors_bytes([entry("ok", np.zeros(1, dtype=np.float32)),
                                        entry("big", np.array([1, 2**63, 2**64 - 1], dtype=np.uint64))]))
    raises(ValueError, f"[tensor file] {path}: tensor 'big' is uint64 and holds 9223372036854775808 (flat index 1), "
           "above the int64 range; torch has no uint64", posenc.load_tensors, path)
    assert posenc.load_tensor(path, "ok").tolist() == [0.0]  # the other tensors stay readable
    npy = tmp_path / "big.npy"
    np.save(npy, np.array([[0, 0], [0, 2**64 - 1]], dtype=np.uint64))
    raises(ValueError, f"[tensor file] {npy}: the array is uint64 and holds 18446744073709551615 (flat index 3), "
           "above the int64 range; torch has no uint64", posenc.load_tensor, npy)


def test_malformed_safetensors_name_what_is_wrong(tmp_path):
    # The header's own example: a shape that needs 48 bytes over a 44-byte span.
    path = tmp_path / "x.safetensors"
    path.write_bytes(safetensors_bytes([("w", "F32", (3, 4), b"\0" * 44)]))
    raises(ValueError, f"[safetensors] {path}: tensor 'w' has shape [3, 4] (12 F32 values, 48 bytes) but "
           "data_offsets span 44 bytes", posenc.load_tensor, path)
    header = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    truncated = tmp_path / "y.safetensors"
    truncated.write_bytes(struct.pack("<Q", 1000) + header)
    with pytest.raises(ValueError) as info:
        posenc.load_tensors(truncated)
    assert str(info.value).startswith(f"[safetensors] {truncated}: ")


def test_dtypes_a_file_cannot_hold(tmp_path):
    supported = "supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64"
    raises(TypeError, f"[tensor file] tensor 'z' has dtype complex64; {supported}", posenc.save_tensor,
           tmp_path / "z.safetensors", {"x": torch.zeros(2), "z": torch.zeros(2, dtype=torch.complex64)})
    raises(TypeError, f"[tensor file] the array has dtype complex128; {supported}", posenc.save_tensor,
           tmp_path / "z.npy", torch.zeros(2, dtype=torch.complex128))
    path = tmp_path / "b.npy"
    raises(RuntimeError, f"[npy] {path}: .npy has no bfloat16 type (numpy lacks one); save bfloat16 tensors as "
           ".safetensors", posenc.save_tensor, path, torch.zeros(2, dtype=torch.bfloat16))
    assert not path.exists()


def test_metadata_is_for_safetensors_only(tmp_path):
    path = tmp_path / "m.npy"
    raises(ValueError, f"[tensor file] {path}: metadata applies to .safetensors files only", posenc.save_tensor, path,
           torch.zeros(2), metadata={"format": "pt"})
    posenc.save_tensor(path, torch.zeros(2), metadata={})  # nothing to store: fine


def test_names_and_tensors_must_pair_up(tmp_path):
    raises(ValueError, "[tensor file] names and tensors must have the same length, got 2 names and 1 tensors",
           torch.ops.posenc.save_tensors, str(tmp_path / "p.safetensors"), ["a", "b"], [torch.zeros(1)])


def test_what_is_not_a_tensor_is_named(tmp_path):
    # A (cos, sin) tuple where a tensor belongs: named by its key, before anything is written.
    path = tmp_path / "t.safetensors"
    raises(TypeError, "[tensor file] tensors['cos_sin'] must be a torch.Tensor, got tuple", posenc.save_tensor, path,
           {"q": torch.zeros(2), "cos_sin": (torch.zeros(2), torch.zeros(2))})
    raises(TypeError, "[tensor file] tensors must be a torch.Tensor or a dict of them, got list", posenc.save_tensor,
           path, [torch.zeros(2)])
    assert not path.exists()
