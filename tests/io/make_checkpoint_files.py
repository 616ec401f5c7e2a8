#!/usr/bin/python3
"""Writes the io tests' data files, independently of posenc's writers.

.safetensors files are assembled here from the format's definition
(huggingface/safetensors README: an 8-byte little-endian header length N, an
N-byte UTF-8 JSON header padded with spaces, then the data buffer with
offsets relative to its start); .npy files come from numpy itself
(np.lib.format.write_array, every numeric dtype, both byte orders, versions
1.0, 2.0 and 3.0). Standard library and numpy only.

Values follow one formula that the C++ tests restate on their own
(tests/io/checkpoint_data.h): element i of the tensor with seed s is
  k = (37 * i + 11 * s) % 201
  unsigned types: k; signed: k - 100; floats: (k - 100) / 8; bool: k % 3 == 0
all exact in every type, float16 and bfloat16 included.

Usage: /usr/bin/python3 tests/io/make_checkpoint_files.py [DATA_DIR [CORPUS_DIR]]
(defaults: tests/io/data and tests/fuzz/corpus next to this script). The
outputs are committed; rerun only to change them.
"""
import io
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# numpy type code -> safetensors dtype name
CODES = ["b1", "u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f2", "f4", "f8"]
SAFETENSORS = {"b1": "BOOL", "u1": "U8", "i1": "I8", "u2": "U16", "i2": "I16", "u4": "U32",
               "i4": "I32", "u8": "U64", "i8": "I64", "f2": "F16", "f4": "F32", "f8": "F64"}


def values(code, shape, seed):
    """The formula above, as a numpy array of native (little-endian) `code`."""
    n = int(np.prod(shape, dtype=np.int64))
    k = (37 * np.arange(n, dtype=np.int64) + 11 * seed) % 201
    kind = code[0]
    if kind == "b":
        v = k % 3 == 0
    elif kind == "u":
        v = k
    elif kind == "i":
        v = k - 100
    else:
        v = (k - 100) / 8.0
    return np.asarray(v).astype("<" + code if code not in ("b1", "u1", "i1") else "|" + code).reshape(shape)


def bfloat16_bytes(shape, seed):
    """bfloat16 = the upper 16 bits of float32; the formula's values are exact in both."""
    f = values("f4", shape, seed).astype("<f4")
    return (f.view("<u4") >> 16).astype("<u2").tobytes()


def safetensors_bytes(tensors, metadata=None, key_order=None):
    """tensors: list of (name, dtype name, shape, data bytes) in data order.
    key_order: the order of the JSON keys (default: sorted, unlike the data)."""
    header = {}
    entries = {}
    offset = 0
    for name, dtype, shape, data in tensors:
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in (key_order or sorted(entries)):
        header[name] = entries[name]
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def f32(shape, seed):
    return values("f4", shape, seed).tobytes()


def bert_like():
    # BERT-base's names and layout, small sizes: vocab 30, 16 positions, hidden 8.
    h = 8
    t = [
        ("bert.embeddings.word_embeddings.weight", "F32", [30, h], f32([30, h], 1)),
        ("bert.embeddings.position_embeddings.weight", "F32", [16, h], f32([16, h], 2)),
        ("bert.embeddings.token_type_embeddings.weight", "F32", [2, h], f32([2, h], 3)),
        ("bert.embeddings.LayerNorm.weight", "F32", [h], f32([h], 4)),
        ("bert.embeddings.LayerNorm.bias", "F32", [h], f32([h], 5)),
        ("bert.encoder.layer.0.attention.self.query.weight", "F32", [h, h], f32([h, h], 6)),
        ("bert.encoder.layer.0.attention.self.query.bias", "F32", [h], f32([h], 7)),
        ("bert.pooler.dense.weight", "F32", [h, h], f32([h, h], 8)),
    ]
    return safetensors_bytes(t)


def gpt2_like():
    # GPT-2's names and layout, small sizes, with the metadata torch writes.
    h = 8
    t = [
        ("transformer.wte.weight", "F32", [50, h], f32([50, h], 1)),
        ("transformer.wpe.weight", "F32", [32, h], f32([32, h], 2)),
        ("transformer.h.0.ln_1.weight", "F32", [h], f32([h], 3)),
        ("transformer.h.0.ln_1.bias", "F32", [h], f32([h], 4)),
        ("transformer.h.0.attn.c_attn.weight", "F32", [h, 3 * h], f32([h, 3 * h], 5)),
        ("transformer.h.0.attn.c_attn.bias", "F32", [3 * h], f32([3 * h], 6)),
        ("transformer.ln_f.weight", "F32", [h], f32([h], 7)),
        ("transformer.ln_f.bias", "F32", [h], f32([h], 8)),
    ]
    # JSON keys in data order, metadata first, compact: the layout posenc's
    # writer produces, so the test can also compare the writer byte for byte.
    return safetensors_bytes(t, metadata={"format": "pt"}, key_order=[x[0] for x in t])


def all_dtypes():
    # One [2, 3] tensor per dtype (seed = its index), a 0-d and an empty tensor,
    # JSON keys in reverse order so the reader must sort by offset.
    t = []
    for seed, code in enumerate(CODES):
        t.append((SAFETENSORS[code], SAFETENSORS[code], [2, 3], values(code, [2, 3], seed).tobytes()))
    t.append(("BF16", "BF16", [2, 3], bfloat16_bytes([2, 3], len(CODES))))
    t.append(("scalar", "F64", [], values("f8", [], 20).tobytes()))
    t.append(("empty", "F32", [0, 4], b""))
    names = [x[0] for x in t]
    return safetensors_bytes(t, metadata={"format": "pt", "note": "caf\u00e9 \u2713"}, key_order=names[::-1])


def npy_bytes(array, version):
    f = io.BytesIO()
    np.lib.format.write_array(f, array, version=version, allow_pickle=True)
    return f.getvalue()


def npy_files():
    """name -> bytes: every dtype x byte order x version, numpy-written, plus
    special float16 values and the dtypes the reader must refuse."""
    files = {}
    for seed, code in enumerate(CODES):
        orders = ["|"] if code in ("b1", "u1", "i1") else ["<", ">"]
        for order in orders:
            a = values(code, [2, 3], seed).astype(order + code)
            tag = {"|": "na", "<": "le", ">": "be"}[order]
            for major in (1, 2, 3):
                files["%s_%s_v%d.npy" % (code, tag, major)] = npy_bytes(a, (major, 0))
    # 15 dimensions: numpy's 20 spaces of growth room push the data from 128 to 192.
    files["f4_growth_v1.npy"] = npy_bytes(values("f4", [2] + [1] * 14, 10), (1, 0))
    # float16 bit patterns: smallest subnormal, largest subnormal, smallest
    # normal, largest finite, inf, -inf, -0, a NaN.
    special = np.array([0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x8000, 0x7E00], dtype="<u2")
    files["f2_special_le.npy"] = npy_bytes(special.view("<f2"), (1, 0))
    files["f2_special_be.npy"] = npy_bytes(special.view("<f2").astype(">f2"), (1, 0))
    # Refused: numpy writes them all the same way.
    files["refuse_object.npy"] = npy_bytes(np.array([1, "a", None], dtype=object), (1, 0))
    files["refuse_complex.npy"] = npy_bytes(np.array([1 + 2j], dtype="<c8"), (1, 0))
    files["refuse_unicode.npy"] = npy_bytes(np.array(["ab"], dtype="<U2"), (1, 0))
    files["refuse_bytes.npy"] = npy_bytes(np.array([b"ab"], dtype="|S2"), (1, 0))
    files["refuse_void.npy"] = npy_bytes(np.zeros(1, dtype="|V4"), (1, 0))
    files["refuse_datetime.npy"] = npy_bytes(np.array(["2024-01-01"], dtype="<M8[D]"), (1, 0))
    files["refuse_structured.npy"] = npy_bytes(np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]), (1, 0))
    # A field name outside latin-1: only format 3.0 (UTF-8) can hold it.
    files["refuse_structured_utf8_v3.npy"] = npy_bytes(np.zeros(2, dtype=[("\u03c0", "<f4")]), (3, 0))
    files["refuse_fortran.npy"] = npy_bytes(np.asfortranarray(values("f4", [2, 3], 0)), (1, 0))
    return files


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def main():
    data_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data")
    corpus_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "fuzz", "corpus")
    checkpoints = {"bert_like.safetensors": bert_like(), "gpt2_like.safetensors": gpt2_like(),
                   "all_dtypes.safetensors": all_dtypes()}
    for name, data in checkpoints.items():
        write(data_dir, name, data)
    npys = npy_files()
    for name, data in npys.items():
        write(data_dir, name, data)

    # Fuzz seeds: small valid files of each dtype, and malformed ones.
    st = os.path.join(corpus_dir, "safetensors")
    write(st, "all_dtypes.safetensors", checkpoints["all_dtypes.safetensors"])
    small = [("transformer.wpe.weight", "F32", [4, 2], f32([4, 2], 2)), ("ln.bias", "F16", [2], values("f2", [2], 3).tobytes())]
    write(st, "small_gpt2.safetensors", safetensors_bytes(small, metadata={"format": "pt"}))
    write(st, "empty_header.safetensors", safetensors_bytes([]))
    good = safetensors_bytes(small)
    n = struct.unpack("<Q", good[:8])[0]
    header = good[8:8 + n]
    def with_header(text):
        text = text.encode("utf-8") if isinstance(text, str) else text
        return struct.pack("<Q", len(text)) + text + good[8 + n:]
    write(st, "bad_duplicate_key.safetensors",
          with_header('{"a":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]},"a":{"dtype":"F16","shape":[2],"data_offsets":[32,36]}}'))
    write(st, "bad_overlap.safetensors",
          with_header('{"a":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]},"b":{"dtype":"F16","shape":[2],"data_offsets":[30,34]}}'))
    write(st, "bad_surrogate_escape.safetensors",
          with_header('{"\\ud83d\\ude00":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]},"\\udc00":{"dtype":"F16","shape":[2],"data_offsets":[32,36]}}'))
    write(st, "bad_float_shape.safetensors", with_header(header.replace(b"[4,2]", b"[4.0,2]")))
    write(st, "bad_length.safetensors", struct.pack("<Q", 2 ** 63) + good[8:])
    write(st, "bad_nesting.safetensors", with_header("{\"a\":" + "[" * 40 + "]" * 40 + "}"))

    npy_dir = os.path.join(corpus_dir, "npy")
    for name, data in npys.items():
        # Every dtype in version 1.0, big-endian twice, all three versions once, refusals.
        if name.endswith("_v1.npy") or name.startswith("f4_le") or name.startswith("refuse_") or "special" in name:
            if not (name.endswith("_be_v1.npy") and not name.startswith(("f4", "i8"))):
                write(npy_dir, name, data)
    write(npy_dir, "bad_truncated.npy", npys["f4_le_v1.npy"][:-3])
    write(npy_dir, "bad_header_length.npy", npys["f4_le_v1.npy"][:8] + b"\xff\xff" + npys["f4_le_v1.npy"][10:])


if __name__ == "__main__":
    main()
