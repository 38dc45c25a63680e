"""Triton kernel of RoIAlign's backward: the gradient entries of every sampling point.

Imported on first use by :mod:`mmrepro.ops.roi_align.kernels` (which describes the
method), so that ``TRITON_INTERPRET`` is read then.
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


# Sizes that change every call are not specialised on (no recompilation per shape).
@triton.jit(do_not_specialize=['total', 'height', 'width'])
def entries_kernel(point_roi, roi_first, batch, start_h, start_w, bin_h, bin_w,
                   grid_h, grid_w, scale, keys, rows, weights, total, height, width,
                   pooled_h, pooled_w, BLOCK: tl.constexpr, COORD: tl.constexpr):
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
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
    sh = tl.load(start_h + r, mask=live, other=0)
    sw = tl.load(start_w + r, mask=live, other=0)
    bh = tl.load(bin_h + r, mask=live, other=0)
    bw = tl.load(bin_w + r, mask=live, other=0)
    # roi_start + p * bin_size + (i + .5f) * bin_size / grid, left to right as the
    # forward, each step rounded to the forward's dtype COORD (mmcv's fp16 kernel
    # computes every step in half, the bf16 forward in bfloat16; a no-op for fp32/64),
    # which also keeps a fused multiply-add from spanning a rounding; the division
    # correctly rounded (div_rn), as CUDA's '/' is.
    cdt = sh.dtype
    y = _round((ph.to(cdt) * bh), COORD)
    y = _round((sh + y), COORD)
    step = _round(((iy.to(cdt) + 0.5) * bh), COORD)
    step = _round(_div(step, gh.to(cdt), COORD), COORD)
    y = _round((y + step), COORD)
    x = _round((pw.to(cdt) * bw), COORD)
    x = _round((sw + x), COORD)
    step = _round(((ix.to(cdt) + 0.5) * bw), COORD)
    step = _round(_div(step, gw.to(cdt), COORD), COORD)
    x = _round((x + step), COORD)
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
    ly = _round((y - y_low.to(cdt)), COORD)
    lx = _round((x - x_low.to(cdt)), COORD)
    hy = _round((1.0 - ly), COORD)
    hx = _round((1.0 - lx), COORD)
    s = tl.load(scale + r, mask=live, other=0)  # 1 / count
    base = tl.load(batch + r, mask=live, other=0) * (height * width)
    row = r * (pooled_h * pooled_w) + b
    out = e * 4
    for corner in tl.static_range(4):
        yy = y_low if corner < 2 else y_high
        xx = x_low if corner % 2 == 0 else x_high
        wy = hy if corner < 2 else ly
        wx = hx if corner % 2 == 0 else lx
        # mmcv: a point outside [-1, size] has no corners and weight 0.
        tl.store(keys + out + corner, tl.where(inside, base + yy * width + xx, -1),
                 mask=live)
        tl.store(rows + out + corner, row, mask=live)
        tl.store(weights + out + corner, tl.where(inside, _round(wy * wx, COORD) * s, 0.0),
                 mask=live)
