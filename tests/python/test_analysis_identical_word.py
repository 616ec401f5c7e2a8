"""posenc.identical_word_attention on tiny runs trained with `posenc train`
(1 layer, seq_len 8, 2 steps; about a second): rows sum to 1; without any
positional information every row is uniform, since identical tokens cannot
be told apart; a rotary model is not; lengths, paths and exact messages. The
values themselves are checked against a float64 reference in C++
(tests/analysis_torch)."""

import os
import pathlib
import subprocess

import pytest
import torch

import posenc

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))

TINY = ["--task", "order", "--layers", "1", "--dim", "16", "--heads", "2", "--seq-len", "8", "--batch", "8",
        "--steps", "2", "--warmup", "1", "--checkpoint-every", "2", "--log-every", "2", "--threads", "1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    root = tmp_path_factory.mktemp("identical_word")
    out = {}
    for encoding in ("none", "rope"):
        out[encoding] = root / encoding
        r = subprocess.run([CLI, "train", *TINY, "--encoding", encoding, "--out", str(out[encoding])],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    return out


def test_without_positions_every_row_is_uniform(runs):
    a = posenc.identical_word_attention(runs["none"])
    assert a.dtype == torch.float64 and a.shape == (8, 8)
    # 1e-6: float32 softmax of equal logits, averaged in float64.
    assert torch.allclose(a, torch.full((8, 8), 1 / 8, dtype=torch.float64), atol=1e-6, rtol=0)


def test_a_rotary_model_is_not_uniform_and_rows_sum_to_one(runs):
    a = posenc.identical_word_attention(str(runs["rope"]), length=12, words=5)
    assert a.shape == (12, 12)
    assert torch.allclose(a.sum(dim=1), torch.ones(12, dtype=torch.float64), atol=1e-6, rtol=0)  # float32 rows
    assert float((a - 1 / 12).abs().max()) > 1e-3


def test_words_beyond_the_tasks_tokens_use_every_one(runs):
    # The default 64 words exceed the 26 fillers of a vocab-32 `order` run: each filler is used once.
    assert torch.equal(posenc.identical_word_attention(runs["rope"]),
                       posenc.identical_word_attention(runs["rope"], words=26))


def test_a_checkpoint_directory_is_accepted(runs):
    checkpoint = runs["none"] / "checkpoints" / "step-00000002"
    assert torch.equal(posenc.identical_word_attention(checkpoint, words=3),
                       posenc.identical_word_attention(runs["none"], words=3))


def test_identical_word_errors(runs, tmp_path):
    with pytest.raises(ValueError) as info:
        posenc.identical_word_attention(runs["none"], words=0)
    assert str(info.value) == "[identical word] words must be >= 1, got 0"
    with pytest.raises(ValueError) as info:
        posenc.identical_word_attention(runs["none"], length=-1)
    assert str(info.value) == "[identical word] length must be >= 1, got -1"
    with pytest.raises(RuntimeError) as info:
        posenc.identical_word_attention(tmp_path)
    assert str(info.value) == f"[checkpoint] {tmp_path} is not a posenc run (no config.json)"
