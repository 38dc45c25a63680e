"""Triton kernels of the rotated ops' backward: the gradient entries of sampling points.

Imported on first use by :mod:`mmrepro.ops.rotated.kernels` (which describes the
method), so that ``TRITON_INTERPRET`` is read then. Both kernels write, for every
sampling point, the four entries of mmcv's ``bilinear_interpolate_gradient`` with the
helpers of RoIAlign's kernel (:mod:`mmrepro.ops.roi_align.triton_entries`):

- :func:`rotated_entries_kernel`: the points of every bin of every rotated RoI
  (``RoIAlignRotated``, ``RiRoIAlignRotated``), computed as mmcv's kernels compute
  them, each step rounded to the forward's dtype;
- :func:`point_entries_kernel`: points whose coordinates are given
  (``rotated_feature_align``).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..roi_align.triton_entries import _bin_point, _corner_entries, _roi_entries, _round

__all__ = ['point_entries_kernel', 'rotated_entries_kernel']


@triton.jit(do_not_specialize=['total', 'height', 'width'])
def rotated_entries_kernel(point_roi, roi_first, batch, start_h, start_w, bin_h, bin_w,
                           center_h, center_w, cos_t, sin_t, grid_h, grid_w, scale, keys,
                           rows, weights, total, height, width, pooled_h, pooled_w,
                           BLOCK: tl.constexpr, COORD: tl.constexpr):
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live, r, b, yy, xx = _bin_point(e, total, point_roi, roi_first, start_h, start_w, bin_h,
                                    bin_w, grid_h, grid_w, pooled_w, COORD)
    cos = tl.load(cos_t + r, mask=live, other=0)
    sin = tl.load(sin_t + r, mask=live, other=0)
    # y = yy * cos - xx * sin + center_h, x = yy * sin + xx * cos + center_w: left to
    # right, each step rounded to COORD as the forward's type does.
    y = _round(_round(yy * cos, COORD) - _round(xx * sin, COORD), COORD)
    y = _round(y + tl.load(center_h + r, mask=live, other=0), COORD)
    x = _round(_round(yy * sin, COORD) + _round(xx * cos, COORD), COORD)
    x = _round(x + tl.load(center_w + r, mask=live, other=0), COORD)
    _roi_entries(y, x, live, r, b, e, batch, scale, keys, rows, weights, height, width,
                 pooled_h, pooled_w, COORD)


@triton.jit(do_not_specialize=['total', 'height', 'width'])
def point_entries_kernel(ys, xs, keys, rows, weights, total, height, width,
                         POINTS: tl.constexpr, BLOCK: tl.constexpr, COORD: tl.constexpr):
    """Point ``s`` of output pixel ``s // POINTS`` (of ``N*H*W``) samples its own image."""
    s = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = s < total
    y = tl.load(ys + s, mask=live, other=-2.0)
    x = tl.load(xs + s, mask=live, other=-2.0)
    row = s // POINTS
    base = row - row % (height * width)
    _corner_entries(y, x, live, base, row, 1.0, s * 4, keys, rows, weights, height, width,
                    COORD)
