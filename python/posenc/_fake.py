"""Fake (meta) kernels of the op library, for torch 2's tracers and meta tensors.

torch.compile, torch.export and torch.library.opcheck run an op on fake tensors, which have a shape,
a dtype and a device but no data; a tensor on the ``meta`` device is the same to the user. The CPU
kernels read data, so each op here gets a function of its arguments' shapes alone. Ops without a
tensor argument (the tables of a size: alibi_slopes, sinusoidal_range, ...) are run for real on the
CPU with the tracer set aside, and only their result's shape and dtype are kept: their size logic
stays the op's, in one place. The CompositeImplicitAutograd ops (posenc.attention's keywords, the
family ops, rope) need none: the tracers see the ops they call.

Registered once, on import, where torch.library.register_fake exists (torch >= 2.4); torch 1.13 has no
such tracers and nothing is registered.
"""

import torch

__all__ = ["register"]

_registered = False


def _compute(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _like(t):
    """A contiguous tensor of t's shape, dtype and device: the kernels allocate their outputs so (empty_like
    would keep a transposed input's strides, and a view of the result would then differ from eager's)."""
    return t.new_empty(t.shape)


def _real_shape(op):
    """A fake kernel for an op whose arguments are no tensors: the real op's result, re-made empty."""
    def fake(*args, **kwargs):
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        with unset_fake_temporarily():
            real = op(*args, **kwargs)
        if isinstance(real, (tuple, list)):
            return type(real)(torch.empty(r.shape, dtype=r.dtype) for r in real)
        return torch.empty(real.shape, dtype=real.dtype)
    return fake


def _attention_streamed(q, k, v, terms, spec, causal=False, key_padding_mask=None, scale=None, return_weights=False):
    b, h, q_len = q.shape[0], q.shape[1], q.shape[2]
    k_len, v_dim = k.shape[2], v.shape[3]
    weights = q.new_empty((b, h, q_len, k_len)) if return_weights else q.new_empty((0,))
    return q.new_empty((b, h, q_len, v_dim)), weights, q.new_empty((b, h, q_len), dtype=_compute(q.dtype))


def _attention_streamed_backward(grad_out, q, k, v, terms, spec, causal, key_padding_mask, scale, out, logsumexp,
                                 needs):
    return [_like(t) for t, need in zip([q, k, v, *terms], needs) if need]


def _rope_rotate(x, cos, sin, layout="half", inverse=False):
    return _like(x)


def _rope_rotate_(x, cos, sin, layout="half", inverse=False):
    return x


def _rope_rotate_omega(x, positions, omega, layout="half", inverse=False, precision="exact"):
    return _like(x)


def _rope_rotate_omega_(x, positions, omega, layout="half", inverse=False, precision="exact"):
    return x


def _rope_rotate_omega_backward(grad, x, positions, omega, layout, inverse, precision, output_mask):
    return _like(x), _like(omega)


def _table_dtype(dtype):
    return torch.float32 if dtype is None else dtype


def _sinusoidal(positions, dim, base=10000.0, scale=1.0, layout="interleaved", precision="exact", dtype=None):
    return positions.new_empty((*positions.shape, dim), dtype=_table_dtype(dtype))


def _rope_cos_sin(positions, dim, base=10000.0, scaling=None, seq_len=None, precision="exact", dtype=None):
    shape = (*positions.shape, dim // 2)
    return positions.new_empty(shape, dtype=_table_dtype(dtype)), positions.new_empty(shape, dtype=_table_dtype(dtype))


def _rope_axial_cos_sin(coords, rotary_dim, dims_per_axis=(), base=10000.0, scaling=None, seq_len=None,
                        precision="exact", dtype=None):
    return _rope_cos_sin(coords[..., 0], rotary_dim, dtype=dtype)


def _mrope_cos_sin(positions3, rotary_dim, mrope_section, interleaved=False, base=10000.0, scaling=None,
                   seq_len=None, precision="exact", dtype=None):
    return _rope_cos_sin(positions3[0], rotary_dim, dtype=dtype)


def _xpos_cos_sin(positions, rotary_dim, scale_base=512.0, gamma=0.4, center=0.0, keys=False, base=10000.0,
                  precision="exact", dtype=None):
    return _rope_cos_sin(positions, rotary_dim, dtype=dtype)


def _learnable_sinusoidal(positions, omega, layout="interleaved", scale=1.0):
    return omega.new_empty((*positions.shape, 2 * omega.shape[0]))


def _learnable_sinusoidal_backward(grad_out, positions, omega, layout, scale):
    return _like(omega)


def _learned(table, positions):
    return table.new_empty((*positions.shape, table.shape[1]))


def _learned_backward(grad_out, positions, rows):
    return grad_out.new_empty((rows, grad_out.shape[-1]))


def _t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    return relative_position.new_empty(relative_position.shape, dtype=torch.int64)


def _t5_bias(table, q_len, k_len, bidirectional=True, max_distance=128):
    return table.new_empty((table.shape[1], q_len, k_len))


def _t5_bias_backward(grad, num_buckets, bidirectional, max_distance):
    return grad.new_empty((num_buckets, grad.shape[0]))


def _t5_bias_2d(table_h, table_w, height, width, bidirectional=True, max_distance=128):
    cells = height * width
    return table_h.new_empty((table_h.shape[1], cells, cells))


def _t5_bias_2d_backward(grad, num_buckets, height, width, bidirectional, max_distance):
    return grad.new_empty((num_buckets, grad.shape[0])), grad.new_empty((num_buckets, grad.shape[0]))


def _cpb_grid_bias(fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height=0, pretrained_width=0):
    return fc2_weight.new_empty((fc2_weight.shape[0], 2 * height - 1, 2 * width - 1))


def _cpb_grid_bias_backward(grad, fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height,
                            pretrained_width):
    return _like(fc1_weight), _like(fc1_bias), _like(fc2_weight)


def _offset_rows(like, heads, q_len, k_len):
    return like.new_empty((heads, q_len + k_len - 1))


def _kerple_offset_bias(r1, r2, q_len, k_len, kind="log"):
    return _offset_rows(r1, r1.shape[0], q_len, k_len)


def _kerple_offset_bias_backward(grad, r1, r2, q_len, k_len, kind):
    return _like(r1), _like(r2)


def _dpb_offset_bias(in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias, out_weight, out_bias,
                     q_len, k_len, log_distance=False):
    return _offset_rows(out_weight, out_weight.shape[0], q_len, k_len)


def _dpb_offset_bias_backward(grad, in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias,
                              out_weight, out_bias, q_len, k_len, log_distance):
    norm = [in_weight.new_empty((0,)) if t is None else _like(t) for t in (norm_weight, norm_bias)]
    return (_like(in_weight), _like(in_bias), _like(hidden_weight), _like(hidden_bias), *norm, _like(out_weight),
            _like(out_bias))


def _fire_bias(w1, b1, w2, b2, c, threshold, q_len, k_len):
    return w2.new_empty((w2.shape[0], q_len, k_len))


def _fire_bias_backward(grad, w1, b1, w2, b2, c, threshold, q_len, k_len):
    return tuple(_like(t) for t in (w1, b1, w2, b2, c, threshold))


def _cope_bias(q, k, e, scale, key_padding_mask=None):
    return q.new_empty((q.shape[0], q.shape[1], q.shape[2], k.shape[2]))


def _cope_bias_backward(grad, q, k, e, scale, key_padding_mask=None):
    return _like(q), _like(k), _like(e)


def _relative_logits(q, table, max_distance, k_len=None, query_offset=0):
    return q.new_empty((*q.shape[:3], q.shape[2] if k_len is None else k_len))


def _relative_values(probs, table, max_distance, query_offset=0):
    return probs.new_empty((*probs.shape[:3], table.shape[-1]))


# The ops with a tensor argument, by name; FAKES_OF_SIZES lists the size-only ops run for real.
FAKES = {
    "attention_streamed": _attention_streamed,
    "attention_streamed_backward": _attention_streamed_backward,
    "rope_rotate": _rope_rotate,
    "rope_rotate_": _rope_rotate_,
    "rope_rotate_omega": _rope_rotate_omega,
    "rope_rotate_omega_": _rope_rotate_omega_,
    "rope_rotate_omega_backward": _rope_rotate_omega_backward,
    "sinusoidal": _sinusoidal,
    "rope_cos_sin": _rope_cos_sin,
    "xpos_cos_sin": _xpos_cos_sin,
    "rope_axial_cos_sin": _rope_axial_cos_sin,
    "mrope_cos_sin": _mrope_cos_sin,
    "learnable_sinusoidal": _learnable_sinusoidal,
    "learnable_sinusoidal_backward": _learnable_sinusoidal_backward,
    "learned": _learned,
    "learned_backward": _learned_backward,
    "t5_bucket": _t5_bucket,
    "t5_bias": _t5_bias,
    "t5_bias_backward": _t5_bias_backward,
    "t5_bias_2d": _t5_bias_2d,
    "t5_bias_2d_backward": _t5_bias_2d_backward,
    "cpb_grid_bias": _cpb_grid_bias,
    "cpb_grid_bias_backward": _cpb_grid_bias_backward,
    "kerple_offset_bias": _kerple_offset_bias,
    "kerple_offset_bias_backward": _kerple_offset_bias_backward,
    "dpb_offset_bias": _dpb_offset_bias,
    "dpb_offset_bias_backward": _dpb_offset_bias_backward,
    "fire_bias": _fire_bias,
    "fire_bias_backward": _fire_bias_backward,
    "cope_bias": _cope_bias,
    "cope_bias_backward": _cope_bias_backward,
    "relative_logits": _relative_logits,
    "relative_values": _relative_values,
}
FAKES_OF_SIZES = ("alibi_slopes", "alibi_bias", "alibi_bias_2d", "sinusoidal_range", "sinusoidal_frequencies",
                  "absolute_table_range", "sinusoidal_2d", "sinusoidal_3d", "translation_matrix", "rope_cos_sin_range",
                  "deberta_row_index")


def register():
    """Registers every fake kernel once (torch >= 2.4; elsewhere nothing)."""
    global _registered
    register_fake = getattr(torch.library, "register_fake", None)
    if _registered or register_fake is None:
        return
    _registered = True
    for name, fake in FAKES.items():
        register_fake(f"posenc::{name}")(fake)
    for name in FAKES_OF_SIZES:
        register_fake(f"posenc::{name}")(_real_shape(getattr(torch.ops.posenc, name).default))
