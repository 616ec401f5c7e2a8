"""Plain float64 references for the relative-vector ops, written from the
formulas in include/posenc/kernels/relative.h and relative_2d.h with numpy
loops; they call nothing from posenc. Inputs may be torch tensors or arrays
(any dtype: they are read as float64); outputs are float64 numpy arrays.

Conventions: a table has 2k+1 rows, row r holds offset r - k; query i and key
j use row clip(j - (i + query_offset), -k, k) + k; a table is [2k+1, D]
(shared by the heads) or [H, 2k+1, D]."""

import math

import numpy as np
import torch


def as_f64(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def row(i, j, k, query_offset=0):
    """The table row of query i and key j."""
    return min(max(j - (i + query_offset), -k), k) + k


def head_table(table, h):
    return table if table.ndim == 2 else table[h]


def relative_logits(q, table, k, k_len=None, query_offset=0):
    """out[b,h,i,j] = q[b,h,i,:] . table[t(h), row(i, j), :]: (B, H, Tq, Tk)."""
    q, table = as_f64(q), as_f64(table)
    b, heads, tq, _ = q.shape
    tk = tq if k_len is None else k_len
    out = np.zeros((b, heads, tq, tk))
    for h in range(heads):
        t = head_table(table, h)
        for i in range(tq):
            for j in range(tk):
                out[:, h, i, j] = q[:, h, i, :] @ t[row(i, j, k, query_offset)]
    return out


def relative_values(probs, table, k, query_offset=0):
    """out[b,h,i,:] = sum_j probs[b,h,i,j] table[t(h), row(i, j), :]: (B, H, Tq, D)."""
    probs, table = as_f64(probs), as_f64(table)
    b, heads, tq, tk = probs.shape
    out = np.zeros((b, heads, tq, table.shape[-1]))
    for h in range(heads):
        t = head_table(table, h)
        for i in range(tq):
            for j in range(tk):
                out[:, h, i, :] += probs[:, h, i, j][:, None] * t[row(i, j, k, query_offset)][None, :]
    return out


def relative_table_grad(weights, x, k, tables, query_offset=0):
    """grad[t(h), row(i, j), :] += weights[b,h,i,j] x[b,h,i,:]: [tables, 2k+1, D]."""
    weights, x = as_f64(weights), as_f64(x)
    _, heads, tq, tk = weights.shape
    grad = np.zeros((tables, 2 * k + 1, x.shape[-1]))
    for h in range(heads):
        t = 0 if tables == 1 else h
        for i in range(tq):
            for j in range(tk):
                grad[t, row(i, j, k, query_offset)] += weights[:, h, i, j] @ x[:, h, i, :]
    return grad


def relative_2d_expand(rel_h, rel_w, height, width):
    """out[.., (y,x), (y2,x2)] = rel_h[.., (y,x), y2-y+height-1] + rel_w[.., (y,x), x2-x+width-1]."""
    rel_h, rel_w = as_f64(rel_h), as_f64(rel_w)
    cells = height * width
    out = np.zeros(rel_h.shape[:2] + (cells, cells))
    for y in range(height):
        for x in range(width):
            for y2 in range(height):
                for x2 in range(width):
                    out[:, :, y * width + x, y2 * width + x2] = (rel_h[:, :, y * width + x, y2 - y + height - 1]
                                                                 + rel_w[:, :, y * width + x, x2 - x + width - 1])
    return out


def relative_2d_reduce(grad, height, width):
    """The adjoint of relative_2d_expand: each grad entry goes back to the rel_h and rel_w entries it came from."""
    grad = as_f64(grad)
    lead = grad.shape[:2]
    rel_h = np.zeros(lead + (height * width, 2 * height - 1))
    rel_w = np.zeros(lead + (height * width, 2 * width - 1))
    for y in range(height):
        for x in range(width):
            for y2 in range(height):
                for x2 in range(width):
                    g = grad[:, :, y * width + x, y2 * width + x2]
                    rel_h[:, :, y * width + x, y2 - y + height - 1] += g
                    rel_w[:, :, y * width + x, x2 - x + width - 1] += g
    return rel_h, rel_w


def relative_logits_2d(q, table_h, table_w, height, width):
    """The naive four loops of BoTNet's 2D relative logits:
    out[b,h,(y,x),(y2,x2)] = q[b,h,(y,x)] . (table_h[y2-y+height-1] + table_w[x2-x+width-1])."""
    q, table_h, table_w = as_f64(q), as_f64(table_h), as_f64(table_w)
    b, heads, cells, _ = q.shape
    out = np.zeros((b, heads, cells, cells))
    for h in range(heads):
        th, tw = head_table(table_h, h), head_table(table_w, h)
        for y in range(height):
            for x in range(width):
                for y2 in range(height):
                    for x2 in range(width):
                        a = th[y2 - y + height - 1] + tw[x2 - x + width - 1]
                        out[:, h, y * width + x, y2 * width + x2] = q[:, h, y * width + x, :] @ a
    return out


def nezha_table(k, dim, base=10000.0, omega=None):
    """NEZHA's functional relative positions (Wei et al. 2019, eq. in sec. 3.2):
    row r (offset o = r - k) is [sin(o w_0), cos(o w_0), sin(o w_1), ...] with
    w_i = base^(-2i/dim) unless omega gives them."""
    w = [base ** (-2.0 * i / dim) for i in range(dim // 2)] if omega is None else list(as_f64(omega))
    out = np.zeros((2 * k + 1, dim))
    for r in range(2 * k + 1):
        for i, wi in enumerate(w):
            out[r, 2 * i] = math.sin((r - k) * wi)
            out[r, 2 * i + 1] = math.cos((r - k) * wi)
    return out


def shaw_attention(q, key, value, table_k, table_v, k):
    """Shaw et al. 2018, eq. (3)-(5), written naively for one (B, H, T, D) batch:
    e_ij = q_i . (k_j + a^K_ij) / sqrt(d), alpha = softmax_j(e), z_i = sum_j alpha_ij (v_j + a^V_ij),
    a_ij = table[clip(j - i, -k, k) + k]."""
    q, key, value = as_f64(q), as_f64(key), as_f64(value)
    table_k, table_v = as_f64(table_k), as_f64(table_v)
    b, heads, t, d = q.shape
    z = np.zeros((b, heads, t, value.shape[-1]))
    for n in range(b):
        for h in range(heads):
            tk, tv = head_table(table_k, h), head_table(table_v, h)
            for i in range(t):
                e = [q[n, h, i] @ (key[n, h, j] + tk[row(i, j, k)]) / math.sqrt(d) for j in range(t)]
                m = max(e)
                p = [math.exp(x - m) for x in e]
                s = sum(p)
                for j in range(t):
                    z[n, h, i] += (p[j] / s) * (value[n, h, j] + tv[row(i, j, k)])
    return z
