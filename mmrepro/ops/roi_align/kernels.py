"""Triton kernels of RoIAlign's backward without atomics: entries, then a CSR sum.

The input gradient of RoIAlign (``avg`` mode) is a scatter: every sampling point of
every output bin adds ``grad_output[bin, c] * w / count`` to four feature pixels. mmcv
does that with ``atomicAdd``, whose order (and so the float result) changes from run
to run. Here the same sum is a gather, in an order fixed by construction:

1. :func:`build_entries` writes, for every sampling point, its four corners as entries
   ``(feature pixel, output row, weight / count)``; points outside the map get the
   key -1 (sorted first, never read). The index work does not depend on the
   channel, so it is done once per call.
2. The caller sorts the entries by pixel with a stable sort and takes CSR row offsets
   (``csr_kernels.csr_rows``); entries of one pixel then keep their (RoI, bin, point,
   corner) order.
3. ``csr_kernels.csr_sum`` runs one program per (pixel block, channel block) that adds
   each pixel's entries in that order, in float32 (float64 for float64 inputs).

No atomics, so the result is the same bits on every run. Both kernels run on CUDA, and
on CPU tensors under ``TRITON_INTERPRET=1`` (how the tests run them). Triton is
imported on first use, so that the variable is read then.
"""
from __future__ import annotations

import importlib
from typing import Sequence, Tuple

import torch
from torch import Tensor

from ..csr_kernels import compute_dtype, csr_rows, csr_sum, triton_available

__all__ = ['build_entries', 'csr_rows', 'roi_align_backward', 'roi_point_entries',
           'sum_entries', 'triton_available']

#: Sampling points per program of the entries kernel.
POINTS_PER_PROGRAM = 256
#: Triton dtype of each input dtype: the forward's arithmetic the backward repeats.
TL_DTYPE = {torch.float16: 'float16', torch.bfloat16: 'bfloat16', torch.float32: 'float32',
             torch.float64: 'float64'}


def roi_point_entries(kernel_name: str, per_roi: Sequence[Tensor], grid: Tuple[Tensor, ...],
                      batch: Tensor, pooled: Tuple[int, int], height: int, width: int,
                      dtype: torch.dtype, op: str) -> Tuple[Tensor, ...]:
    """Launch an entries kernel over every sampling point of every RoI.

    The kernel (``kernel_name`` in :mod:`mmrepro.ops.roi_align.triton_entries` or
    :mod:`mmrepro.ops.rotated.triton_rotated`) takes ``(point_roi, roi_first, batch,
    *per_roi, grid_h, grid_w, scale, keys, rows, weights, total, height, width,
    pooled_h, pooled_w, BLOCK, COORD)`` and writes four entries per point.

    Args:
        kernel_name: ``module:function`` of the kernel, the module relative to
            ``mmrepro.ops``.
        per_roi: ``(K,)`` per-RoI float inputs of the kernel (cast to the compute dtype).
        grid: ``(grid_h, grid_w, count)`` per RoI (points per bin and axis, and the
            divisor of the bin's sum).
        batch: ``(K,)`` int batch index of every RoI.
        pooled: ``(pooled_h, pooled_w)``.
        height: Feature map height.
        width: Feature map width.
        dtype: The input's dtype (decides the compute dtype and the rounding).
        op: The op's name, for the error message.

    Returns:
        ``(keys, rows, weights)`` as :func:`build_entries` describes them.
    """
    grid_h, grid_w, count = grid
    device, k = batch.device, batch.numel()
    per_point = grid_h.clamp_min(0) * grid_w.clamp_min(0)
    per_roi_points = per_point * (pooled[0] * pooled[1])
    ends = torch.cumsum(per_roi_points, 0)
    total = int(ends[-1]) if k else 0  # the one host synchronisation of the backward
    cdt = compute_dtype(dtype)
    empty = torch.empty(0, dtype=torch.int32, device=device)
    if total == 0:
        return empty, empty, torch.empty(0, dtype=cdt, device=device)
    if 4 * total >= 2**31 or batch.numel() * pooled[0] * pooled[1] >= 2**31:
        raise ValueError(f'{op}: {4 * total} gradient entries exceed the int32 range of '
                         'the CUDA backward; split the RoIs into batches.')
    point_roi = torch.repeat_interleave(torch.arange(k, device=device, dtype=torch.int32),
                                        per_roi_points, output_size=total)
    first = (ends - per_roi_points).to(torch.int32)
    keys = torch.empty(4 * total, dtype=torch.int32, device=device)
    rows = torch.empty_like(keys)
    weights = torch.empty(4 * total, dtype=cdt, device=device)
    as_c = [t.to(cdt).contiguous() for t in per_roi]
    scale = (1.0 / count.to(cdt)).contiguous()
    module, name = kernel_name.split(':')
    module = importlib.import_module(f'..{module}', __package__)
    grid_size = ((total + POINTS_PER_PROGRAM - 1) // POINTS_PER_PROGRAM,)
    getattr(module, name)[grid_size](
        point_roi, first, batch.to(torch.int32).contiguous(), *as_c,
        grid_h.to(torch.int32).contiguous(), grid_w.to(torch.int32).contiguous(), scale,
        keys, rows, weights, total, height, width, pooled[0], pooled[1],
        BLOCK=POINTS_PER_PROGRAM, COORD=getattr(module.tl, TL_DTYPE[dtype]))
    return keys, rows, weights


def build_entries(geometry: Tuple[Tensor, ...], batch: Tensor, pooled: Tuple[int, int],
                  height: int, width: int, dtype: torch.dtype) -> Tuple[Tensor, ...]:
    """The (pixel key, output row, weight / count) entries of every sampling point.

    Args:
        geometry: ``(start_h, start_w, bin_h, bin_w, grid_h, grid_w, count)`` per RoI,
            as :func:`mmrepro.ops.roi_align.plan.roi_geometry` returns them.
        batch: ``(K,)`` int batch index of every RoI.
        pooled: ``(pooled_h, pooled_w)``.
        height: Feature map height.
        width: Feature map width.
        dtype: The input's dtype (decides the compute dtype).

    Returns:
        ``(keys, rows, weights)``, each ``(4 * points,)`` in (RoI, bin, iy, ix, corner)
        order: the flat feature pixel ``b*H*W + y*W + x`` (int32; -1 for a point outside
        the map), the row of ``grad_output`` viewed as ``(K*pooled_h*pooled_w, C)``
        (int32), and the bilinear weight divided by the bin's point count.
    """
    return roi_point_entries('roi_align.triton_entries:entries_kernel', geometry[:4],
                             geometry[4:], batch, pooled, height, width, dtype,
                             'DeterministicRoIAlign')


def sum_entries(grad_output: Tensor, entries: Tuple[Tensor, ...],
                input_shape: torch.Size) -> Tensor:
    """Input gradient from the entries of every (pixel, ``grad_output`` row) pair.

    Args:
        grad_output: ``(K, C, h, w)`` upstream gradient; its rows are the ``(K*h*w, C)``
            channels-last view.
        entries: ``(keys, rows, weights)``: the pixel ``b*H*W + y*W + x`` of the input
            (-1: none), the ``grad_output`` row and the weight of every contribution.
        input_shape: ``(N, C, H, W)`` of the input.

    Returns:
        ``(N, C, H, W)`` contiguous gradient in ``grad_output``'s dtype, each pixel's
        entries added in their order (a stable sort by pixel), without atomics.
    """
    n, channels, height, width = input_shape
    num_pixels = n * height * width
    keys, rows, weights = entries
    order, row_ptr = csr_rows(keys, num_pixels)
    grad_rows = grad_output.permute(0, 2, 3, 1).reshape(-1, channels).contiguous()
    grad = csr_sum(grad_rows, row_ptr, rows[order], weights[order], num_pixels,
                   grad_output.dtype)
    return grad.view(n, height, width, channels).permute(0, 3, 1, 2).contiguous()


def roi_align_backward(grad_output: Tensor, geometry: Tuple[Tensor, ...], batch: Tensor,
                       input_shape: torch.Size) -> Tensor:
    """Input gradient of RoIAlign (``avg`` mode), without atomics.

    Args:
        grad_output: ``(K, C, pooled_h, pooled_w)`` upstream gradient.
        geometry: Per-RoI geometry (see :func:`build_entries`).
        batch: ``(K,)`` batch index of every RoI.
        input_shape: ``(N, C, H, W)`` of the feature map.

    Returns:
        ``(N, C, H, W)`` contiguous gradient in ``grad_output``'s dtype.
    """
    pooled = (grad_output.size(2), grad_output.size(3))
    entries = build_entries(geometry, batch, pooled, input_shape[2], input_shape[3],
                            grad_output.dtype)
    return sum_entries(grad_output, entries, input_shape)
