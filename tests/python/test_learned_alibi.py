"""The scratch family learned-alibi (docs/families.md): two library files and a CMake line give the C++
module, the generated Python class, the registry name and MultiheadAttention; its bias equals ALiBi's at
initialisation, and its slopes learn."""

import torch

import posenc
import posenc.nn as pnn


def test_generated_class_equals_alibi_at_start_and_learns():
    m = pnn.LearnedAlibiBias(4, causal=True).double()
    assert [n for n, _ in m.named_parameters()] == ["slopes"]
    assert torch.equal(m(5, 7), posenc.alibi_bias(4, 5, 7, causal=True, dtype=torch.float64))
    attn = pnn.MultiheadAttention(16, 4, encoding="learned-alibi", causal=True)
    assert type(attn.bias) is pnn.LearnedAlibiBias
    attn(torch.randn(2, 6, 16)).sum().backward()
    assert attn.bias.slopes.grad.abs().sum() > 0
