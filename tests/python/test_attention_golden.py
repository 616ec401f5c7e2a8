"""Fused attention and MultiheadAttention against values saved from the build before the terms became a
value (commit 06c9878): outputs and gradients equal bit for bit, for every term and every registry family.

golden/attention_cases.py holds the cases; golden/attention_golden.pt the values it wrote with that build.
A change that moves a single bit here changed the arithmetic, not only the plumbing.
"""

import pathlib

import pytest
import torch

from golden import attention_cases

GOLDEN = pathlib.Path(__file__).parent / "golden" / "attention_golden.pt"


@pytest.fixture(scope="module")
def results():
    threads = torch.get_num_threads()
    try:
        return attention_cases.all_results()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def golden():
    return torch.load(GOLDEN)


def test_every_saved_case_is_computed(results, golden):
    assert sorted(results) == sorted(golden)


@pytest.mark.parametrize("name", sorted(torch.load(GOLDEN)))
def test_bit_identical(name, results, golden):
    want, got = golden[name], results[name]
    if isinstance(want, str):  # a case the old build refused: the same words
        assert got == want
        return
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, (name, i)
        assert torch.equal(a, b), (name, i, float((a.double() - b.double()).abs().max()))
