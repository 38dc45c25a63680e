"""DeterministicRoIAlign's sampling geometry, chunk plan and pure-PyTorch forward.

Shared by the pure-PyTorch op (:mod:`mmrepro.ops.roi_align.layer`, whose docstring is the
specification these functions follow, operation by operation as mmcv's CPU kernel) and
the CUDA path (:mod:`mmrepro.ops.roi_align.cuda`).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor

__all__ = ['MAX_POOL_FLOOR', 'Plan', 'corners', 'pool', 'roi_geometry']

#: Value mmcv starts its max-pooling search from (``T maxval = -10000``).
MAX_POOL_FLOOR = -10000.0


def roi_geometry(rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
                 sampling_ratio: int, aligned: bool) -> Tuple[Tensor, ...]:
    """Per-RoI start, bin size and sampling grid, computed as mmcv's kernel does.

    Args:
        rois: ``(K, 5)`` boxes in the input's dtype (detached).
        pooled_h: Output height.
        pooled_w: Output width.
        spatial_scale: Box-to-feature-map scale.
        sampling_ratio: Fixed grid size if ``> 0``, else adaptive.
        aligned: Whether to shift by half a pixel.

    Returns:
        ``(start_h, start_w, bin_h, bin_w, grid_h, grid_w, count)``; the grids are int64,
        everything else has the rois' dtype; all are ``(K,)``.
    """
    # Fills on the device (no host-to-device copy), rounded to the rois' dtype as mmcv's
    # kernel rounds its arguments.
    scale = torch.full((), spatial_scale, dtype=rois.dtype, device=rois.device)
    offset = torch.full((), 0.5 if aligned else 0.0, dtype=rois.dtype, device=rois.device)
    start_w = rois[:, 1] * scale - offset
    start_h = rois[:, 2] * scale - offset
    roi_w = (rois[:, 3] * scale - offset) - start_w
    roi_h = (rois[:, 4] * scale - offset) - start_h

    bad = torch.stack([~torch.isfinite(rois[:, 1:]).all(),
                       ((roi_w < 0) | (roi_h < 0)).any() if aligned else roi_w.new_zeros(
                           (), dtype=torch.bool)]).tolist()
    if bad[0]:
        raise ValueError('DeterministicRoIAlign: rois contain non-finite coordinates.')
    if bad[1]:
        raise ValueError('DeterministicRoIAlign: with aligned=True every RoI needs x2 >= x1 '
                         'and y2 >= y1 (mmcv.ops.RoIAlign rejects them too).')
    if not aligned:  # mmcv: "for backward-compatibility only"
        roi_w = roi_w.clamp_min(1.0)
        roi_h = roi_h.clamp_min(1.0)
    bin_h = roi_h / torch.full_like(roi_h, pooled_h)
    bin_w = roi_w / torch.full_like(roi_w, pooled_w)
    if sampling_ratio > 0:
        grid_h = torch.full(roi_h.shape, sampling_ratio, dtype=torch.long, device=rois.device)
        grid_w = grid_h
    else:  # ceilf(roi_height / pooled_height), i.e. ceil of the very same division
        grid_h = torch.ceil(bin_h).long()
        grid_w = torch.ceil(bin_w).long()
    count = (grid_h * grid_w).clamp_min(1).to(rois.dtype)
    return start_h, start_w, bin_h, bin_w, grid_h, grid_w, count


def _axis_samples(start: Tensor, bin_size: Tensor, pooled: int, grid: int,
                  size: int) -> Tuple[Tensor, ...]:
    """Sampling coordinates and 1-D bilinear terms along one axis.

    Args:
        start: ``(k,)`` RoI start on this axis.
        bin_size: ``(k,)`` bin size on this axis.
        pooled: Number of bins on this axis.
        grid: Sampling points per bin on this axis.
        size: Feature map size on this axis.

    Returns:
        ``(coord, valid, low, high, w_low, w_high)``, each ``(k, pooled, grid)``: the raw
        sampling coordinate, whether it lies in ``[-1, size]``, the two neighbouring
        indices (int64) and their interpolation weights.
    """
    dtype, device = start.dtype, start.device
    bins = torch.arange(pooled, dtype=dtype, device=device)[None, :, None]
    steps = (torch.arange(grid, dtype=dtype, device=device) + 0.5)[None, None, :]
    grid_t = torch.full((), float(grid), dtype=dtype, device=device)
    start, bin_size = start[:, None, None], bin_size[:, None, None]
    # roi_start + p * bin_size + (i + .5f) * bin_size / grid, left to right as in C++.
    coord = (start + bins * bin_size) + (steps * bin_size) / grid_t
    valid = ~((coord < -1.0) | (coord > size))
    clamped = torch.where(coord <= 0, torch.zeros_like(coord), coord)
    low = clamped.long()
    at_edge = low >= size - 1
    low = torch.where(at_edge, torch.full_like(low, size - 1), low)
    high = torch.where(at_edge, low, low + 1)
    clamped = torch.where(at_edge, low.to(dtype), clamped)
    w_high = clamped - low.to(dtype)
    w_low = 1.0 - w_high
    return coord, valid, low, high, w_low, w_high


def corners(rois: Tensor, geom: Tuple[Tensor, ...], grid_h: int, grid_w: int,
            pooled_h: int, pooled_w: int, height: int, width: int) -> Tuple[Tensor, ...]:
    """Flat feature-row indices and weights of the four corners of every sampling point.

    Args:
        rois: ``(k, 5)`` boxes of one chunk (all with the same sampling grid).
        geom: The chunk's rows of :func:`roi_geometry`'s first four outputs.
        grid_h: Sampling points per bin vertically.
        grid_w: Sampling points per bin horizontally.
        pooled_h: Output height.
        pooled_w: Output width.
        height: Feature map height.
        width: Feature map width.

    Returns:
        ``(index, weight, y)``: ``index`` (int64) and ``weight`` are
        ``(4, G, k*pooled_h*pooled_w)`` with ``G = grid_h*grid_w`` in mmcv's
        ``(iy, ix)`` order and the corners in mmcv's order (``y_low x_low``,
        ``y_low x_high``, ``y_high x_low``, ``y_high x_high``); ``y`` is the raw vertical
        coordinate of each point, ``(G, k*pooled_h*pooled_w)``.
    """
    start_h, start_w, bin_h, bin_w = geom
    y, vy, y_lo, y_hi, hy, ly = _axis_samples(start_h, bin_h, pooled_h, grid_h, height)
    x, vx, x_lo, x_hi, hx, lx = _axis_samples(start_w, bin_w, pooled_w, grid_w, width)

    def to_point(t: Tensor, axis: str) -> Tensor:
        # (k, ph, gh) / (k, pw, gw) -> (gh, gw, k, ph, pw), broadcast over the other axis.
        if axis == 'y':
            return t.permute(2, 0, 1)[:, None, :, :, None]
        return t.permute(2, 0, 1)[None, :, :, None, :]

    k = rois.size(0)
    base = rois[:, 0].long() * (height * width)  # C++ (int) truncation of the batch index
    base = base[None, None, :, None, None]
    valid = to_point(vy, 'y') & to_point(vx, 'x')
    rows = [to_point(y_lo * width, 'y'), to_point(y_hi * width, 'y')]
    cols = [to_point(x_lo, 'x'), to_point(x_hi, 'x')]
    wys = [to_point(hy, 'y'), to_point(ly, 'y')]
    wxs = [to_point(hx, 'x'), to_point(lx, 'x')]
    shape = (grid_h, grid_w, k, pooled_h, pooled_w)
    index, weight = [], []
    for r, wy in zip(rows, wys, strict=True):
        for c, wx in zip(cols, wxs, strict=True):
            # mmcv stores pos = 0 and w = 0 for points outside [-1, size].
            index.append(torch.where(valid, base + r + c, base).expand(shape))
            weight.append(torch.where(valid, wy * wx, torch.zeros((), dtype=wy.dtype,
                                                                   device=wy.device)))
    n_points, n_bins = grid_h * grid_w, k * pooled_h * pooled_w
    index_t = torch.stack(index).reshape(4, n_points, n_bins)
    weight_t = torch.stack([w.expand(shape) for w in weight]).reshape(4, n_points, n_bins)
    y_t = to_point(y, 'y').expand(shape).reshape(n_points, n_bins)
    return index_t, weight_t, y_t


def _weighted_sum(values: Tensor, weight: Tensor) -> Tensor:
    """``w1*v1 + w2*v2 + w3*v3 + w4*v4`` over dim 0, associated left to right as in mmcv.

    Args:
        values: ``(4, ...)`` corner values; overwritten (it must be a temporary).
        weight: ``(4, ...)`` corner weights, broadcastable to ``values``.

    Returns:
        A view of ``values[0]`` holding the sum.
    """
    values.mul_(weight)
    out = values[0]
    for corner in range(1, 4):
        out += values[corner]
    return out


class Plan:
    """RoI geometry and the chunks (RoIs sharing one sampling grid) to process."""

    def __init__(self, rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
                 sampling_ratio: int, aligned: bool, channels: int, budget: int) -> None:
        self.rois = rois
        self.pooled = (pooled_h, pooled_w)
        #: :func:`roi_geometry`'s outputs, all ``(K,)``.
        self.geometry = roi_geometry(rois, pooled_h, pooled_w, spatial_scale,
                                     sampling_ratio, aligned)
        *self.geom, grid_h, grid_w, self.count = self.geometry
        all_rois = torch.arange(rois.size(0), device=rois.device)
        if rois.size(0) == 0:
            groups = []
        elif sampling_ratio > 0:
            groups = [(sampling_ratio, sampling_ratio, all_rois)]
        else:
            radix = int(grid_w.max()) + 1
            key = grid_h * radix + grid_w
            groups = [(k // radix, k % radix, torch.nonzero(key == k).squeeze(1))
                      for k in torch.unique(key).tolist()]
        #: ``(grid_h, grid_w, roi indices)``; an empty grid gets one chunk.
        self.chunks: List[Tuple[int, int, Tensor]] = []
        for gh, gw, members in groups:
            per_roi = 4 * gh * gw * pooled_h * pooled_w * max(channels, 1)
            step = members.numel() if per_roi == 0 else max(1, budget // per_roi)
            self.chunks += [(gh, gw, chunk) for chunk in members.split(step)]

    def corners(self, gh: int, gw: int, chunk: Tensor, height: int,
                width: int) -> Tuple[Tensor, ...]:
        """:func:`corners` of one chunk."""
        return corners(self.rois.index_select(0, chunk),
                       [g.index_select(0, chunk) for g in self.geom], gh, gw,
                       *self.pooled, height, width)

    def bin_count(self, chunk: Tensor) -> Tensor:
        """``(k*pooled_h*pooled_w, 1)`` number of sampling points of each bin."""
        bins = self.pooled[0] * self.pooled[1]
        return self.count.index_select(0, chunk).repeat_interleave(bins)[:, None]


def pool(input: Tensor, plan: Plan, pool_mode: str) -> Tuple[Tensor, Optional[Tensor]]:
    """The forward: pool every chunk of ``plan`` from ``input``, gathering its corners.

    Returns:
        ``(out, choice)``: ``(K, C, pooled_h, pooled_w)`` contiguous output, and for
        ``'max'`` the chosen sampling point of every output element (``(K, bins, C)``,
        -1 where none), else None.
    """
    n, channels, height, width = input.shape
    pooled_h, pooled_w = plan.pooled
    feat = input.permute(0, 2, 3, 1).reshape(n * height * width, channels)
    bins = pooled_h * pooled_w
    out = input.new_empty((plan.rois.size(0), bins, channels))
    choice = (torch.empty(out.shape, dtype=torch.long, device=out.device)
              if pool_mode == 'max' else None)
    for gh, gw, chunk in plan.chunks:
        if gh == 0 or gw == 0:  # empty grid: mmcv outputs 0 (avg) or its floor (max)
            out.index_fill_(0, chunk, 0.0 if pool_mode == 'avg' else MAX_POOL_FLOOR)
            if choice is not None:
                choice.index_fill_(0, chunk, -1)
            continue
        index, weight, _ = plan.corners(gh, gw, chunk, height, width)
        values = feat.index_select(0, index.reshape(-1)).view(*index.shape, channels)
        val = _weighted_sum(values, weight[..., None])  # (G, k*bins, C)
        if pool_mode == 'avg':
            res = torch.zeros_like(val[0])
            for point in val.unbind(0):  # onto 0, in mmcv's (iy, ix) order
                res += point
            res /= plan.bin_count(chunk)
        else:
            # torch documents max(dim) to return the first maximal index, as mmcv's
            # strict '>' scan; that scan starts at -10000 (no point chosen below it).
            res, best = val.max(0)
            best.masked_fill_(res <= MAX_POOL_FLOOR, -1)
            res.clamp_min_(MAX_POOL_FLOOR)
            choice.index_copy_(0, chunk, best.view(chunk.numel(), bins, channels))
        out.index_copy_(0, chunk, res.view(chunk.numel(), bins, channels))
    return out.view(-1, pooled_h, pooled_w, channels).permute(0, 3, 1, 2).contiguous(), choice
