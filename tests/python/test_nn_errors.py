"""Bad constructor arguments and inputs of the posenc.nn modules: the exact messages (the C++ modules'
words under the module's name where they exist, else the wrapped op's)."""

import pytest
import torch

import posenc.nn as pnn

LINEAR = {"rope_type": "linear", "factor": 2.0}

CASES = [
    (lambda: pnn.SinusoidalEncoding(7), ValueError, "[sinusoidal] dim must be even, got 7"),
    (lambda: pnn.SinusoidalEncoding(8, base=-1.0), ValueError, "[sinusoidal] base must be finite and > 0, got -1"),
    (lambda: pnn.SinusoidalEncoding(8, layout="x"), ValueError,
     "[sinusoidal] layout must be one of interleaved, half, cos-sin, got 'x'"),
    (lambda: pnn.SinusoidalEncoding2d(6), ValueError,
     "[sinusoidal-2d] dim must be divisible by 4 (an even share per axis), got 6"),
    (lambda: pnn.SinusoidalEncoding3d(8), ValueError,
     "[sinusoidal-3d] dim must be divisible by 6 (an even share per axis), got 8"),
    (lambda: pnn.LearnedEncoding(0, 4), ValueError, "[LearnedEncoding] max_positions must be at least 1, got 0"),
    (lambda: pnn.LearnedEncoding(4, 0), ValueError, "[LearnedEncoding] dim must be positive, got 0"),
    (lambda: pnn.LearnedEncoding(4, 4, init_std=-1), ValueError,
     "[LearnedEncoding] init_std must be finite and >= 0, got -1"),
    (lambda: pnn.LearnedEncoding(4.0, 4), TypeError, "[LearnedEncoding] max_positions must be an int, got float"),
    (lambda: pnn.LearnedEncoding.from_pretrained_weight(torch.zeros(3)), ValueError,
     "[LearnedEncoding] weight must be a 2-D floating tensor (max_positions, dim), got 1-D torch.float32"),
    (lambda: pnn.LearnableSinusoidalEncoding(7), ValueError, "[learnable-sinusoidal] dim must be even, got 7"),
    (lambda: pnn.RotaryEmbedding(0), ValueError, "[RotaryEmbedding] head_dim must be positive, got 0"),
    (lambda: pnn.RotaryEmbedding(8, rotary_dim=7), ValueError, "[RotaryEmbedding] rotary_dim must be even, got 7"),
    (lambda: pnn.RotaryEmbedding(8, rotary_dim=10), ValueError,
     "[RotaryEmbedding] rotary_dim must be at most head_dim (8), got 10"),
    (lambda: pnn.RotaryEmbedding(8, layout="cos-sin"), ValueError,
     "[RotaryEmbedding] layout must be 'half' or 'interleaved', got 'cos-sin'"),
    (lambda: pnn.RotaryEmbedding(8, scaling=LINEAR, learned_frequencies=True), ValueError,
     "[RotaryEmbedding] learned_frequencies start from base^(-2i/R) and take no scaling, got rope_type 'linear'"),
    (lambda: pnn.RotaryEmbedding(8, scaling=LINEAR, xpos_scale_base=512), ValueError,
     "[RotaryEmbedding] xPos uses the unscaled frequencies, got rope_type 'linear'"),
    (lambda: pnn.RotaryEmbedding(8, xpos_scale_base=512, learned_frequencies=True), ValueError,
     "[RotaryEmbedding] xPos and learned_frequencies cannot be combined"),
    (lambda: pnn.RotaryEmbedding(8, seq_len=0), ValueError, "[RotaryEmbedding] seq_len must be at least 1, got 0"),
    (lambda: pnn.RotaryEmbedding(8, attention_scaling=0.0), ValueError,
     "[RotaryEmbedding] attention_scaling must be finite and > 0, got 0"),
    (lambda: pnn.RotaryEmbedding(8, xpos_scale_base=512, attention_scaling=2.0), ValueError,
     "[RotaryEmbedding] attention_scaling applies to the cached tables; it cannot be combined with "
     "learned_frequencies or xPos"),
    (lambda: pnn.RotaryEmbedding(8, scaling={"rope_type": "linear"}), ValueError, "[rope] linear needs factor"),
    (lambda: pnn.RotaryEmbedding(8, scaling={"foo": 1}), ValueError, "[rope] unknown rope_scaling key 'foo'"),
    (lambda: pnn.RotaryEmbeddingAxial(8, dims_per_axis=[4, 2]), ValueError,
     "[rope-axial] dims_per_axis must sum to rotary_dim = 8, got 6 (4+2)"),
    (lambda: pnn.RotaryEmbeddingAxial(8, rotary_dim=3), ValueError,
     "[RotaryEmbeddingAxial] rotary_dim must be even, got 3"),
    (lambda: pnn.MultimodalRotaryEmbedding(8, [2, 1, 2]), ValueError,
     "[mrope] mrope_section must sum to rotary_dim/2 = 4, got 5 (2+1+2)"),
    (lambda: pnn.AlibiBias(0), ValueError, "[AlibiBias] num_heads must be >= 1, got 0"),
    (lambda: pnn.AlibiBias(4, slopes=torch.ones(3)), ValueError,
     "[AlibiBias] slopes must be a 1-D floating tensor of num_heads = 4 values, got (3,) torch.float32"),
    (lambda: pnn.T5Bias(4, num_buckets=31), ValueError,
     "[T5Bias] num_buckets must be even when bidirectional (half per direction), got 31"),
    (lambda: pnn.T5Bias(4, max_distance=16), ValueError, "[T5Bias] max_distance must be > num_buckets/2 = 16, got 16"),
    (lambda: pnn.T5Bias(4, init_std=float("nan")), ValueError, "[T5Bias] init_std must be finite and >= 0, got nan"),
    (lambda: pnn.T5Bias.from_pretrained_weight(torch.zeros(4, 3, 2)), ValueError,
     "[T5Bias] weight must be a 2-D floating tensor (num_buckets, num_heads), got 3-D torch.float32"),
    (lambda: pnn.AlibiBias2d(4, 0, 3), ValueError, "[AlibiBias2d] height must be >= 1, got 0"),
    (lambda: pnn.AlibiBias2d(4, 2, 3, distance="cheb"), ValueError,
     "[AlibiBias2d] distance must be 'euclidean' or 'manhattan', got 'cheb'"),
    (lambda: pnn.AlibiBias2d(4, 2, 3)(5, 6), ValueError,
     "[AlibiBias2d] q_len and k_len must both be height*width = 6, got 5 and 6"),
    (lambda: pnn.T5Bias2d(4, 2, 3, num_buckets=3), ValueError,
     "[T5Bias2d] num_buckets must be even when bidirectional (half per direction), got 3"),
    (lambda: pnn.ShawRelative(-1, 8), ValueError, "[ShawRelative] max_distance must be >= 0, got -1"),
    (lambda: pnn.ShawRelative(2, 0), ValueError, "[ShawRelative] head_dim must be >= 1, got 0"),
    (lambda: pnn.ShawRelative(2, 8, num_heads=-1), ValueError,
     "[ShawRelative] num_heads must be >= 0 (0: one table shared by the heads), got -1"),
    (lambda: pnn.ShawRelative.from_bert_distance_embedding(torch.zeros(14, 4), max_position_embeddings=8), ValueError,
     "[ShawRelative] weight must have 2*max_position_embeddings-1 = 15 rows, got 14"),
    (lambda: pnn.ShawRelative.from_bert_distance_embedding(torch.zeros(15, 4), max_position_embeddings=8,
                                                           position_embedding_type="absolute"), ValueError,
     "[ShawRelative] position_embedding_type must be 'relative_key' or 'relative_key_query', got 'absolute'"),
    (lambda: pnn.ShawRelative(2, 4, key_logits=True).attention_kwargs(3, 3), ValueError,
     "[ShawRelative] key_logits needs k (B, H, Tk, Dh) in attention_kwargs: its term k_j . a(j - i') depends on "
     "the keys"),
    (lambda: pnn.ShawRelative(2, 4, values=False).values(torch.zeros(1, 1, 2, 2)), RuntimeError,
     "[ShawRelative] has no value vectors"),
    (lambda: pnn.ShawRelative(2, 4)(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3, 4)), ValueError,
     "[ShawRelative] q must be 4-D (B, H, Tq, Dh), got 3-D"),
    (lambda: pnn.SinusoidalRelative(2, 7), ValueError, "[SinusoidalRelative] head_dim must be even, got 7"),
    (lambda: pnn.SinusoidalRelative(2, 8, base=0.0), ValueError,
     "[SinusoidalRelative] base must be finite and > 0, got 0"),
    (lambda: pnn.TransformerXLRelative(0, 8), ValueError, "[TransformerXLRelative] num_heads must be >= 1, got 0"),
    (lambda: pnn.TransformerXLRelative(2, 8, model_dim=7), ValueError,
     "[TransformerXLRelative] model_dim must be even (sines then cosines), got 7"),
    (lambda: pnn.Relative2d(0, 3, 8), ValueError, "[Relative2d] height must be >= 1, got 0"),
    (lambda: pnn.Relative2d(2, 3, 4).attention_kwargs(5, 6), ValueError,
     "[Relative2d] q and k must both have height*width = 6 positions, got 5 and 6"),
    (lambda: pnn.RotaryEmbedding(8)(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)), ValueError,
     "[RotaryEmbedding] q must have shape (..., T, head_dim = 8), got (1, 2, 3, 4)"),
    (lambda: pnn.RotaryEmbedding(8)(torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3, 8), torch.arange(3).int()),
     TypeError, "[RotaryEmbedding] positions must be an int64 tensor, got torch.int32"),
    (lambda: pnn.RotaryEmbedding(8)(torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 4, 8)), ValueError,
     "[RotaryEmbedding] positions None means arange(T) for q and k of one length, got 3 and 4; pass positions"),
]


@pytest.mark.parametrize("make, error, message", CASES, ids=[c[2][:60] for c in CASES])
def test_message(make, error, message):
    with pytest.raises(error) as raised:
        make()
    assert str(raised.value) == message
