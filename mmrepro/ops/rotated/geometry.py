"""Where the rotated ops sample, computed as mmcv's kernels compute it (PyTorch).

Everything here is per RoI or per feature pixel, in the input's dtype ``T``, one
PyTorch operation per C++ operation of mmcv 2.1.0's CUDA kernels
(``roi_align_rotated_cuda_kernel.cuh``, ``riroi_align_rotated_cuda_kernel.cuh``,
``rotated_feature_align_cuda_kernel.cuh``) in the same order. A PyTorch operation on
float16 computes in float and rounds to half, as ``c10::Half``'s operators do, so the
fp16 coordinates are the forward's own. Conversions that mmcv makes on the way are
kept:

- ``spatial_scale`` reaches the kernels as a C++ ``float``, then ``T``;
- ``ceilf`` and ``floorf`` take a ``float`` (a float64 value is rounded to float first);
- ``cosf``/``sinf`` in ``rotated_feature_align`` compute in float for every ``T``;
- RiRoIAlign's ``theta * num_orientations / (2 * M_PI)`` divides in double, then
  converts to ``T`` (through float for half).
"""
from __future__ import annotations

import math
from typing import Tuple

import torch
from torch import Tensor

__all__ = ['cyclic_shift', 'feature_align_points', 'orientation_shift',
           'rotated_roi_geometry']


def _scale(spatial_scale: float, dtype: torch.dtype) -> float:
    """``spatial_scale`` as mmcv's kernels see it: a C++ float, then the kernel's type.

    A Python number (no copy to the device): PyTorch multiplies a tensor by it in the
    tensor's dtype (float for half, then rounded), as ``c10::Half`` multiplies two halves.
    """
    return torch.tensor(spatial_scale, dtype=torch.float32).to(dtype).item()


def rotated_roi_geometry(rois: Tensor, pooled: Tuple[int, int], spatial_scale: float,
                         sampling_ratio: int, aligned: bool,
                         clockwise: bool) -> Tuple[Tuple[Tensor, ...], Tuple[Tensor, ...]]:
    """Per-RoI geometry of ``RoIAlignRotated`` (and of ``RiRoIAlignRotated``, which is
    ``aligned=False``).

    Args:
        rois: ``(K, 6)`` boxes ``[batch, center_x, center_y, w, h, theta]`` in the input's
            dtype.
        pooled: ``(pooled_h, pooled_w)``.
        spatial_scale: Factor mapping box coordinates onto the feature map.
        sampling_ratio: Points per bin and axis; ``<= 0``: ``ceil(roi_size / pooled)``.
        aligned: Shift centers by -0.5 pixel; if False, sizes are clamped to >= 1.
        clockwise: The angle turns clockwise (mmcv negates it).

    Returns:
        ``(per_roi, grid)``: ``per_roi`` is ``(start_h, start_w, bin_h, bin_w,
        center_h, center_w, cos, sin)`` and ``grid`` is ``(grid_h, grid_w, count)``,
        each ``(K,)``. A sampling point ``(iy, ix)`` of bin ``(ph, pw)`` lies at
        ``yy = start_h + ph * bin_h + (iy + .5) * bin_h / grid_h`` (``xx`` alike), turned
        about the center: ``y = yy * cos - xx * sin + center_h``,
        ``x = yy * sin + xx * cos + center_w``; a bin's sum is divided by ``count``.
    """
    scale = _scale(spatial_scale, rois.dtype)
    offset = 0.5 if aligned else 0.0
    center_w = rois[:, 1] * scale - offset
    center_h = rois[:, 2] * scale - offset
    roi_w = rois[:, 3] * scale
    roi_h = rois[:, 4] * scale
    theta = -rois[:, 5] if clockwise else rois[:, 5]
    if not aligned:  # mmcv: "for backward-compatibility only"
        roi_w = roi_w.clamp_min(1.0)
        roi_h = roi_h.clamp_min(1.0)
    bin_h = roi_h / pooled[0]
    bin_w = roi_w / pooled[1]
    if sampling_ratio > 0:
        grid_h = torch.full(bin_h.shape, sampling_ratio, dtype=torch.long, device=rois.device)
        grid_w = grid_h
    else:  # ceilf(roi_height / pooled_height): the same division, ceiled as a float
        grid_h = torch.ceil(bin_h.float()).long()
        grid_w = torch.ceil(bin_w.float()).long()
    count = (grid_h * grid_w).clamp_min(1)
    per_roi = (-roi_h / 2, -roi_w / 2, bin_h, bin_w, center_h, center_w, torch.cos(theta),
               torch.sin(theta))
    return per_roi, (grid_h, grid_w, count)


def orientation_shift(theta: Tensor, num_orientations: int) -> Tuple[Tensor, Tensor, Tensor]:
    """RiRoIAlignRotated's orientation channels of each RoI.

    mmcv computes ``ind_float = theta * O / (2 * M_PI)``, ``ind = floorf(ind_float)``,
    ``l_var = ind_float - ind``, ``r_var = 1 - l_var``; output orientation ``o`` reads
    input orientation ``(o - ind) mod O`` with weight ``r_var`` and the next one with
    ``l_var``. ``theta`` is the angle as given (not negated for ``clockwise``).

    Args:
        theta: ``(K,)`` angles in the input's dtype.
        num_orientations: ``O``.

    Returns:
        ``(shift, l_var, r_var)``: ``ind mod O`` (int64) and the two weights in
        ``theta``'s dtype, each ``(K,)``.
    """
    ind_float = (theta * num_orientations).double() / (2 * math.pi)
    if theta.dtype != torch.float64:
        ind_float = ind_float.float()  # a double assigned to float, or to c10::Half
    ind_float = ind_float.to(theta.dtype)
    ind = torch.floor(ind_float.float())
    l_var = ind_float - ind.to(theta.dtype)
    return ind.long().remainder(num_orientations), l_var, 1.0 - l_var


def cyclic_shift(t: Tensor, shift: Tensor, num_orientations: int) -> Tensor:
    """``out[k, c, j] = t[k, c, (j + shift[k]) mod O]`` over the orientation channels.

    Args:
        t: ``(K, C * O, ...)``, channel ``c * O + j`` being orientation ``j`` of field
            ``c`` (mmcv's layout).
        shift: ``(K,)`` int64 shift of each RoI.
        num_orientations: ``O``.

    Returns:
        ``t``'s shape and dtype, contiguous.
    """
    k, channels = t.shape[:2]
    rest = t.shape[2:]
    view = t.reshape(k, channels // num_orientations, num_orientations, rest.numel())
    index = (torch.arange(num_orientations, device=t.device)[None] + shift[:, None])
    index = index.remainder(num_orientations)[:, None, :, None].expand_as(view)
    return torch.gather(view, 2, index).reshape(k, channels, *rest)


def feature_align_points(bboxes: Tensor, spatial_scale: float, points: int) -> Tensor:
    """The points ``rotated_feature_align`` samples for every feature pixel.

    Args:
        bboxes: ``(N, H, W, 5)`` boxes ``[y, x, w, h, angle]`` in the features' dtype
            (mmcv reads the first two as the center's y and x).
        spatial_scale: Factor mapping box coordinates onto the feature map.
        points: 1 (the center) or 5 (the center and the four corners).

    Returns:
        ``(2, N * H * W, points)``: the ``y`` and ``x`` of each point, in mmcv's order.
    """
    scale = _scale(spatial_scale, bboxes.dtype)
    roi_y = bboxes[..., 0] * scale
    roi_x = bboxes[..., 1] * scale
    ys, xs = [roi_y], [roi_x]
    if points > 1:
        roi_w = bboxes[..., 2] * scale
        roi_h = bboxes[..., 3] * scale
        angle = bboxes[..., 4].float()
        w_2, h_2 = roi_w / 2, roi_h / 2
        cosa, sina = torch.cos(angle).to(bboxes.dtype), torch.sin(angle).to(bboxes.dtype)
        wx, wy = cosa * w_2, sina * w_2
        hx, hy = -sina * h_2, cosa * h_2
        xs += [roi_x + wx + hx, roi_x - wx + hx, roi_x - wx - hx, roi_x + wx - hx]
        ys += [roi_y + wy + hy, roi_y - wy + hy, roi_y - wy - hy, roi_y + wy - hy]
    return torch.stack([torch.stack(ys, -1), torch.stack(xs, -1)]).reshape(2, -1, points)
