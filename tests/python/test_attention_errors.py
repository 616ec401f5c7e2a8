"""Every bad argument of posenc.attention (and torch.ops.posenc.attention_fused)
raises ValueError (a wrong dtype: TypeError) with exactly the library's
message: no C++ backtrace, no torch decoration. Both paths give the same
message (the checks are shared)."""

import copy
import io
import re

import pytest
import torch

import posenc

ops = torch.ops.posenc
z = torch.zeros

Q = z(2, 8, 16, 64)          # (B, H, Tq, Dh)
K = z(2, 8, 16, 64)
V = z(2, 8, 16, 32)          # Dv = 32
TABLE = z(9, 64)             # K = 4
Q2D, K2D, V2D = z(1, 8, 2048, 64), z(1, 8, 2048, 64), z(1, 8, 2048, 64)


def attend(**kwargs):
    return lambda: posenc.attention(Q, K, V, **kwargs)


# (id, call, exception type, message)
CASES = [
    # q, k, v
    ("q 3-D", lambda: posenc.attention(z(8, 16, 64), K, V), ValueError,
     "[attention] q must be 4-D (B, H, Tq, Dh), got 3-D"),
    ("k 5-D", lambda: posenc.attention(Q, z(1, 2, 8, 16, 64), V), ValueError,
     "[attention] k must be 4-D (B, H, Tk, Dh), got 5-D"),
    ("v 2-D", lambda: posenc.attention(Q, K, z(16, 32)), ValueError,
     "[attention] v must be 4-D (B, H, Tk, Dv), got 2-D"),
    ("q integer", lambda: posenc.attention(Q.long(), K, V), TypeError,
     "[attention] q must be float32, float64, bfloat16 or float16, got Long"),
    ("k dtype", lambda: posenc.attention(Q, K.double(), V), TypeError,
     "[attention] k must have q's dtype (float32), got float64"),
    ("v dtype", lambda: posenc.attention(Q.half(), K.half(), V.bfloat16()), TypeError,
     "[attention] v must have q's dtype (float16), got bfloat16"),
    ("k head dim", lambda: posenc.attention(Q, z(2, 8, 16, 32), V), ValueError,
     "[attention] k must be (B, H, Tk, Dh) = (2, 8, *, 64) like q, got (2, 8, 16, 32)"),
    ("k heads", lambda: posenc.attention(Q, z(2, 4, 16, 64), V), ValueError,
     "[attention] k must be (B, H, Tk, Dh) = (2, 8, *, 64) like q, got (2, 4, 16, 64)"),
    ("k batch", lambda: posenc.attention(Q, z(1, 8, 16, 64), V), ValueError,
     "[attention] k must be (B, H, Tk, Dh) = (2, 8, *, 64) like q, got (1, 8, 16, 64)"),
    ("v keys", lambda: posenc.attention(Q, K, z(2, 8, 15, 32)), ValueError,
     "[attention] v must have the keys' (B, H, Tk) = (2, 8, 16), got (2, 8, 15)"),
    # call
    ("scale negative", attend(scale=-1.0), ValueError, "[attention] scale must be finite and > 0, got -1"),
    ("scale zero", attend(scale=0.0), ValueError, "[attention] scale must be finite and > 0, got 0"),
    ("scale nan", attend(scale=float("nan")), ValueError, "[attention] scale must be finite and > 0, got nan"),
    ("causal Tq > Tk", lambda: posenc.attention(z(1, 2, 9, 4), z(1, 2, 8, 4), z(1, 2, 8, 4), causal=True),
     ValueError, "[attention] causal needs q_len <= k_len, got q_len 9 and k_len 8"),
    ("padding shape", attend(key_padding_mask=z(2, 15, dtype=torch.bool)), ValueError,
     "[attention] key_padding_mask must be (B, Tk) = (2, 16), got (2, 15)"),
    ("padding 3-D", attend(key_padding_mask=z(2, 1, 16, dtype=torch.bool)), ValueError,
     "[attention] key_padding_mask must be (B, Tk) = (2, 16), got (2, 1, 16)"),
    ("padding dtype", attend(key_padding_mask=z(2, 16)), TypeError,
     "[attention] key_padding_mask must be a bool tensor (true = padding), got float32"),
    ("path", attend(path="fast"), ValueError, "[attention] path must be 'auto', 'composed' or 'fused', got 'fast'"),
    # ALiBi, T5
    ("alibi heads", attend(alibi_slopes=z(4)), ValueError, "[attention] alibi_slopes must be [H] = [8], got [4]"),
    ("alibi 2-D", attend(alibi_slopes=z(8, 1)), ValueError, "[attention] alibi_slopes must be [H] = [8], got [8, 1]"),
    ("alibi dtype", attend(alibi_slopes=z(8, dtype=torch.float64)), TypeError,
     "[attention] alibi_slopes must have q's dtype (float32), got float64"),
    ("t5 buckets", attend(t5_table=z(16, 8)), ValueError,
     "[attention] t5_table must be [num_buckets, H] = [32, 8], got [16, 8]"),
    ("t5 heads", attend(t5_table=z(16, 4), t5_num_buckets=16), ValueError,
     "[attention] t5_table must be [num_buckets, H] = [16, 8], got [16, 4]"),
    ("t5 1-D", attend(t5_table=z(32)), ValueError,
     "[attention] t5_table must be [num_buckets, H] = [32, 8], got [32]"),
    ("t5 max_distance", attend(t5_table=z(32, 8), t5_max_distance=16), ValueError,
     "[t5_bucket] max_distance must be > num_buckets/2 = 16, got 16"),
    ("t5 odd buckets", attend(t5_table=z(31, 8), t5_num_buckets=31), ValueError,
     "[t5_bucket] num_buckets must be even when bidirectional (half per direction), got 31"),
    # Shaw / relative
    ("rel_k rows", attend(rel_k=z(8, 64), max_distance=4), ValueError,
     "[attention] rel_k must have 2*max_distance+1 = 9 rows, got 8"),
    ("rel_k even rows without max_distance", attend(rel_k=z(8, 64)), ValueError,
     "[attention] rel_k must have 2*max_distance+1 rows (an odd count) when max_distance is None, got 8"),
    ("rel_k columns", attend(rel_k=z(9, 32)), ValueError, "[attention] rel_k must have Dh = 64 columns, got 32"),
    ("rel_k 4-D", attend(rel_k=z(1, 8, 9, 64), max_distance=4), ValueError,
     "[attention] rel_k must be 2-D [2*max_distance+1, Dh] or 3-D [H, 2*max_distance+1, Dh], got 4-D"),
    ("rel_k tables", attend(rel_k=z(3, 9, 64)), ValueError,
     "[attention] relative tables must be shared (1) or one per head (8), got 3"),
    ("rel_k dtype", attend(rel_k=TABLE.double()), TypeError,
     "[attention] rel_k must have q's dtype (float32), got float64"),
    ("rel_k dtype 16-bit", lambda: posenc.attention(Q.bfloat16(), K.bfloat16(), V.bfloat16(), rel_k=TABLE.half()),
     TypeError, "[attention] rel_k must have q's dtype (bfloat16) or float32, got float16"),
    ("rel_v columns", attend(rel_v=z(9, 64), max_distance=4), ValueError,
     "[attention] rel_v must have Dv = 32 columns, got 64"),
    ("rel_v rows", attend(rel_k=TABLE, rel_v=z(7, 32)), ValueError,
     "[attention] rel_v must have 2*max_distance+1 = 9 rows, got 7"),
    ("rel_v needs max_distance", attend(rel_v=z(9, 32)), ValueError,
     "[attention] rel_v needs max_distance (or rel_k to read it from), got None"),
    ("max_distance negative", attend(rel_k=TABLE, max_distance=-1), ValueError,
     "[attention] max_distance must be >= 0, got -1"),
    # Transformer-XL
    ("xl_u shape", attend(xl_u=z(8, 32)), ValueError,
     "[attention] content_shift (xl_u) must be [H, Dh] = [8, 64], got [8, 32]"),
    ("xl_v shape", attend(rel_k=TABLE, xl_v=z(64)), ValueError,
     "[attention] relative_shift (xl_v) must be [H, Dh] = [8, 64], got [64]"),
    ("xl_v without rel_k", attend(xl_v=z(8, 64)), ValueError,
     "[attention] relative_shift (xl_v) shifts the queries of the rel_k term and needs rel_k, got None"),
    # 2D relative
    ("rel_2d size", lambda: posenc.attention(Q2D, K2D, V2D, rel_2d=(z(89, 64), z(89, 64), 45, 45)), ValueError,
     "[attention] rel_2d needs q_len = k_len = height*width = 2025, got q_len 2048 and k_len 2048"),
    ("rel_2d zero height", attend(rel_2d=(z(1, 64), z(7, 64), 0, 4)), ValueError,
     "[attention] rel_2d needs height >= 1 and width >= 1, got height 0 and width 4"),
    ("rel_2d table_h rows", attend(rel_2d=(z(5, 64), z(7, 64), 4, 4)), ValueError,
     "[attention] grid_h (rel_2d table_h) must have 2*height-1 = 7 rows, got 5"),
    ("rel_2d table_w columns", attend(rel_2d=(z(7, 64), z(7, 16), 4, 4)), ValueError,
     "[attention] grid_w (rel_2d table_w) must have Dh = 64 columns, got 16"),
    ("rel_2d tables", attend(rel_2d=(z(7, 64), z(2, 7, 64), 4, 4)), ValueError,
     "[attention] 2D tables must be shared (1) or one per head (8), got 2"),
    ("rel_2d one table", attend(rel_2d=(z(7, 64), None, 4, 4)), ValueError,
     "[attention] rel_2d needs both tables (table_h, table_w), got only table_h"),
    ("rel_2d not a tuple", attend(rel_2d=(z(7, 64), z(7, 64), 4)), ValueError,
     "[attention] rel_2d must be a tuple (table_h, table_w, height, width), got 3 items"),
    # dense bias
    ("bias shape", attend(bias=z(3, 16)), ValueError,
     "[attention] bias must be broadcastable to (B, H, Tq, Tk) = (2, 8, 16, 16), got (3, 16)"),
    ("bias 5-D", attend(bias=z(1, 2, 8, 16, 16)), ValueError,
     "[attention] bias must be broadcastable to (B, H, Tq, Tk) = (2, 8, 16, 16), got (1, 2, 8, 16, 16)"),
    ("bias dtype", attend(bias=z(8, 16, 16, dtype=torch.float16)), TypeError,
     "[attention] bias must have q's dtype (float32), got float16"),
    # rope
    ("rope odd head dim", lambda: posenc.attention(z(1, 2, 4, 5), z(1, 2, 4, 5), z(1, 2, 4, 5), rope={}), ValueError,
     "[rope] rotary_dim must be even, got 5"),
    ("rope positions with Tq != Tk",
     lambda: posenc.attention(z(1, 2, 3, 4), z(1, 2, 5, 4), z(1, 2, 5, 4), rope={"positions": torch.arange(3)}),
     ValueError, "[attention] rope positions are shared by q and k only when q_len = k_len; give q_positions and "
                 "k_positions, got q_len 3 and k_len 5"),
    ("rope positions twice", attend(rope={"positions": torch.arange(16), "q_positions": torch.arange(16)}),
     ValueError, "[attention] rope takes positions or q_positions/k_positions, got both"),
    ("rope not a dict", attend(rope=True), TypeError,
     "[attention] rope must be a dict of apply_rope options, got bool"),
]


@pytest.mark.parametrize("path", ["composed", "fused"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error_message(case, path, monkeypatch):
    _, call, kind, message = case
    # Every call on each path (the path keyword put in): both paths share the checks.
    original = posenc.attention

    def with_path(*args, **kwargs):
        kwargs.setdefault("path", path)
        return original(*args, **kwargs)

    monkeypatch.setattr(posenc, "attention", with_path)
    with pytest.raises(kind, match=f"^{re.escape(message)}$"):
        call()


# ---- the fused op checks what the public op checks ---------------------------------------------

def small():
    return z(1, 2, 3, 4), z(1, 2, 3, 4), z(1, 2, 3, 4)


def spec():
    return torch.classes.posenc.TermSpec()


def test_attention_fused_op_checks_with_the_same_words():
    q, k, v = small()
    with pytest.raises(ValueError, match=re.escape("[attention] content_shift (xl_u) must be [H, Dh] = [2, 4], "
                                                   "got [2, 5]")):
        ops.attention_fused(q, k, v, [z(2, 5).requires_grad_()], spec().content_shift())
    with pytest.raises(ValueError, match=re.escape("[attention] offset_bias must be [H, Tq + Tk - 1] = [2, 5], "
                                                   "got [2, 6]")):
        ops.attention_fused(q, k, v, [z(2, 6)], spec().offset_rows())
    with pytest.raises(ValueError, match=re.escape("[attention] grid_bias must be [H, 2*height-1, 2*width-1] = "
                                                   "[2, 1, 5], got [2, 3, 5]")):
        ops.attention_fused(q, k, v, [z(2, 3, 5)], spec().grid_rows(1, 3))
    with pytest.raises(ValueError, match=re.escape("[attention] 2D terms need q_len = k_len = height*width = 4, "
                                                   "got q_len 3 and k_len 3")):
        ops.attention_fused(q, k, v, [z(2, 3, 3)], spec().grid_rows(2, 2))


# ---- the term list and its spec ----------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda q: ops.attention_fused(q, q, q, [z(2, 5)], spec().offset_rows().dense_bias()),
     "[attention] the term list must have 2 tensors for its spec [offset_rows, dense_bias], got 1"),
    (lambda q: ops.attention_fused(q, q, q, [z(2, 5), z(2, 5)], spec().offset_rows().offset_rows()),
     "[attention] the spec has offset_rows twice"),
    (lambda q: ops.attention_fused(q, q, q, [z(7, 4), z(5, 4)], spec().relative_keys(3).relative_values(2)),
     "[attention] relative_values(K=2) must share max_distance with relative_keys(K=3)"),
    (lambda q: ops.attention_fused(q, q, q, [z(2, 3, 3), z(3, 4), z(3, 4)],
                                   spec().grid_rows(2, 2).grid_tables(2, 1)),
     "[attention] grid_tables(2x1) must share its grid with grid_rows(2x2)"),
    (lambda q: ops.attention_fused(q, q, q, [z(3, 4)], spec().tile("alibi")),
     "[attention] unknown tile kind 'alibi' (known: cope, fire)"),
    (lambda q: ops.attention_fused(q, q, q, [z(5, 3)], spec().tile("cope").causal()),
     "[attention] cope_e must be [npos, Dh] with npos >= 1 and Dh = 4, got (5, 3)"),
    (lambda q: ops.attention_fused(q, q, q, [z(5, 4).to(torch.float64)], spec().relative_keys(2)),
     "[attention] rel_k must have q's dtype (float32), got float64"),
], ids=["count", "twice", "max-distance", "grid", "unknown-kind", "tile-shape", "dtype"])
def test_term_list_refusals_name_the_term(call, message):
    with pytest.raises((ValueError, TypeError)) as e:
        call(small()[0])
    assert str(e.value).splitlines()[0] == message


def test_term_spec_describes_its_entries():
    s = spec().offset_rows().relative_keys(4).relative_values(4).grid_tables(3, 2).tile("fire").causal()
    assert s.describe() == ("[offset_rows, relative_keys(K=4), relative_values(K=4), grid_tables(3x2), "
                            "tile(fire), causal]")
    assert s.tensor_count() == 1 + 1 + 1 + 2 + 6
    # A copy, and a round trip through torch.save, keep every entry.
    buffer = io.BytesIO()
    torch.save(s, buffer)
    buffer.seek(0)
    for kept in (copy.deepcopy(s), torch.load(buffer, weights_only=False)):  # a custom class, not weights
        assert kept.describe() == s.describe()


def test_the_spec_text_is_read_back_into_the_same_spec():
    # attention_streamed takes describe()'s text; each entry kind, with its sizes, reads back.
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 4, dtype=torch.float64) for _ in range(3))
    cases = [([], spec()),
             ([torch.randn(2, 7, dtype=torch.float64)], spec().offset_rows().causal()),
             ([torch.randn(2, 3, 3, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64),
               torch.randn(3, 4, dtype=torch.float64)], spec().grid_rows(2, 2).grid_tables(2, 2)),
             ([torch.randn(7, 4, dtype=torch.float64), torch.randn(7, 4, dtype=torch.float64),
               torch.randn(7, 4, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64),
               torch.randn(2, 4, dtype=torch.float64)],
              spec().relative_keys(3).relative_values(3).relative_queries(3).content_shift().relative_shift()),
             ([torch.randn(5, 4, dtype=torch.float64)], spec().tile("cope").causal())]
    for tensors, s in cases:
        out, weights = ops.attention_fused(q, k, v, tensors, s, return_weights=True)
        same, same_weights, logsumexp = ops.attention_streamed(q, k, v, tensors, s.describe(), return_weights=True)
        assert torch.equal(out, same) and torch.equal(weights, same_weights)
        assert logsumexp.shape == (1, 2, 4) and logsumexp.dtype == torch.float64


@pytest.mark.parametrize("text, message", [
    ("offset_rows", "[attention] spec must be a list of entries like [offset_rows, relative_keys(K=4), tile(fire)], "
                    "got 'offset_rows'"),
    ("[offset_rows, alibi]", "[attention] unknown spec entry 'alibi' in [offset_rows, alibi]"),
    ("[relative_keys]", "[attention] spec entry 'relative_keys' needs its sizes in parentheses, in [relative_keys]"),
    ("[relative_keys(4)]", "[attention] spec entry 'relative_keys(4)' needs (K=max_distance), in [relative_keys(4)]"),
    ("[grid_rows(2by2)]", "[attention] spec entry 'grid_rows(2by2)' needs (HEIGHTxWIDTH), in [grid_rows(2by2)]"),
    ("[causal(1)]", "[attention] spec entry 'causal(1)' takes no parentheses, in [causal(1)]"),
    ("[relative_keys(K=-1)]", "[attention] max_distance must be >= 0, got -1"),
], ids=["brackets", "unknown", "no-sizes", "no-K", "grid", "extra", "negative"])
def test_a_bad_spec_text_is_refused_naming_the_entry(text, message):
    q = z(1, 2, 3, 4)
    tensors = [z(7, 4)] if "relative_keys" in text else [z(2, 3, 3)] if "grid" in text else []
    with pytest.raises(ValueError) as e:
        ops.attention_streamed(q, q, q, tensors, text)
    assert str(e.value).splitlines()[0] == message


def test_the_streamed_backward_op_gives_the_needed_gradients_in_order():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    rows = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    out, _, logsumexp = ops.attention_streamed(q, k, v, [rows], "[offset_rows]", causal=True)
    grad = torch.randn_like(out)
    expected = torch.autograd.grad(out, (q, v, rows), grad)
    got = ops.attention_streamed_backward(grad, q, k, v, [rows], "[offset_rows]", True, None, 0.5, out.detach(),
                                          logsumexp, [True, False, True, True])
    assert len(got) == 3
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError) as e:
        ops.attention_streamed_backward(grad, q, k, v, [rows], "[offset_rows]", True, None, 0.5, out.detach(),
                                        logsumexp, [True, True])
    assert str(e.value).splitlines()[0] == ("[attention] needs must have 3 + len(terms) = 4 entries (q, k, v, "
                                            "then the term list), got 2")


def test_term_list_gradients_come_back_in_list_order():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    rows = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    table = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    # The same terms in two orders: each gradient lands on its own tensor.
    for tensors, s in (([rows, table, bias], spec().offset_rows().relative_keys(2).dense_bias()),
                       ([bias, rows, table], spec().dense_bias().offset_rows().relative_keys(2))):
        out, _ = ops.attention_fused(q, k, v, tensors, s)
        grads = torch.autograd.grad(out.sum(), tensors)
        for t, g in zip(tensors, grads):
            assert g.shape == t.shape
    # against the composed path of the sugar
    out = posenc.attention(q, k, v, offset_bias=rows, rel_k=table, bias=bias, path="composed")
    expected = torch.autograd.grad(out.sum(), (rows, table, bias))
    out, _ = ops.attention_fused(q, k, v, [bias, rows, table], spec().dense_bias().offset_rows().relative_keys(2))
    got = torch.autograd.grad(out.sum(), (bias, rows, table))
    for e, g in zip(expected, (got[1], got[2], got[0])):
        torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# Work bound (issue 18): a call estimated beyond max_time is refused before it starts.

def test_attention_at_a_million_positions_is_refused_with_its_estimate():
    big = torch.zeros(1, 1, 1, 64).expand(1, 1, 2 ** 20, 64)  # no memory: a stride-0 view
    with pytest.raises(ValueError) as e:
        posenc.attention(big, big, big)
    # 2^40 pairs x 128 = 1.4e14 multiply-adds: 14074 s at 1e10 per second.
    assert str(e.value) == (
        "[attention] this call needs about 1.4e+14 multiply-adds (B 1 x H 1 x Tq 1048576 x Tk 1048576 x "
        "(Dh 64 + Dv 64)), about 3 h 55 min at an assumed 1e+10 per second, beyond max_time 3600 s: pass a "
        "larger max_time, or max_time=None to run it anyway")
    with pytest.raises(ValueError) as e:
        posenc.attention(big, big, big, causal=True, max_time=60)
    assert "(B 1 x H 1 x Tq 1048576 x Tk 1048576 / 2 causal x (Dh 64 + Dv 64)), about 1 h 57 min" in str(e.value)
    assert "beyond max_time 60 s" in str(e.value)


def test_max_time_bounds_and_lifts():
    q = torch.randn(1, 2, 100, 16)
    # 2 x 100 x 100 x 32 = 640000 multiply-adds: 6.4e-5 s.
    with pytest.raises(ValueError) as e:
        posenc.attention(q, q, q, max_time=1e-5)
    assert str(e.value).startswith("[attention] this call needs about 6.4e+05 multiply-adds")
    torch.testing.assert_close(posenc.attention(q, q, q, max_time=1e-3), posenc.attention(q, q, q, max_time=None))
    for bad, kind, message in [
        (0, ValueError, "[attention] max_time must be > 0 seconds (None: no bound), got 0"),
        (-1.5, ValueError, "[attention] max_time must be > 0 seconds (None: no bound), got -1.5"),
        (float("nan"), ValueError, "[attention] max_time must be > 0 seconds (None: no bound), got nan"),
        ("1h", TypeError, "[attention] max_time must be a number of seconds or None, got str"),
        (True, TypeError, "[attention] max_time must be a number of seconds or None, got bool"),
    ]:
        with pytest.raises(kind) as e:
            posenc.attention(q, q, q, max_time=bad)
        assert str(e.value) == message
