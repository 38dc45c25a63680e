"""DeterministicRoIAlign's CUDA path: mmcv's forward, and a backward without atomics.

- Forward: mmcv's own ``roi_align_forward`` where it supports the dtype (float16/32/64).
  It computes each output element by itself (no atomics), so it is deterministic and
  bit-identical to ``mmcv.ops.RoIAlign``. bfloat16, or an mmcv without its compiled
  ops, falls back to mmrepro's pure-PyTorch forward (``plan.py``).
- Backward: :func:`mmrepro.ops.roi_align.kernels.roi_align_backward`, entries sorted
  by feature pixel then summed per pixel in that fixed order (Triton), accumulating in
  float32 (float64 for float64 inputs).

Host synchronisations per call: one in the forward (the RoI checks) and one in the
backward (the number of gradient entries), whatever the number of RoIs.

Only ``'avg'`` mode (MMDetection's default) takes this path. ``'max'`` routes each
channel's gradient to its own sampling point, so its scatter cannot share one index;
on CUDA it keeps the pure-PyTorch path, whose ``index_put_(accumulate=True)`` is
sort-based and deterministic but slower.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .kernels import roi_align_backward
from .plan import Plan, pool, roi_geometry

#: dtypes mmcv 2.1.0's CUDA/CPU kernels are compiled for.
MMCV_DTYPES = (torch.float16, torch.float32, torch.float64)


@functools.cache
def _mmcv_ext() -> Optional[Any]:
    """mmcv's compiled ops, or None when mmcv (or its ops) cannot be imported."""
    try:
        from mmcv.utils import ext_loader
        return ext_loader.load_ext('_ext', ['roi_align_forward'])
    except (ImportError, AttributeError, OSError):
        return None


def _mmcv_forward(input: Tensor, rois: Tensor, pooled: Tuple[int, int],
                  spatial_scale: float, sampling_ratio: int,
                  aligned: bool) -> Optional[Tensor]:
    """mmcv's RoIAlign forward (``avg``), or None where it does not apply."""
    ext = _mmcv_ext()
    if ext is None or input.dtype not in MMCV_DTYPES:
        return None
    output = input.new_zeros((rois.size(0), input.size(1), *pooled))
    empty = input.new_zeros(0)
    ext.roi_align_forward(input.contiguous(), rois.contiguous(), output, empty, empty,
                          aligned_height=pooled[0], aligned_width=pooled[1],
                          spatial_scale=spatial_scale, sampling_ratio=sampling_ratio,
                          pool_mode=1, aligned=aligned)
    return output


class TritonRoIAlignFunction(torch.autograd.Function):
    """``avg`` RoIAlign: mmcv's forward, the sorted-entries Triton backward.

    Runs on CUDA tensors, and on CPU tensors under ``TRITON_INTERPRET=1`` (the tests).
    """

    @staticmethod
    def forward(ctx, input: Tensor, rois: Tensor, pooled_h: int, pooled_w: int,
                spatial_scale: float, sampling_ratio: int, aligned: bool,
                budget: int) -> Tensor:
        pooled = (pooled_h, pooled_w)
        out = _mmcv_forward(input, rois, pooled, spatial_scale, sampling_ratio, aligned)
        if out is None:
            plan = Plan(rois, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned,
                        input.size(1), budget)
            geometry = plan.geometry
            out = pool(input, plan, 'avg')[0]
        else:
            geometry = roi_geometry(rois, pooled_h, pooled_w, spatial_scale,
                                    sampling_ratio, aligned)
        ctx.geometry = geometry
        ctx.input_shape = input.shape
        ctx.save_for_backward(rois)  # guards against in-place edits of the rois
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> Tuple[Optional[Tensor], ...]:
        rois, = ctx.saved_tensors
        grad = roi_align_backward(grad_output.contiguous(), ctx.geometry, rois[:, 0].long(),
                                  ctx.input_shape)
        return (grad,) + (None,) * 7
