"""Triton kernel of RoIAlign's backward: the gradient entries of every sampling point.

Imported on first use by :mod:`mmrepro.ops.roi_align.kernels` (which describes the
method), so that ``TRITON_INTERPRET`` is read then. Its helpers (the sampling point of
an entry, a bin coordinate, a point's four corner entries) also build the entries of
the rotated RoI ops (:mod:`mmrepro.ops.rotated.triton_rotated`).
"""
from __future__ import annotations

import triton
import triton.language as tl

__all__ = ['entries_kernel']


@triton.jit
def _round(v, COORD: tl.constexpr):
    """``v`` (float32/64) rounded to nearest even in ``COORD``, as the forward rounds
    each step; a no-op for float32/64.

    bfloat16 by bit arithmetic: Triton's interpreter truncates on ``.to(bfloat16)``,
    so the bits are written out to be the same on CPU and GPU.
    """
    if COORD == tl.bfloat16:
        bits = v.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True)
    elif COORD == tl.float16:
        return v.to(tl.float16).to(v.dtype)
    else:
        return v


@triton.jit
def _div(a, b, COORD: tl.constexpr):
    """``a / b`` correctly rounded, as CUDA's '/' (Triton's float32 '/' is approximate)."""
    if COORD == tl.float64:
        return a / b
    else:
        return tl.math.div_rn(a, b)


@triton.jit
def _bin_coord(start, p, bin_size, i, grid, COORD: tl.constexpr):
    """``start + p * bin_size + (i + .5f) * bin_size / grid``, left to right as mmcv.

    Each step is rounded to the forward's dtype COORD (mmcv's fp16 kernel computes every
    step in half, the bf16 forward in bfloat16; a no-op for fp32/64), which also keeps a
    fused multiply-add from spanning a rounding; the division correctly rounded
    (div_rn), as CUDA's '/' is.
    """
    cdt = start.dtype
    v = _round((p.to(cdt) * bin_size), COORD)
    v = _round((start + v), COORD)
    step = _round(((i.to(cdt) + 0.5) * bin_size), COORD)
    step = _round(_div(step, grid.to(cdt), COORD), COORD)
    return _round((v + step), COORD)


@triton.jit
def _bin_point(e, total, point_roi, roi_first, start_h, start_w, bin_h, bin_w, grid_h,
               grid_w, pooled_w, COORD: tl.constexpr):
    """RoI ``r``, bin ``b`` and sampling point ``(y, x)`` (before any rotation) of the
    entries' points ``e`` (consecutive per RoI, in (bin, iy, ix) order); ``live`` is
    ``e < total``."""
    live = e < total
    r = tl.load(point_roi + e, mask=live, other=0)
    local = e - tl.load(roi_first + r, mask=live, other=0)
    gh = tl.load(grid_h + r, mask=live, other=1)
    gw = tl.load(grid_w + r, mask=live, other=1)
    points = gh * gw
    b = local // points
    rest = local - b * points
    iy = rest // gw
    ix = rest - iy * gw
    ph = b // pooled_w
    pw = b - ph * pooled_w
    y = _bin_coord(tl.load(start_h + r, mask=live, other=0), ph,
                   tl.load(bin_h + r, mask=live, other=0), iy, gh, COORD)
    x = _bin_coord(tl.load(start_w + r, mask=live, other=0), pw,
                   tl.load(bin_w + r, mask=live, other=0), ix, gw, COORD)
    return live, r, b, y, x


@triton.jit
def _corner_entries(y, x, live, base, row, s, out, keys, rows, weights, height, width,
                    COORD: tl.constexpr):
    """mmcv's ``bilinear_interpolate_gradient`` at ``(y, x)``: the four entries
    ``(base + pixel, row, weight * s)`` written at ``out .. out + 3``.

    A point outside ``[-1, size]`` has no corners (key -1) and weight 0, as in mmcv.
    """
    inside = (y >= -1.0) & (y <= height) & (x >= -1.0) & (x <= width) & live
    y = tl.maximum(y, 0.0)
    x = tl.maximum(x, 0.0)
    y_low = y.to(tl.int32)
    x_low = x.to(tl.int32)
    y_edge = y_low >= height - 1
    x_edge = x_low >= width - 1
    y_low = tl.where(y_edge, height - 1, y_low)
    x_low = tl.where(x_edge, width - 1, x_low)
    y_high = tl.where(y_edge, y_low, y_low + 1)
    x_high = tl.where(x_edge, x_low, x_low + 1)
    y = tl.where(y_edge, y_low.to(y.dtype), y)
    x = tl.where(x_edge, x_low.to(x.dtype), x)
    ly = _round((y - y_low.to(y.dtype)), COORD)
    lx = _round((x - x_low.to(x.dtype)), COORD)
    hy = _round((1.0 - ly), COORD)
    hx = _round((1.0 - lx), COORD)
    for corner in tl.static_range(4):
        yy = y_low if corner < 2 else y_high
        xx = x_low if corner % 2 == 0 else x_high
        wy = hy if corner < 2 else ly
        wx = hx if corner % 2 == 0 else lx
        tl.store(keys + out + corner, tl.where(inside, base + yy * width + xx, -1),
                 mask=live)
        tl.store(rows + out + corner, row, mask=live)
        tl.store(weights + out + corner, tl.where(inside, _round(wy * wx, COORD) * s, 0.0),
                 mask=live)


@triton.jit
def _roi_entries(y, x, live, r, b, e, batch, scale, keys, rows, weights, height, width,
                 pooled_h, pooled_w, COORD: tl.constexpr):
    """The four entries of point ``e`` of RoI ``r``, bin ``b``, at ``(y, x)``: weights
    times ``scale[r]`` (1 / count), rows ``r * pooled_h * pooled_w + b``."""
    base = tl.load(batch + r, mask=live, other=0) * (height * width)
    _corner_entries(y, x, live, base, r * (pooled_h * pooled_w) + b,
                    tl.load(scale + r, mask=live, other=0), e * 4, keys, rows, weights,
                    height, width, COORD)


# Sizes that change every call are not specialised on (no recompilation per shape).
@triton.jit(do_not_specialize=['total', 'height', 'width'])
def entries_kernel(point_roi, roi_first, batch, start_h, start_w, bin_h, bin_w,
                   grid_h, grid_w, scale, keys, rows, weights, total, height, width,
                   pooled_h, pooled_w, BLOCK: tl.constexpr, COORD: tl.constexpr):
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live, r, b, y, x = _bin_point(e, total, point_roi, roi_first, start_h, start_w, bin_h,
                                  bin_w, grid_h, grid_w, pooled_w, COORD)
    _roi_entries(y, x, live, r, b, e, batch, scale, keys, rows, weights, height, width,
                 pooled_h, pooled_w, COORD)
