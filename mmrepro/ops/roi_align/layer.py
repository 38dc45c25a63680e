"""A deterministic drop-in for :class:`mmcv.ops.RoIAlign`.

This module's docstring is the op's specification; the sampling geometry, the chunk
plan and the pure-PyTorch forward it describes live in ``plan.py`` of this package, which
the CUDA path (``cuda.py``) shares.

mmcv's CUDA RoIAlign backward scatters every sampling point's gradient into the feature
map with ``atomicAdd``, so the order of the floating-point additions (and hence the
gradient bits) changes from run to run. :class:`DeterministicRoIAlign` computes the
same function without unordered accumulation, on two paths:

* **CUDA, ``'avg'`` mode** (MMDetection's default): mmcv's own forward (no atomics;
  bit-identical to ``mmcv.ops.RoIAlign``) and a backward that builds, once per call,
  the (feature pixel, output bin, weight) entries of every sampling point, sorts them
  by pixel with a stable sort, and sums each pixel's entries in that order in a Triton
  kernel (``cuda.py``, ``kernels.py``). fp16/bf16 accumulate in float32.
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

from typing import Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.nn.modules.utils import _pair

from .. import routing
from .kernels import triton_available
from .plan import Plan, pool

__all__ = ['DeterministicRoIAlign', 'deterministic_roi_align']

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
        plan = Plan(rois, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned,
                    input.size(1), budget)
        out, choice = pool(input, plan, pool_mode)
        ctx.plan, ctx.pool_mode = plan, pool_mode
        ctx.input_shape = input.shape
        ctx.save_for_backward(rois, choice)  # rois: guards against in-place edits
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> Tuple[Optional[Tensor], ...]:
        _, choice = ctx.saved_tensors
        plan: Plan = ctx.plan
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
        from .cuda import TritonRoIAlignFunction
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
