"""DeBERTa (He et al. 2021) from Python: torch.ops.posenc.deberta_row_index against Hugging Face's
make_log_bucket_position (its torch code, copied as a reference), posenc.attention's rel_q / rel_index
terms under torch.autograd.gradcheck on both paths (seeds, non-contiguous, empty), posenc.nn.DebertaRelative
against HF's disentangled_attention_bias transcribed in float64, MultiheadAttention(encoding="deberta")
against the plain formula (values and gradients), share_att_key, and the refusals word for word."""

import math

import pytest
import torch
from torch.nn.utils.stateless import functional_call

import posenc
import posenc.nn as pnn

F64 = torch.float64


def hf_make_log_bucket_position(relative_pos, bucket_size, max_position):
    """modeling_deberta_v2.make_log_bucket_position, as HF writes it (float32 default dtype)."""
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where((relative_pos < mid) & (relative_pos > -mid), torch.tensor(mid - 1).type_as(relative_pos),
                          torch.abs(relative_pos))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign).to(torch.long)


@pytest.mark.parametrize("buckets,max_rel", [(256, 512), (256, 256), (128, 512), (8, 16), (3, 3), (512, 4096)])
def test_row_index_equals_hf_buckets(buckets, max_rel):
    k = 6000
    index = torch.ops.posenc.deberta_row_index(k, buckets, max_rel)
    delta = k - torch.arange(2 * k + 1)  # element c: offset d = c - K, delta = i' - j = -d
    want = torch.clamp(hf_make_log_bucket_position(delta, buckets, max_rel) + buckets, 0, 2 * buckets - 1)
    assert torch.equal(index, want)


def hf_rel_att(q, k, pos_key, pos_query, buckets, max_rel, scale_factor):
    """disentangled_attention_bias (HF), queries at key positions i + Tk - Tq; pos_* [H, 2 span, Dh] or None."""
    q_len, k_len = q.shape[2], k.shape[2]
    span = buckets
    q_ids = torch.arange(q_len) + (k_len - q_len)
    k_ids = torch.arange(k_len)
    relative_pos = hf_make_log_bucket_position(q_ids[:, None] - k_ids[None, :], buckets, max_rel)
    r_pos = hf_make_log_bucket_position(k_ids[:, None] - q_ids[None, :], buckets, max_rel)
    scale = math.sqrt(q.shape[-1] * scale_factor)
    score = 0
    if pos_key is not None:
        c2p_att = torch.matmul(q, pos_key.transpose(-1, -2))
        c2p_pos = torch.clamp(relative_pos + span, 0, span * 2 - 1)
        score = score + torch.gather(c2p_att, -1, c2p_pos.expand(q.shape[0], q.shape[1], q_len, k_len)) / scale
    if pos_query is not None:
        p2c_pos = torch.clamp(-r_pos + span, 0, span * 2 - 1)
        p2c_att = torch.matmul(k, pos_query.transpose(-1, -2))
        p2c_att = torch.gather(p2c_att, -1, p2c_pos.expand(q.shape[0], q.shape[1], k_len, q_len)).transpose(-1, -2)
        score = score + p2c_att / scale
    return score


@pytest.mark.parametrize("path", ["fused", "composed"])
@pytest.mark.parametrize("seed", [0, 1])
def test_attention_terms_gradcheck(path, seed):
    g = torch.Generator().manual_seed(seed)
    b, h, tq, tk, dh, rows = 1, 2, 5, 9, 3, 8
    r = lambda *s: torch.randn(*s, generator=g, dtype=F64)  # noqa: E731
    q = r(b, h, dh, tq).transpose(-1, -2).requires_grad_()  # non-contiguous
    k, v = r(b, h, tk, dh).requires_grad_(), r(b, h, tk, dh).requires_grad_()
    rel_k, rel_q = r(h, rows, dh).requires_grad_(), r(rows, dh).requires_grad_()  # per head and shared
    index = torch.ops.posenc.deberta_row_index(tk - 1, 4, 8)
    mask = torch.zeros(b, tk, dtype=torch.bool)
    mask[0, 1] = True

    def f(q, k, v, rel_k, rel_q):
        return posenc.attention(q, k, v, rel_k=rel_k, rel_q=rel_q, rel_index=index, causal=True,
                                key_padding_mask=mask, scale=0.4, path=path)

    assert torch.autograd.gradcheck(f, (q, k, v, rel_k, rel_q))
    # rel_q alone, no index (rows clip(d) + K), and empty queries.
    assert torch.autograd.gradcheck(lambda q, k, t: posenc.attention(q, k, v.detach(), rel_q=t, path=path),
                                    (q, k, r(5, dh).requires_grad_()))
    assert torch.autograd.gradcheck(
        lambda k, t: posenc.attention(q.detach()[:, :, :0], k, v.detach(), rel_q=t, rel_index=index, path=path),
        (k, rel_k))


def test_attention_terms_equal_hf_bias():
    torch.manual_seed(3)
    b, h, tq, tk, dh = 2, 2, 40, 70, 8
    q, k, v = torch.randn(b, h, tq, dh, dtype=F64), torch.randn(b, h, tk, dh, dtype=F64), torch.randn(b, h, tk, dh,
                                                                                                        dtype=F64)
    pk, pq = torch.randn(h, 16, dh, dtype=F64), torch.randn(h, 16, dh, dtype=F64)
    index = torch.ops.posenc.deberta_row_index(tk - 1, 8, 16)
    scale = 1 / math.sqrt(3 * dh)
    want = torch.softmax(q @ k.transpose(-1, -2) * scale + hf_rel_att(q, k, pk, pq, 8, 16, 3), -1) @ v
    for path in ("fused", "composed"):
        out = posenc.attention(q, k, v, rel_k=pk, rel_q=pq, rel_index=index, scale=scale, path=path)
        assert (out - want).abs().max() < 1e-12, path


def _module(**kwargs):
    torch.manual_seed(4)
    m = pnn.DebertaRelative(2, 8, init_std=0.5, **kwargs).double()
    with torch.no_grad():
        m.norm_rel_ebd.weight.uniform_(0.5, 1.5)
        m.norm_rel_ebd.bias.uniform_(-0.2, 0.2)
    return m


@pytest.mark.parametrize("buckets,max_rel,tq,tk", [(256, 512, 300, 300), (8, 16, 40, 40), (8, 16, 9, 30)])
def test_module_logits_equal_hf(buckets, max_rel, tq, tk):
    m = _module(position_buckets=buckets, max_relative_positions=max_rel)
    q, k = torch.randn(2, 2, tq, 8, dtype=F64), torch.randn(2, 2, tk, 8, dtype=F64)
    pos_key, pos_query = m.tables()
    want = hf_rel_att(q, k, pos_key, pos_query, buckets, max_rel, 3) * math.sqrt(8 * 3)
    assert (m(q, k) - want).abs().max() < 1e-11
    # The tables are HF's: LayerNorm(rel_embeddings) through the projections, split per head.
    rel = torch.nn.functional.layer_norm(m.rel_embeddings, (16,), m.norm_rel_ebd.weight, m.norm_rel_ebd.bias, 1e-7)
    assert torch.allclose(pos_key, m.pos_key_proj(rel).view(2 * buckets, 2, 8).permute(1, 0, 2), atol=1e-13)


def _plain_mha(m, x, mask=None):
    """softmax(q.k / sqrt(3 Dh) + HF's rel_att) v through the layer's projections (float64)."""
    b, t, d = x.shape
    heads, dh = m.num_heads, m.head_dim
    split = lambda y: y.view(b, t, heads, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(m.q_proj(x)), split(m.k_proj(x)), split(m.v_proj(x))
    rel = m.relative
    pos_key, pos_query = rel.tables(F64)
    logits = q @ k.transpose(-1, -2) / math.sqrt(dh * 3) + hf_rel_att(q, k, pos_key, pos_query, 256, 512, 3)
    if mask is not None:
        logits = logits.masked_fill(mask.view(b, 1, 1, t), -math.inf)
    o = (torch.softmax(logits, -1) @ v).transpose(1, 2).reshape(b, t, d)
    return m.out_proj(o)


@pytest.mark.parametrize("path", ["fused", "composed"])
def test_multihead_attention_deberta(path):
    torch.manual_seed(5)
    m = pnn.MultiheadAttention(16, 2, encoding="deberta", path=path).double()
    assert isinstance(m.relative, pnn.DebertaRelative)
    x = torch.randn(2, 150, 16, dtype=F64, requires_grad=True)
    mask = torch.zeros(2, 150, dtype=torch.bool)
    mask[1, -5:] = True
    out, want = m(x, mask), _plain_mha(m, x, mask)
    assert (out - want).abs().max() < 1e-11
    g = torch.randn_like(out)
    params = [x] + list(m.parameters())
    got = torch.autograd.grad((out * g).sum(), params)
    ref = torch.autograd.grad((want * g).sum(), params)
    for a, e in zip(got, ref):
        assert (a - e).abs().max() < 1e-10


def test_multihead_attention_gradcheck():
    torch.manual_seed(6)
    rel = pnn.DebertaRelative(2, 3, position_buckets=4, max_relative_positions=8, init_std=0.5).double()
    m = pnn.MultiheadAttention(6, 2, encoding=rel).double()
    x = torch.randn(1, 7, 6, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, e: functional_call(m, {"relative.rel_embeddings": e}, (x,)),
                                    (x, rel.rel_embeddings.detach().clone().requires_grad_()))


def test_share_att_key_reads_the_layers_projections():
    torch.manual_seed(7)
    rel = pnn.DebertaRelative(2, 8, share_att_key=True, init_std=0.5).double()
    assert rel.pos_key_proj is None and rel.pos_query_proj is None
    m = pnn.MultiheadAttention(16, 2, encoding=rel).double()
    assert sorted(n for n, _ in m.named_parameters() if n.startswith("relative.")) == [
        "relative.norm_rel_ebd.bias", "relative.norm_rel_ebd.weight", "relative.rel_embeddings"]
    x = torch.randn(2, 20, 16, dtype=F64)
    assert (m(x) - _plain_mha(m, x)).abs().max() < 1e-11
    rel_alone = pnn.DebertaRelative(2, 8, share_att_key=True)
    with pytest.raises(ValueError) as e:
        rel_alone.attention_kwargs(3, 3)
    assert str(e.value) == ("[DebertaRelative] share_att_key needs the attention layer's q/k projections "
                            "(MultiheadAttention hands them over), got none")


@pytest.mark.parametrize("kwargs,message", [
    ({"position_buckets": 300, "max_relative_positions": 256},
     "[DebertaRelative] position_buckets must be <= max_relative_positions, got 300 > 256"),
    ({"position_buckets": 1}, "[DebertaRelative] position_buckets must be 0 (no buckets) or >= 2, got 1"),
    ({"pos_att_type": ()}, "[DebertaRelative] pos_att_type must hold c2p or p2c, got neither"),
    ({"pos_att_type": ("c2c",)}, "[DebertaRelative] pos_att_type must hold only 'c2p' and 'p2c', got 'c2c'"),
    ({"share_att_key": True, "model_dim": 8},
     "[DebertaRelative] share_att_key needs model_dim = num_heads * head_dim = 16, got 8"),
])
def test_errors(kwargs, message):
    with pytest.raises(ValueError) as e:
        pnn.DebertaRelative(2, 8, **kwargs)
    assert str(e.value).split("\n")[0] == message


def test_pos_att_type_is_a_list_of_words():
    with pytest.raises(TypeError) as e:
        pnn.DebertaRelative(2, 8, pos_att_type="c2p")
    assert str(e.value) == "[DebertaRelative] pos_att_type must be a list of strings, got 'c2p'"
    assert pnn.DebertaRelative(2, 8, pos_att_type=["c2p"]).pos_att_type == ["c2p"]


def test_attention_index_errors():
    q = torch.randn(1, 1, 3, 4)
    with pytest.raises(ValueError, match=r"^\[attention\] rel_index must hold rows in \[0, 5\), got 5"):
        posenc.attention(q, q, q, rel_k=torch.randn(5, 4), rel_index=torch.tensor([0, 1, 2, 3, 5]))
    with pytest.raises(ValueError, match=r"^\[attention\] rel_index addresses rel_k and rel_q, not rel_v"):
        posenc.attention(q, q, q, rel_k=torch.randn(5, 4), rel_v=torch.randn(5, 4), max_distance=2,
                         rel_index=torch.tensor([0, 1, 2, 3, 4]))
