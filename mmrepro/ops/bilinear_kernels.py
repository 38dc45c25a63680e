"""Triton kernels of one primitive: bilinear sampling summed per output row.

Deformable convolution, multi-scale deformable attention and ``grid_sample`` all read
a feature map at fractional coordinates known in the forward pass. Seen from here each
is a *table* of ``R`` rows of ``D`` channels and ``S = O * K`` *samples*; sample ``s``
belongs to output row ``o = s // K`` and reads the bilinear interpolation of four table
rows around ``(y[s], x[s])``, scaled by ``mult[s]``::

    out[o, :] = sum over k < K of mult[s] * bilinear(table, s),  s = o * K + k

Sample ``s`` lies on level ``l = (s % K) // P`` of a map of ``level_h[l] x level_w[l]``
pixels; pixel ``(py, px)`` is the table row
``row_base[o] + (level_start[l] + py * level_w[l] + px) * stride``.

This module imports Triton, so :mod:`mmrepro.ops.bilinear_sample` imports it on first
use (``TRITON_INTERPRET`` is read then). Three kernels, none with atomics:

- :func:`forward_kernel`: one program per (output-row block, channel block) that
  adds the ``K`` samples of each row in order.
- :func:`entries_kernel`: the four (table row, output row, ``mult * weight``) entries of every
  sample, for the table's gradient as a sorted CSR gather
  (:mod:`mmrepro.ops.csr_kernels`).
- :func:`sample_grads_kernel`: per sample, the gradients of ``y``, ``x`` and ``mult``: dot
  products over the channels of the output gradient with the four corner rows.

Corners outside the map read zero, as in mmcv and PyTorch. With ``INSIDE`` (mmcv's
deformable ops), a sample whose point is not strictly inside ``(-1, size)`` reads
nothing and gets no gradient, as mmcv's kernels do.
"""
from __future__ import annotations

import triton
import triton.language as tl

__all__ = ['entries_kernel', 'forward_kernel', 'sample_grads_kernel']



@triton.jit
def _corners(y, x, height, width, INSIDE: tl.constexpr):
    """Low corner, fractions and the validity of each of the four corners."""
    y_floor = tl.floor(y)
    x_floor = tl.floor(x)
    y_low = y_floor.to(tl.int32)
    x_low = x_floor.to(tl.int32)
    ly = y - y_floor
    lx = x - x_floor
    ok_yl = (y_low >= 0) & (y_low < height)
    ok_yh = (y_low + 1 >= 0) & (y_low + 1 < height)
    ok_xl = (x_low >= 0) & (x_low < width)
    ok_xh = (x_low + 1 >= 0) & (x_low + 1 < width)
    if INSIDE:
        inside = (y > -1.0) & (x > -1.0) & (y < height) & (x < width)
        ok_yl = ok_yl & inside
        ok_yh = ok_yh & inside
    return y_low, x_low, ly, lx, ok_yl & ok_xl, ok_yl & ok_xh, ok_yh & ok_xl, ok_yh & ok_xh


@triton.jit
def _sample_site(s, K, P, level_start, level_h, level_w, row_base, stride, live):
    """Output row, map size and the table row of pixel (0, 0) of sample ``s``."""
    o = s // K
    level = (s - o * K) // P
    height = tl.load(level_h + level, mask=live, other=1)
    width = tl.load(level_w + level, mask=live, other=1)
    origin = tl.load(row_base + o, mask=live, other=0) + \
        tl.load(level_start + level, mask=live, other=0).to(tl.int64) * stride
    return o, height, width, origin


@triton.jit
def _site_corners(s, ys, xs, K, P, level_start, level_h, level_w, row_base, stride, live,
                  INSIDE: tl.constexpr):
    """:func:`_sample_site` and :func:`_corners` of the samples ``s``."""
    o, height, width, origin = _sample_site(s, K, P, level_start, level_h, level_w,
                                           row_base, stride, live)
    y = tl.load(ys + s, mask=live, other=-2.0)
    x = tl.load(xs + s, mask=live, other=-2.0)
    y_low, x_low, ly, lx, ok00, ok01, ok10, ok11 = _corners(y, x, height, width, INSIDE)
    return o, width, origin, y_low, x_low, ly, lx, ok00, ok01, ok10, ok11


@triton.jit
def _gather4(table, p00, stride, width, channels, d, d_live, ok00, ok01, ok10, ok11,
             ACC: tl.constexpr):
    """The four corner rows (a block of channels ``d``) around table row ``p00``."""
    p10 = p00 + width.to(tl.int64) * stride
    v00 = tl.load(table + (p00 * channels)[:, None] + d[None, :],
                  mask=ok00[:, None] & d_live, other=0.0).to(ACC)
    v01 = tl.load(table + ((p00 + stride) * channels)[:, None] + d[None, :],
                  mask=ok01[:, None] & d_live, other=0.0).to(ACC)
    v10 = tl.load(table + (p10 * channels)[:, None] + d[None, :],
                  mask=ok10[:, None] & d_live, other=0.0).to(ACC)
    v11 = tl.load(table + ((p10 + stride) * channels)[:, None] + d[None, :],
                  mask=ok11[:, None] & d_live, other=0.0).to(ACC)
    return v00, v01, v10, v11


@triton.jit
def _blend(ly, lx, v00, v01, v10, v11):
    """Bilinear interpolation of the corner rows (mmcv's order of the four terms)."""
    hy = 1.0 - ly
    hx = 1.0 - lx
    return (hy * hx)[:, None] * v00 + (hy * lx)[:, None] * v01 + \
        (ly * hx)[:, None] * v10 + (ly * lx)[:, None] * v11


@triton.jit(do_not_specialize=['rows_out', 'K', 'P', 'stride'])
def forward_kernel(table, ys, xs, mult, row_base, level_start, level_h, level_w, out,
                   rows_out, channels, K, P, stride, HAS_MULT: tl.constexpr,
                   INSIDE: tl.constexpr, BLOCK_O: tl.constexpr,
                   BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    o = tl.program_id(0) * BLOCK_O + tl.arange(0, BLOCK_O)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    live = o < rows_out
    d_live = (d < channels)[None, :]
    acc = tl.zeros([BLOCK_O, BLOCK_D], dtype=ACC)
    base = tl.load(row_base + o, mask=live, other=0)
    for k in range(K):
        s = o.to(tl.int64) * K + k
        level = k // P
        height = tl.load(level_h + level)
        width = tl.load(level_w + level)
        origin = base + tl.load(level_start + level).to(tl.int64) * stride
        y = tl.load(ys + s, mask=live, other=-2.0)
        x = tl.load(xs + s, mask=live, other=-2.0)
        y_low, x_low, ly, lx, ok00, ok01, ok10, ok11 = _corners(y, x, height, width,
                                                               INSIDE)
        p00 = origin + (y_low.to(tl.int64) * width + x_low) * stride
        v00, v01, v10, v11 = _gather4(table, p00, stride, width, channels, d, d_live, ok00,
                                      ok01, ok10, ok11, ACC)
        val = _blend(ly, lx, v00, v01, v10, v11)
        if HAS_MULT:
            m = tl.load(mult + s, mask=live, other=0.0)
            val = m[:, None] * val
        acc += val
    tl.store(out + (o.to(tl.int64) * channels)[:, None] + d[None, :],
             acc.to(out.dtype.element_ty), mask=live[:, None] & d_live)


@triton.jit(do_not_specialize=['total', 'K', 'P', 'stride'])
def entries_kernel(ys, xs, mult, row_base, level_start, level_h, level_w, keys, rows,
                   weights, total, K, P, stride, HAS_MULT: tl.constexpr,
                   INSIDE: tl.constexpr, BLOCK: tl.constexpr):
    s = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = s < total
    o, width, origin, y_low, x_low, ly, lx, ok00, ok01, ok10, ok11 = _site_corners(
        s, ys, xs, K, P, level_start, level_h, level_w, row_base, stride, live, INSIDE)
    m = tl.load(mult + s, mask=live, other=0.0) if HAS_MULT else 1.0
    hy = 1.0 - ly
    hx = 1.0 - lx
    for corner in tl.static_range(4):
        dy = 0 if corner < 2 else 1
        dx = corner % 2
        ok = ok00 if corner == 0 else ok01 if corner == 1 else ok10 if corner == 2 \
            else ok11
        wy = hy if dy == 0 else ly
        wx = hx if dx == 0 else lx
        key = origin + ((y_low + dy).to(tl.int64) * width + (x_low + dx)) * stride
        tl.store(keys + s * 4 + corner, tl.where(ok, key, -1).to(tl.int32), mask=live)
        tl.store(rows + s * 4 + corner, o.to(tl.int32), mask=live)
        tl.store(weights + s * 4 + corner, tl.where(ok, m * (wy * wx), 0.0), mask=live)


@triton.jit(do_not_specialize=['total', 'K', 'P', 'stride'])
def sample_grads_kernel(table, grad_out, ys, xs, mult, row_base, level_start, level_h,
                        level_w, grad_y, grad_x, grad_mult, total, channels, K, P,
                        stride, HAS_MULT: tl.constexpr, INSIDE: tl.constexpr,
                        BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
                        ACC: tl.constexpr):
    s = tl.program_id(0).to(tl.int64) * BLOCK_S + tl.arange(0, BLOCK_S)
    live = s < total
    o, width, origin, y_low, x_low, ly, lx, ok00, ok01, ok10, ok11 = _site_corners(
        s, ys, xs, K, P, level_start, level_h, level_w, row_base, stride, live, INSIDE)
    hy = 1.0 - ly
    hx = 1.0 - lx
    p00 = origin + (y_low.to(tl.int64) * width + x_low) * stride
    g_row = o * channels
    acc_m = tl.zeros([BLOCK_S], dtype=ACC)
    acc_y = tl.zeros([BLOCK_S], dtype=ACC)
    acc_x = tl.zeros([BLOCK_S], dtype=ACC)
    for d0 in range(0, channels, BLOCK_D):
        d = d0 + tl.arange(0, BLOCK_D)
        d_live = (d < channels)[None, :]
        g = tl.load(grad_out + g_row[:, None] + d[None, :],
                    mask=live[:, None] & d_live, other=0.0).to(ACC)
        v00, v01, v10, v11 = _gather4(table, p00, stride, width, channels, d, d_live, ok00,
                                      ok01, ok10, ok11, ACC)
        val = _blend(ly, lx, v00, v01, v10, v11)
        d_y = -hx[:, None] * v00 - lx[:, None] * v01 + hx[:, None] * v10 + \
            lx[:, None] * v11
        d_x = -hy[:, None] * v00 + hy[:, None] * v01 - ly[:, None] * v10 + \
            ly[:, None] * v11
        acc_m += tl.sum(g * val, axis=1)
        acc_y += tl.sum(g * d_y, axis=1)
        acc_x += tl.sum(g * d_x, axis=1)
    if HAS_MULT:
        m = tl.load(mult + s, mask=live, other=0.0)
        acc_y = acc_y * m
        acc_x = acc_x * m
        tl.store(grad_mult + s, acc_m.to(grad_mult.dtype.element_ty), mask=live)
    tl.store(grad_y + s, acc_y.to(grad_y.dtype.element_ty), mask=live)
    tl.store(grad_x + s, acc_x.to(grad_x.dtype.element_ty), mask=live)
