"""posenc.load_tensor, posenc.load_tensors and posenc.save_tensor.

Files come from independent writers: .safetensors bytes built here with
struct + json, laid out like real BERT and GPT-2 checkpoints (the position
table beside word embeddings, LayerNorm weights, an int64 position_ids buffer,
a bool attention mask), and .npy files from numpy's np.save. What posenc
writes is read back by posenc (bit-exact round trips of every dtype, any
strides) and by independent readers (np.load; the safetensors header parsed
here). Element types map exactly: uint16 -> int32, uint32 -> int64, uint64 ->
int64 when it fits.
"""

import json
import os
import struct

import numpy as np
import pytest
import torch

import posenc

# torch dtype -> (safetensors code, numpy dtype or None for bfloat16)
CODES = {
    torch.bool: ("BOOL", np.bool_),
    torch.uint8: ("U8", np.uint8),
    torch.int8: ("I8", np.int8),
    torch.int16: ("I16", np.int16),
    torch.int32: ("I32", np.int32),
    torch.int64: ("I64", np.int64),
    torch.float16: ("F16", np.float16),
    torch.bfloat16: ("BF16", None),
    torch.float32: ("F32", np.float32),
    torch.float64: ("F64", np.float64),
}
ALL_DTYPES = list(CODES)


def safetensors_bytes(entries, metadata=None):
    """A .safetensors file: entries (name, code, shape, raw little-endian bytes) laid out in order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, code, shape, raw in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # as the reference writer pads it
    return struct.pack("<Q", len(text)) + text + b"".join(raw for _, _, _, raw in entries)


def read_safetensors_header(path):
    """The header of a .safetensors file and the start of its data, read independently."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def bf16_bytes(values):
    """bfloat16 bits of float32 values that bfloat16 holds exactly (the upper halves)."""
    bits = np.asarray(values, dtype="<f4").view("<u4") >> 16
    return bits.astype("<u2").tobytes()


def entry(name, array, code=None):
    array = np.ascontiguousarray(array)
    return name, code or CODES_BY_NUMPY[array.dtype.newbyteorder("<").str], array.shape, \
        array.astype(array.dtype.newbyteorder("<")).tobytes()


CODES_BY_NUMPY = {"|b1": "BOOL", "|u1": "U8", "|i1": "I8", "<i2": "I16", "<u2": "U16", "<i4": "I32", "<u4": "U32",
                  "<i8": "I64", "<u8": "U64", "<f2": "F16", "<f4": "F32", "<f8": "F64"}


def bits(t):
    """The tensor's bit pattern, so NaN, -0.0 and infinities compare exactly."""
    views = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
             torch.float64: torch.int64}
    return t.view(views[t.dtype]) if t.dtype in views else t


def assert_same(got, expected):
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert torch.equal(bits(got), bits(expected.contiguous()))


def sample(dtype, shape=(3, 5), seed=0):
    """Values spanning the dtype: extremes, signs, and for floats -0.0, inf and nan."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        t = (torch.randn(shape, generator=g) * 100).to(dtype)
        flat = t.view(-1)
        if flat.numel() >= 4:
            flat[:4] = torch.tensor([-0.0, float("inf"), float("-inf"), float("nan")]).to(dtype)
        return t
    info = torch.iinfo(dtype)
    t = torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g, dtype=dtype)
    flat = t.view(-1)
    if flat.numel() >= 2:
        flat[:2] = torch.tensor([info.min, info.max], dtype=dtype)
    return t


# ---------------------------------------------------------------- checkpoints laid out like real ones

BERT_POSITIONS = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
GPT2_POSITIONS = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float16)


@pytest.fixture
def bert_file(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "bert.safetensors"
    path.write_bytes(safetensors_bytes([
        entry("bert.embeddings.word_embeddings.weight", rng.standard_normal((30, 8)).astype(np.float32)),
        entry("bert.embeddings.position_embeddings.weight", BERT_POSITIONS),
        entry("bert.embeddings.token_type_embeddings.weight", rng.standard_normal((2, 8)).astype(np.float32)),
        entry("bert.embeddings.LayerNorm.weight", np.ones(8, dtype=np.float32)),
        entry("bert.embeddings.LayerNorm.bias", np.zeros(8, dtype=np.float32)),
        entry("bert.embeddings.position_ids", np.arange(16, dtype=np.int64).reshape(1, 16)),
    ], metadata={"format": "pt"}))
    return path


@pytest.fixture
def gpt2_file(tmp_path):
    rng = np.random.default_rng(3)
    c_attn = np.array([1.5, -2.0, 0.15625, 2.0**100, -2.0**-100, 0.0] * 32, dtype=np.float32).reshape(8, 24)
    path = tmp_path / "gpt2.safetensors"
    path.write_bytes(safetensors_bytes([
        entry("transformer.wte.weight", rng.standard_normal((50, 8)).astype(np.float16)),
        entry("transformer.wpe.weight", GPT2_POSITIONS),
        ("transformer.h.0.attn.c_attn.weight", "BF16", (8, 24), bf16_bytes(c_attn)),
        entry("transformer.h.0.attn.bias", np.tril(np.ones((4, 4), dtype=np.bool_)).reshape(1, 1, 4, 4)),
        entry("transformer.ln_f.bias", np.zeros(8, dtype=np.float32)),
    ]))
    return path, c_attn


def test_the_position_table_of_a_bert_checkpoint_is_found_by_its_name(bert_file):
    table = posenc.load_tensor(bert_file)
    assert table.dtype == torch.float32 and table.shape == (16, 8)
    assert np.array_equal(table.numpy(), BERT_POSITIONS)
    assert torch.equal(posenc.load_tensor(str(bert_file), "bert.embeddings.position_embeddings.weight"), table)


def test_the_position_table_of_a_gpt2_checkpoint_is_found_by_its_name(gpt2_file):
    path, _ = gpt2_file
    table = posenc.load_tensor(path)
    assert table.dtype == torch.float16 and table.shape == (32, 8)
    assert np.array_equal(table.numpy(), GPT2_POSITIONS)


def test_every_tensor_of_a_checkpoint_in_file_order(bert_file, gpt2_file):
    tensors = posenc.load_tensors(bert_file)
    assert list(tensors) == ["bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                             "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
                             "bert.embeddings.LayerNorm.bias", "bert.embeddings.position_ids"]
    assert tensors["bert.embeddings.position_ids"].dtype == torch.int64
    assert tensors["bert.embeddings.position_ids"].tolist() == [list(range(16))]
    path, c_attn = gpt2_file
    tensors = posenc.load_tensors(path)
    assert list(tensors)[0] == "transformer.wte.weight"
    attn = tensors["transformer.h.0.attn.c_attn.weight"]
    assert attn.dtype == torch.bfloat16 and torch.equal(attn.float(), torch.from_numpy(c_attn))
    mask = tensors["transformer.h.0.attn.bias"]
    assert mask.dtype == torch.bool and mask.shape == (1, 1, 4, 4) and torch.equal(mask[0, 0], torch.ones(4, 4).tril().bool())


def test_every_element_type_maps_to_a_torch_dtype_exactly(tmp_path):
    arrays = {
        "bool": np.array([True, False, True]),
        "u8": np.array([0, 255, 7], dtype=np.uint8),
        "i8": np.array([-128, 127, 0], dtype=np.int8),
        "i16": np.array([-32768, 32767, 1], dtype=np.int16),
        "u16": np.array([0, 65535, 40000], dtype=np.uint16),
        "i32": np.array([-2**31, 2**31 - 1, 5], dtype=np.int32),
        "u32": np.array([0, 2**32 - 1, 3_000_000_000], dtype=np.uint32),
        "i64": np.array([-2**63, 2**63 - 1, 9], dtype=np.int64),
        "u64": np.array([0, 2**63 - 1, 12], dtype=np.uint64),  # every value fits int64
        "f16": np.array([65504, -0.0, 6e-8], dtype=np.float16),
        "f32": np.array([3.4e38, np.inf, 1e-45], dtype=np.float32),
        "f64": np.array([1.7e308, -np.inf, 5e-324], dtype=np.float64),
    }
    expected = {"bool": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "u16": torch.int32,
                "i32": torch.int32, "u32": torch.int64, "i64": torch.int64, "u64": torch.int64, "f16": torch.float16,
                "f32": torch.float32, "f64": torch.float64}
    path = tmp_path / "types.safetensors"
    path.write_bytes(safetensors_bytes([entry(name, a) for name, a in arrays.items()]))
    tensors = posenc.load_tensors(path)
    assert list(tensors) == list(arrays)
    for name, array in arrays.items():
        t = tensors[name]
        assert t.dtype == expected[name], name
        if array.dtype.kind == "f":
            assert np.array_equal(t.numpy().view(array.dtype.str.replace("f", "i")), array.view(
                array.dtype.str.replace("f", "i"))), name
        else:
            assert t.tolist() == [int(v) for v in array.tolist()], name


def test_zero_dimensional_and_empty_tensors(tmp_path):
    path = tmp_path / "shapes.safetensors"
    path.write_bytes(safetensors_bytes([
        ("scalar", "F64", (), struct.pack("<d", 2.5)),
        ("empty", "F32", (0, 3), b""),
        ("one", "I32", (1,), struct.pack("<i", -4)),
    ]))
    tensors = posenc.load_tensors(path)
    assert tensors["scalar"].shape == () and tensors["scalar"].item() == 2.5
    assert tensors["empty"].shape == (0, 3) and tensors["empty"].dtype == torch.float32
    assert tensors["one"].tolist() == [-4]


# ---------------------------------------------------------------- .npy from numpy

@pytest.mark.parametrize("array, dtype", [
    (np.arange(24, dtype=np.float32).reshape(4, 6) / 7, torch.float32),
    (np.linspace(-1, 1, 10).astype(">f8").reshape(2, 5), torch.float64),  # big-endian, swapped on reading
    (np.array([[1, -2], [3, -4]], dtype=">i4"), torch.int32),
    (np.array([0, 65535], dtype=np.uint16), torch.int32),
    (np.array([0, 4294967295], dtype=np.uint32), torch.int64),
    (np.array([5, 2**63 - 1], dtype=np.uint64), torch.int64),
    (np.array([True, False]), torch.bool),
    (np.array(3.25, dtype=np.float16), torch.float16),
    (np.zeros((0, 4), dtype=np.int8), torch.int8),
])
def test_npy_files_written_by_numpy(tmp_path, array, dtype):
    path = tmp_path / "a.npy"
    np.save(path, array)
    t = posenc.load_tensor(path)
    assert t.dtype == dtype and tuple(t.shape) == array.shape
    assert np.array_equal(t.numpy(), array.astype(array.dtype.newbyteorder("=")))
    assert list(posenc.load_tensors(path)) == [""]
    assert torch.equal(posenc.load_tensors(path)[""], t)


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_safetensors_round_trip_of_every_dtype(tmp_path, dtype):
    tensors = {"a.weight": sample(dtype), "b": sample(dtype, (2, 1, 4), seed=1), "scalar": sample(dtype, ())}
    path = tmp_path / "t.safetensors"
    posenc.save_tensor(path, tensors, metadata={"format": "pt", "source": "posenc"})
    back = posenc.load_tensors(path)
    assert list(back) == list(tensors)
    for name in tensors:
        assert_same(back[name], tensors[name])
    # An independent reader sees the documented layout.
    header, data = read_safetensors_header(path)
    assert header["__metadata__"] == {"format": "pt", "source": "posenc"}
    offset = 0
    for name, t in tensors.items():
        assert header[name]["dtype"] == CODES[dtype][0]
        assert header[name]["shape"] == list(t.shape)
        size = t.numel() * t.element_size()
        assert header[name]["data_offsets"] == [offset, offset + size]
        assert data[offset:offset + size] == bits(t).contiguous().numpy().tobytes()
        offset += size
    assert offset == len(data)


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d != torch.bfloat16])
def test_npy_round_trip_of_every_numpy_dtype(tmp_path, dtype):
    t = sample(dtype, (4, 3))
    path = tmp_path / "t.npy"
    posenc.save_tensor(path, t)
    assert_same(posenc.load_tensor(path), t)
    assert np.array_equal(np.load(path).view(np.uint8), t.numpy().view(np.uint8))  # numpy reads it, bit for bit


def test_non_contiguous_tensors_are_saved_by_value(tmp_path):
    base = sample(torch.float32, (6, 8))
    views = {"columns": base[:, ::3], "transposed": base.t(), "expanded": base[:1].expand(3, 8)}
    path = tmp_path / "views.safetensors"
    posenc.save_tensor(path, views)
    back = posenc.load_tensors(path)
    for name, view in views.items():
        assert_same(back[name], view)
    posenc.save_tensor(tmp_path / "t.npy", base.t())
    assert_same(posenc.load_tensor(tmp_path / "t.npy"), base.t())


def test_save_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "t.safetensors"
    posenc.save_tensor(path, {"x": torch.zeros(3)})
    posenc.save_tensor(path, {"y": torch.ones(2, dtype=torch.float64)})
    assert list(posenc.load_tensors(path)) == ["y"]
    assert os.listdir(tmp_path) == ["t.safetensors"]  # no temporary file left behind


def test_a_position_table_saved_and_analyzed(tmp_path):
    table = posenc.sinusoidal(32, 16)
    posenc.save_tensor(tmp_path / "pe.safetensors", {"model.embed_positions.weight": table,
                                                     "model.embed_tokens.weight": torch.randn(10, 16)})
    loaded = posenc.load_tensor(tmp_path / "pe.safetensors")
    assert torch.equal(loaded, table)
    assert torch.equal(posenc.proximity(loaded), posenc.proximity(table))


def test_bool_bytes_other_than_zero_and_one_read_as_true(tmp_path):
    # torch assumes bool bytes are 0 or 1; a file may hold any nonzero byte for true.
    path = tmp_path / "mask.safetensors"
    path.write_bytes(safetensors_bytes([("m", "BOOL", (4,), bytes([0, 1, 2, 255]))]))
    mask = posenc.load_tensor(path)
    assert mask.tolist() == [False, True, True, True]
    assert mask.view(torch.uint8).tolist() == [0, 1, 1, 1]
