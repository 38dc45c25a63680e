"""A deterministic drop-in for :class:`mmcv.ops.RoIAlign`.

This module's docstring is the op's specification, so the module is kept whole and
is the one module of mmrepro over ~400 lines.

mmcv's CUDA RoIAlign backward scatters every sampling point's gradient into the feature
map with ``atomicAdd``, so the order of the floating-point additions (and hence the
gradient bits) changes from run to run. :class:`DeterministicRoIAlign` computes the
same function without unordered accumulation, on two paths:

* **CUDA, ``'avg'`` mode** (MMDetection's default): mmcv's own forward (no atomics;
  bit-identical to ``mmcv.ops.RoIAlign``) and a backward that builds, once per call,
  the (feature pixel, output bin, weight) entries of every sampling point, sorts them
  by pixel with a stable sort, and sums each pixel's entries in that order in a Triton
  kernel (``roi_align_cuda.py``, ``roi_align_kernels.py``). fp16/bf16 accumulate in
  float32.
* **Everywhere else** (CPU; ``'max'`` mode on CUDA): pure PyTorch, below.

The pure-PyTorch path:

* Forward: the feature map is flattened channels-last to ``(N*H*W, C)`` and the four
  bilinear corners of every sampling point are read with :func:`torch.index_select`
  (a gather: no accumulation, deterministic everywhere). RoIs are processed in chunks
  of RoIs sharing one sampling grid, bounded in memory.
* Backward (a small :class:`torch.autograd.Function`): the sampling indices and weights
  are re-derived from the rois chunk by chunk and ``weight * grad`` is scattered into
  one feature-map gradient with an accumulating index op that is deterministic:

  - CPU: ``Tensor.index_add_``, which adds in the order of the index (parallelised over
    channels / index segments only), with or without any flag;
  - CUDA and other accelerators: ``Tensor.index_put_(indices, src, accumulate=True)``.
    ATen's ``_index_put_impl_`` sends every CUDA ``accumulate=True`` call to
    ``index_put_with_sort`` (sort the indices, then reduce duplicates in sorted
    order), with or without ``torch.use_deterministic_algorithms``; torch's docs list
    ``index_put(accumulate=True)`` as nondeterministic only for CPU tensors. (CUDA
    ``index_add_`` / ``scatter_add_``, i.e. what autograd would use for
    ``index_select`` / ``gather``, are deterministic only when that flag is set.)

  A plain-autograd version (``index_select`` -> ``IndexSelectBackward``) was tried
  first: it allocates one dense feature-map gradient per chunk and was slower than
  mmcv's CPU op on the FPN benchmark (``benchmarks/results/roi_align_cpu.md``).

Sampling semantics follow mmcv 2.x's CPU kernel (``mmcv/ops/csrc/pytorch/cpu/
roi_align.cpp``) operation by operation, in the input's dtype and with the same
evaluation order, so the forward output on CPU equals mmcv's bit for bit and the input
gradient equals it up to the order of the floating-point additions:

* ``roi_start = roi * spatial_scale - offset`` (``offset = 0.5`` if ``aligned``); RoI
  sizes are clamped to ``>= 1`` when not ``aligned``;
* ``sampling_ratio > 0`` samples a ``sampling_ratio x sampling_ratio`` grid per bin,
  otherwise ``ceil(roi_size / output_size)`` per axis, per RoI (RoIs are grouped by
  their grid shape, so no padding is materialised);
* a sampling point with ``y < -1``, ``y > H``, ``x < -1`` or ``x > W`` contributes 0;
  otherwise coordinates are clamped to ``[0, size - 1]`` before bilinear interpolation;
* ``'avg'`` adds a bin's points in row-major order onto 0 and divides by
  ``max(grid_h * grid_w, 1)``; ``'max'`` keeps the first greatest point (nothing below
  mmcv's floor of ``-10000``) and routes the gradient to it only, like mmcv, including
  mmcv's quirk of dropping the gradient of a point sampled exactly at ``y == -1``.

Not reproduced: NaN features in ``'max'`` mode (``torch.max`` propagates NaN, mmcv's
``>`` scan skips it); mmcv's undefined behaviour for out-of-range batch indices (here an
``IndexError``). The pure-PyTorch path on CUDA is not bit-identical to mmcv's CUDA
kernel, which contracts multiply-adds differently; the CUDA ``'avg'`` path uses mmcv's
forward itself.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.nn.modules.utils import _pair

from . import routing
from .roi_align_kernels import triton_available

__all__ = ['DeterministicRoIAlign', 'deterministic_roi_align']

#: Value mmcv starts its max-pooling search from (``T maxval = -10000``).
_MAX_POOL_FLOOR = -10000.0
#: Default bound on the elements of one gathered block ``(4, grid_h*grid_w, k*ph*pw, C)``
#: per device type; RoIs are processed in chunks below it (a single RoI may exceed it).
#: Small blocks stay in the CPU's cache; on accelerators fewer, larger blocks are faster.
DEFAULT_MAX_CHUNK_ELEMENTS = {'cpu': 1 << 22, 'other': 1 << 25}
_POOL_MODES = ('avg', 'max')


def _check_args(output_size: Union[int, Sequence[int]], sampling_ratio: int,
                pool_mode: str) -> Tuple[int, int]:
    """Validate the constructor arguments and return ``(pooled_h, pooled_w)``."""
    if pool_mode not in _POOL_MODES:
        raise ValueError(f"DeterministicRoIAlign: pool_mode={pool_mode!r} is not supported; "
                         f"use one of {_POOL_MODES} (as mmcv.ops.RoIAlign).")
    size = _pair(output_size)
    if (len(size) != 2 or not all(isinstance(s, int) and not isinstance(s, bool)
                                  for s in size) or min(size) < 1):
        raise ValueError(f'DeterministicRoIAlign: output_size={output_size!r} is not '
                         'supported; use a positive int or a pair of positive ints (h, w).')
    if isinstance(sampling_ratio, bool) or not isinstance(sampling_ratio, int):
        raise ValueError(f'DeterministicRoIAlign: sampling_ratio={sampling_ratio!r} is not '
                         'supported; use an int (> 0: fixed grid, <= 0: adaptive).')
    return size[0], size[1]


def _check_inputs(input: Tensor, rois: Tensor) -> None:
    """Validate the shapes, dtypes and devices of ``forward``'s arguments."""
    if input.dim() != 4:
        raise ValueError('DeterministicRoIAlign: input must be NCHW (4-D); got shape '
                         f'{tuple(input.shape)}.')
    if not input.is_floating_point():
        raise ValueError(f'DeterministicRoIAlign: input dtype {input.dtype} is not '
                         'supported; use a floating point tensor.')
    if rois.dim() != 2 or rois.size(1) != 5:
        raise ValueError('DeterministicRoIAlign: rois must be (K, 5) rows of '
                         f'[batch_idx, x1, y1, x2, y2]; got shape {tuple(rois.shape)}.')
    if rois.device != input.device:
        raise ValueError(f'DeterministicRoIAlign: rois are on {rois.device} but input is on '
                         f'{input.device}; put both on the same device.')


def _roi_geometry(rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
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


def _corners(rois: Tensor, geom: Tuple[Tensor, ...], grid_h: int, grid_w: int,
             pooled_h: int, pooled_w: int, height: int, width: int) -> Tuple[Tensor, ...]:
    """Flat feature-row indices and weights of the four corners of every sampling point.

    Args:
        rois: ``(k, 5)`` boxes of one chunk (all with the same sampling grid).
        geom: The chunk's rows of :func:`_roi_geometry`'s first four outputs.
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


def _accumulate_(target: Tensor, index: Tensor, src: Tensor) -> None:
    """``target[index[i]] += src[i]`` along dim 0, deterministically.

    On CPU ``index_add_`` adds in the order of ``index``. On CUDA (and other
    accelerators) ``index_put_(accumulate=True)`` is used: ATen always implements it by
    sorting the indices (``index_put_with_sort``), with or without
    ``torch.use_deterministic_algorithms``, whereas CUDA ``index_add_`` uses
    ``atomicAdd`` unless that flag is set.
    """
    if target.device.type == 'cpu':
        target.index_add_(0, index, src)
    else:
        target.index_put_((index,), src, accumulate=True)


class _Plan:
    """RoI geometry and the chunks (RoIs sharing one sampling grid) to process."""

    def __init__(self, rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
                 sampling_ratio: int, aligned: bool, channels: int, budget: int) -> None:
        self.rois = rois
        self.pooled = (pooled_h, pooled_w)
        #: :func:`_roi_geometry`'s outputs, all ``(K,)``.
        self.geometry = _roi_geometry(rois, pooled_h, pooled_w, spatial_scale,
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
        """:func:`_corners` of one chunk."""
        return _corners(self.rois.index_select(0, chunk),
                        [g.index_select(0, chunk) for g in self.geom], gh, gw,
                        *self.pooled, height, width)

    def bin_count(self, chunk: Tensor) -> Tensor:
        """``(k*pooled_h*pooled_w, 1)`` number of sampling points of each bin."""
        bins = self.pooled[0] * self.pooled[1]
        return self.count.index_select(0, chunk).repeat_interleave(bins)[:, None]


def _pool(input: Tensor, plan: _Plan, pool_mode: str) -> Tuple[Tensor, Optional[Tensor]]:
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
            out.index_fill_(0, chunk, 0.0 if pool_mode == 'avg' else _MAX_POOL_FLOOR)
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
            best.masked_fill_(res <= _MAX_POOL_FLOOR, -1)
            res.clamp_min_(_MAX_POOL_FLOOR)
            choice.index_copy_(0, chunk, best.view(chunk.numel(), bins, channels))
        out.index_copy_(0, chunk, res.view(chunk.numel(), bins, channels))
    return out.view(-1, pooled_h, pooled_w, channels).permute(0, 3, 1, 2).contiguous(), choice


class _RoIAlignFunction(torch.autograd.Function):
    """Chunked forward; backward re-derives the sampling and scatters deterministically.

    Nothing of the size of the gathered samples is kept for the backward: ``'avg'``
    needs only the geometry (recomputed from the rois), ``'max'`` additionally the
    chosen sampling point per output element.
    """

    @staticmethod
    def forward(ctx, input: Tensor, rois: Tensor, pooled_h: int, pooled_w: int,
                spatial_scale: float, sampling_ratio: int, pool_mode: str, aligned: bool,
                budget: int) -> Tensor:
        plan = _Plan(rois, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned,
                     input.size(1), budget)
        out, choice = _pool(input, plan, pool_mode)
        ctx.plan, ctx.pool_mode = plan, pool_mode
        ctx.input_shape = input.shape
        ctx.save_for_backward(rois, choice)  # rois: guards against in-place edits
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> Tuple[Optional[Tensor], ...]:
        _, choice = ctx.saved_tensors
        plan: _Plan = ctx.plan
        n, channels, height, width = ctx.input_shape
        bins = plan.pooled[0] * plan.pooled[1]
        grad = grad_output.permute(0, 2, 3, 1).reshape(-1, bins, channels)
        grad_feat = grad.new_zeros((n * height * width, channels))
        for gh, gw, chunk in plan.chunks:
            if gh == 0 or gw == 0:
                continue
            index, weight, y = plan.corners(gh, gw, chunk, height, width)
            g = grad.index_select(0, chunk).view(-1, channels)
            if ctx.pool_mode == 'avg':
                src = weight[..., None] * (g / plan.bin_count(chunk))  # (4, G, k*bins, C)
                _accumulate_(grad_feat, index.reshape(-1), src.view(-1, channels))
                continue
            best = choice.index_select(0, chunk).view(-1, channels)
            # mmcv's backward skips elements whose stored argmax y is -1: no point chosen,
            # or (its quirk) the chosen point lies exactly at y == -1.
            sel = best.clamp_min(0)
            skip = (best < 0) | (torch.gather(y.t(), 1, sel) == -1.0)
            sel = sel[None].expand(4, -1, -1)
            sel_index = torch.gather(index.transpose(1, 2), 2, sel)  # (4, k*bins, C)
            sel_weight = torch.gather(weight.transpose(1, 2), 2, sel)
            src = sel_weight * torch.where(skip, torch.zeros_like(g), g)
            flat = sel_index * channels + torch.arange(channels, device=g.device)
            _accumulate_(grad_feat.view(-1), flat.view(-1), src.view(-1))
        grad_input = grad_feat.view(n, height, width, channels).permute(0, 3, 1, 2)
        return (grad_input.contiguous(),) + (None,) * 8


def deterministic_roi_align(input: Tensor, rois: Tensor,
                            output_size: Union[int, Sequence[int]],
                            spatial_scale: float = 1.0, sampling_ratio: int = 0,
                            pool_mode: str = 'avg', aligned: bool = True,
                            max_chunk_elements: Optional[int] = None) -> Tensor:
    """RoIAlign with mmcv's semantics and a deterministic backward.

    Args:
        input: ``(N, C, H, W)`` feature map.
        rois: ``(K, 5)`` boxes ``[batch_idx, x1, y1, x2, y2]`` in image coordinates.
            They are cast to ``input``'s dtype and get no gradient (as in mmcv).
        output_size: ``h`` or ``(h, w)`` of the pooled output.
        spatial_scale: Factor mapping box coordinates onto ``input``.
        sampling_ratio: Sampling points per bin and axis; ``<= 0`` for adaptive
            ``ceil(roi_size / output_size)``.
        pool_mode: ``'avg'`` or ``'max'`` over the sampling points of a bin.
        aligned: Shift boxes by -0.5 pixel (detectron2 semantics); if False, RoI sizes
            are clamped to at least 1 (legacy MMDetection semantics).
        max_chunk_elements: Soft bound on the elements gathered at once; ``None`` for
            :data:`DEFAULT_MAX_CHUNK_ELEMENTS` of ``input``'s device type. It changes
            speed, peak memory and the (deterministic) summation order of the
            gradient, never the forward output.

    Returns:
        ``(K, C, output_h, output_w)`` pooled features, contiguous.

    Raises:
        ValueError: On unsupported arguments, malformed inputs, non-finite rois or, with
            ``aligned=True``, boxes with ``x2 < x1`` or ``y2 < y1``.
    """
    pooled_h, pooled_w = _check_args(output_size, sampling_ratio, pool_mode)
    _check_inputs(input, rois)
    if max_chunk_elements is None:
        max_chunk_elements = DEFAULT_MAX_CHUNK_ELEMENTS[
            'cpu' if input.device.type == 'cpu' else 'other']
    if input.device.type in routing.DEVICES and pool_mode == 'avg' and triton_available():
        from .roi_align_cuda import TritonRoIAlignFunction
        return TritonRoIAlignFunction.apply(
            input, rois.detach().to(input.dtype), pooled_h, pooled_w, spatial_scale,
            sampling_ratio, aligned, max_chunk_elements)
    return _RoIAlignFunction.apply(input, rois.detach().to(input.dtype), pooled_h, pooled_w,
                                   spatial_scale, sampling_ratio, pool_mode, aligned,
                                   max_chunk_elements)


class DeterministicRoIAlign(nn.Module):
    """Drop-in replacement for :class:`mmcv.ops.RoIAlign` with a deterministic backward.

    See the module docstring for the exact semantics and the determinism argument.

    Args:
        output_size: ``h`` or ``(h, w)`` of the pooled output.
        spatial_scale: Factor mapping box coordinates onto the feature map.
        sampling_ratio: Sampling points per bin and axis; ``<= 0`` for adaptive.
        pool_mode: ``'avg'`` or ``'max'``.
        aligned: detectron2's half-pixel alignment (True) or legacy MMDetection (False).
        use_torchvision: Accepted for compatibility. As in mmcv, it makes the layer
            average-pool regardless of ``pool_mode`` (torchvision's ``roi_align`` has the
            same sampling semantics as mmcv's ``'avg'`` mode); torchvision is not used.

    Attributes:
        max_chunk_elements: Soft bound on the elements gathered at once; ``None`` (the
            class-wide default) picks one per device type. May be set per instance.
    """

    max_chunk_elements: Optional[int] = None

    def __init__(self, output_size: Union[int, Tuple[int, int]], spatial_scale: float = 1.0,
                 sampling_ratio: int = 0, pool_mode: str = 'avg', aligned: bool = True,
                 use_torchvision: bool = False) -> None:
        super().__init__()
        self.output_size = _check_args(output_size, int(sampling_ratio), pool_mode)
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.pool_mode = pool_mode
        self.aligned = aligned
        self.use_torchvision = use_torchvision

    @classmethod
    def from_mmcv(cls, layer: nn.Module) -> DeterministicRoIAlign:
        """Build the equivalent of an ``mmcv.ops.RoIAlign`` instance (same arguments)."""
        return cls(layer.output_size, layer.spatial_scale, layer.sampling_ratio,
                   layer.pool_mode, layer.aligned, layer.use_torchvision)

    def forward(self, input: Tensor, rois: Tensor) -> Tensor:
        """Pool ``rois`` from ``input``.

        Args:
            input: ``(N, C, H, W)`` feature map.
            rois: ``(K, 5)`` boxes ``[batch_idx, x1, y1, x2, y2]``.

        Returns:
            ``(K, C, output_h, output_w)`` pooled features.
        """
        mode = 'avg' if self.use_torchvision else self.pool_mode
        return deterministic_roi_align(input, rois, self.output_size, self.spatial_scale,
                                       self.sampling_ratio, mode, self.aligned,
                                       self.max_chunk_elements)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(output_size={self.output_size}, '
                f'spatial_scale={self.spatial_scale}, '
                f'sampling_ratio={self.sampling_ratio}, pool_mode={self.pool_mode}, '
                f'aligned={self.aligned}, use_torchvision={self.use_torchvision})')
