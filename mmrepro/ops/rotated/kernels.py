"""The rotated ops' input gradients without atomics: entries, then a CSR sum.

mmcv's CUDA backward passes of ``RoIAlignRotated``, ``RiRoIAlignRotated`` and
``rotated_feature_align`` scatter ``grad_output * weight`` into the feature map's
gradient with ``atomicAdd``, so the order of the additions (and the result's bits)
changes from run to run. Here, as for RoIAlign (:mod:`mmrepro.ops.roi_align.kernels`),
every contribution becomes an entry ``(feature pixel, grad_output row, weight)``
written by a Triton kernel (:mod:`mmrepro.ops.rotated.triton_rotated`), the entries are
sorted by pixel with a stable sort, and each pixel sums its entries in that fixed order
(``csr_kernels.csr_sum``, float32; float64 for float64 inputs):

- ``RoIAlignRotated``: four entries per sampling point of every bin, weight
  ``w / count``; the channel does not change the pixel, so rows are the
  ``(K * pooled_h * pooled_w, C)`` view of ``grad_output``.
- ``RiRoIAlignRotated``: output orientation ``o`` of field ``c`` reads input
  orientations ``(o - ind) mod O`` (weight ``r_var``) and the next one (``l_var``) at
  the points of ``RoIAlignRotated(aligned=False)``. Its gradient is that of
  ``RoIAlignRotated`` applied to ``r_var * g[(j + ind) mod O] + l_var * g[(j + ind - 1)
  mod O]``, a per-RoI mix of ``grad_output``'s orientation channels (no accumulation
  across RoIs, computed in the accumulation dtype).
- ``rotated_feature_align``: output pixel ``p`` adds its own feature (an entry of
  weight 1) and the bilinear samples at 1 or 5 points, four entries each.

One host synchronisation in a RoI op's backward (the number of entries), none in
``rotated_feature_align``'s. Runs on CUDA, and on CPU tensors under
``TRITON_INTERPRET=1`` (how the tests run it).
"""
from __future__ import annotations

import importlib
from typing import Tuple

import torch
from torch import Tensor

from ..csr_kernels import compute_dtype
from ..roi_align.kernels import POINTS_PER_PROGRAM, TL_DTYPE, roi_point_entries, sum_entries
from .geometry import cyclic_shift, feature_align_points, orientation_shift, rotated_roi_geometry

__all__ = ['feature_align_entries', 'riroi_align_rotated_backward', 'rotated_entries',
           'roi_align_rotated_backward', 'rotated_feature_align_backward']

_KERNEL = 'rotated.triton_rotated:rotated_entries_kernel'


def rotated_entries(rois: Tensor, pooled: Tuple[int, int], spatial_scale: float,
                    sampling_ratio: int, aligned: bool, clockwise: bool, height: int,
                    width: int, op: str) -> Tuple[Tensor, ...]:
    """``(keys, rows, weights)`` of every sampling point of every rotated RoI.

    Keys are feature pixels ``b*H*W + y*W + x`` (int32, -1 for a point outside the map),
    rows are ``grad_output`` rows (``k * pooled_h * pooled_w + bin``), weights
    ``w / count``, in (RoI, bin, iy, ix, corner) order. ``rois`` are ``(K, 6)`` in the
    input's dtype; the other arguments are the op's (``op`` names it in errors).
    """
    per_roi, grid = rotated_roi_geometry(rois, pooled, spatial_scale, sampling_ratio,
                                         aligned, clockwise)
    return roi_point_entries(_KERNEL, per_roi, grid, rois[:, 0].long(), pooled, height,
                             width, rois.dtype, op)


def roi_align_rotated_backward(grad_output: Tensor, rois: Tensor, spatial_scale: float,
                               sampling_ratio: int, aligned: bool, clockwise: bool,
                               input_shape: torch.Size) -> Tensor:
    """Input gradient of ``RoIAlignRotated``, without atomics.

    Args:
        grad_output: ``(K, C, pooled_h, pooled_w)`` upstream gradient.
        rois: ``(K, 6)`` boxes in ``grad_output``'s dtype.
        spatial_scale: As in the forward.
        sampling_ratio: As in the forward.
        aligned: As in the forward.
        clockwise: As in the forward.
        input_shape: ``(N, C, H, W)`` of the feature map.

    Returns:
        ``(N, C, H, W)`` contiguous gradient in ``grad_output``'s dtype.
    """
    pooled = (grad_output.size(2), grad_output.size(3))
    entries = rotated_entries(rois, pooled, spatial_scale, sampling_ratio, aligned,
                              clockwise, input_shape[2], input_shape[3], 'RoIAlignRotated')
    return sum_entries(grad_output, entries, input_shape)


def riroi_align_rotated_backward(grad_output: Tensor, rois: Tensor, spatial_scale: float,
                                 num_samples: int, num_orientations: int, clockwise: bool,
                                 input_shape: torch.Size) -> Tensor:
    """Input gradient of ``RiRoIAlignRotated``, without atomics.

    Args:
        grad_output: ``(K, C * O, pooled_h, pooled_w)`` upstream gradient.
        rois: ``(K, 6)`` boxes in ``grad_output``'s dtype.
        spatial_scale: As in the forward.
        num_samples: As in the forward (mmcv's ``sampling_ratio``).
        num_orientations: ``O``.
        clockwise: As in the forward.
        input_shape: ``(N, C * O, H, W)`` of the feature map.

    Returns:
        ``(N, C * O, H, W)`` contiguous gradient in ``grad_output``'s dtype.
    """
    shift, l_var, r_var = orientation_shift(rois[:, 5], num_orientations)
    grad = grad_output.to(compute_dtype(grad_output.dtype))
    weight = [v.to(grad.dtype)[:, None, None, None] for v in (r_var, l_var)]
    mixed = (weight[0] * cyclic_shift(grad, shift, num_orientations)
             + weight[1] * cyclic_shift(grad, shift - 1, num_orientations))
    pooled = (grad_output.size(2), grad_output.size(3))
    entries = rotated_entries(rois, pooled, spatial_scale, num_samples, False, clockwise,
                              input_shape[2], input_shape[3], 'RiRoIAlignRotated')
    return sum_entries(mixed, entries, input_shape).to(grad_output.dtype)


def feature_align_entries(bboxes: Tensor, spatial_scale: float, points: int,
                          height: int, width: int) -> Tuple[Tensor, ...]:
    """``(keys, rows, weights)`` of ``rotated_feature_align``'s backward.

    Four entries per sampling point in (pixel, point, corner) order, then one entry
    ``(p, p, 1)`` per output pixel ``p`` (the feature it adds itself); keys and rows
    are pixels ``n*H*W + h*W + w`` (a key -1 for a point outside the map).
    """
    coords = feature_align_points(bboxes, spatial_scale, points)
    cdt = compute_dtype(bboxes.dtype)
    pixels = coords.size(1)
    total = coords[0].numel()
    if 4 * total + pixels >= 2**31:
        raise ValueError(f'rotated_feature_align: {4 * total + pixels} gradient entries '
                         'exceed the int32 range of the CUDA backward; split the batch.')
    keys = torch.empty(4 * total + pixels, dtype=torch.int32, device=bboxes.device)
    rows = torch.empty_like(keys)
    weights = torch.empty(keys.shape, dtype=cdt, device=bboxes.device)
    if total:
        module = importlib.import_module('.triton_rotated', __package__)
        ys, xs = coords.to(cdt).contiguous()
        grid = ((total + POINTS_PER_PROGRAM - 1) // POINTS_PER_PROGRAM,)
        module.point_entries_kernel[grid](
            ys, xs, keys, rows, weights, total, height, width, POINTS=points,
            BLOCK=POINTS_PER_PROGRAM, COORD=getattr(module.tl, TL_DTYPE[bboxes.dtype]))
    itself = torch.arange(pixels, dtype=torch.int32, device=bboxes.device)
    keys[4 * total:], rows[4 * total:], weights[4 * total:] = itself, itself, 1.0
    return keys, rows, weights


def rotated_feature_align_backward(grad_output: Tensor, bboxes: Tensor, spatial_scale: float,
                                   points: int) -> Tensor:
    """Input gradient of ``rotated_feature_align``, without atomics.

    Args:
        grad_output: ``(N, C, H, W)`` upstream gradient.
        bboxes: ``(N, H, W, 5)`` boxes in ``grad_output``'s dtype.
        spatial_scale: As in the forward.
        points: 1 or 5, as in the forward.

    Returns:
        ``(N, C, H, W)`` contiguous gradient in ``grad_output``'s dtype.
    """
    entries = feature_align_entries(bboxes, spatial_scale, points, grad_output.size(2),
                                    grad_output.size(3))
    return sum_entries(grad_output, entries, grad_output.shape)
