"""mmcv's rotated ops with their forward and a backward without atomics.

Each forward is mmcv's own compiled kernel, called as mmcv's ``Function`` calls it: it
computes every output element by itself (no atomics), so it is deterministic, and the
output is bit-identical to mmcv's op. The backward is mmrepro's
(:mod:`mmrepro.ops.rotated.kernels`): entries sorted by feature pixel and summed in
that order, which differentiates the sampling the forward did (coordinates computed
as mmcv's kernels compute them, fp16 step by step in half).

``RiRoIAlignRotated`` has no CPU kernel in mmcv; on CPU (the tests, under Triton's
interpreter) its forward is mmcv's CPU ``RoIAlignRotated`` (``aligned=False``, the same
sampling) followed by the per-RoI mix of orientation channels that mmcv's CUDA kernel
does: the same function, rounded differently.

Inputs are made contiguous (mmcv's kernels index them as such). Arguments are those of
``mmcv.ops.roi_align_rotated``, ``riroi_align_rotated`` and ``rotated_feature_align``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.nn.modules.utils import _pair

from .geometry import cyclic_shift, orientation_shift
from .kernels import (
    riroi_align_rotated_backward,
    roi_align_rotated_backward,
    rotated_feature_align_backward,
)

__all__ = ['riroi_align_rotated', 'roi_align_rotated', 'rotated_feature_align']

IntPair = Union[int, Tuple[int, int]]


@functools.cache
def _ext() -> Any:
    """mmcv's compiled ops (the routers run only where mmcv's rotated ops are in use)."""
    from mmcv.utils import ext_loader
    return ext_loader.load_ext('_ext', ['roi_align_rotated_forward',
                                        'riroi_align_rotated_forward',
                                        'rotated_feature_align_forward'])


def _align(input: Tensor, rois: Tensor, pooled: Tuple[int, int], spatial_scale: float,
           sampling_ratio: int, aligned: bool, clockwise: bool) -> Tensor:
    """mmcv's ``roi_align_rotated_forward``."""
    output = input.new_zeros(rois.size(0), input.size(1), *pooled)
    _ext().roi_align_rotated_forward(input, rois, output, pooled_height=pooled[0],
                                     pooled_width=pooled[1], spatial_scale=spatial_scale,
                                     sampling_ratio=sampling_ratio, aligned=aligned,
                                     clockwise=clockwise)
    return output


class _KeptFunction(torch.autograd.Function):
    """What the three ops share: the forward keeps the boxes, the op's arguments and its
    backward; the backward computes the input's gradient with them (the boxes get none,
    as in mmcv)."""

    @staticmethod
    def keep(ctx, input: Tensor, boxes: Tensor, args: Tuple[Any, ...],
             backward: Callable[..., Tensor]) -> Tuple[Tensor, Tensor]:
        """Keep ``boxes``, ``args`` and ``backward(grad_output, boxes, *args)``; returns
        ``(input, boxes)`` made contiguous."""
        input, boxes = input.contiguous(), boxes.contiguous()
        ctx.args, ctx.grad_input = args, backward
        ctx.save_for_backward(boxes)
        return input, boxes

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> Tuple[Optional[Tensor], ...]:
        boxes, = ctx.saved_tensors
        grad = None
        if ctx.needs_input_grad[0]:
            grad = ctx.grad_input(grad_output.contiguous(), boxes, *ctx.args)
        return (grad,) + (None,) * (len(ctx.needs_input_grad) - 1)


class RoIAlignRotatedFunction(_KeptFunction):
    """``mmcv.ops.roi_align_rotated``: mmcv's forward, the sorted-entries backward."""

    @staticmethod
    def takes(*args: Any) -> bool:
        """Whether mmcv's ``Function`` accepts ``apply(*args)`` (it checks nothing)."""
        return True

    @staticmethod
    def forward(ctx, input: Tensor, rois: Tensor, output_size: IntPair,
                spatial_scale: float, sampling_ratio: int = 0, aligned: bool = True,
                clockwise: bool = False) -> Tensor:
        args = (spatial_scale, sampling_ratio, aligned, clockwise)
        input, rois = _KeptFunction.keep(ctx, input, rois, (*args, input.shape),
                                         roi_align_rotated_backward)
        return _align(input, rois, _pair(output_size), *args)


def riroi_out_size(out_size: Any) -> Optional[Tuple[int, int]]:
    """``(h, w)`` of mmcv's ``RiRoIAlignRotated`` ``out_size``; None where mmcv raises."""
    if isinstance(out_size, int):
        return out_size, out_size
    if isinstance(out_size, tuple) and len(out_size) == 2 and \
            all(isinstance(s, int) for s in out_size):
        return out_size
    return None


class RiRoIAlignRotatedFunction(_KeptFunction):
    """``mmcv.ops.riroi_align_rotated``: mmcv's forward, the sorted-entries backward."""

    @staticmethod
    def takes(*args: Any) -> bool:
        """Whether mmcv's ``Function`` accepts ``apply(*args)``: an ``out_size`` it reads."""
        return len(args) > 2 and riroi_out_size(args[2]) is not None

    @staticmethod
    def forward(ctx, features: Tensor, rois: Tensor, out_size: IntPair,
                spatial_scale: float, num_samples: int = 0, num_orientations: int = 8,
                clockwise: bool = False) -> Tensor:
        pooled = riroi_out_size(out_size)
        if pooled is None:
            raise TypeError('"out_size" should be an integer or tuple of integers, but got '
                            f'{out_size}')
        features, rois = _KeptFunction.keep(
            ctx, features, rois,
            (spatial_scale, num_samples, num_orientations, clockwise, features.shape),
            riroi_align_rotated_backward)
        if features.device.type == 'cuda':
            output = features.new_zeros(rois.size(0), features.size(1), *pooled)
            _ext().riroi_align_rotated_forward(
                features, rois, output, pooled_height=pooled[0], pooled_width=pooled[1],
                spatial_scale=spatial_scale, num_samples=num_samples,
                num_orientations=num_orientations, clockwise=clockwise)
            return output
        aligned = _align(features, rois, pooled, spatial_scale, num_samples, False, clockwise)
        shift, l_var, r_var = orientation_shift(rois[:, 5], num_orientations)
        return (r_var[:, None, None, None] * cyclic_shift(aligned, -shift, num_orientations)
                + l_var[:, None, None, None]
                * cyclic_shift(aligned, 1 - shift, num_orientations))


class RotatedFeatureAlignFunction(_KeptFunction):
    """``mmcv.ops.rotated_feature_align``: mmcv's forward, the sorted-entries backward."""

    @staticmethod
    def takes(*args: Any) -> bool:
        """Whether mmcv's ``Function`` accepts ``apply(*args)``: 1 or 5 ``points``."""
        return len(args) > 3 and args[3] in (1, 5)

    @staticmethod
    def forward(ctx, features: Tensor, best_rbboxes: Tensor, spatial_scale: float,
                points: int) -> Tensor:
        if points not in (1, 5):
            raise AssertionError(f'rotated_feature_align: points={points}; mmcv supports '
                                 '1 and 5.')
        features, best_rbboxes = _KeptFunction.keep(ctx, features, best_rbboxes,
                                                    (spatial_scale, points),
                                                    rotated_feature_align_backward)
        output = torch.zeros_like(features)
        _ext().rotated_feature_align_forward(features, best_rbboxes, output,
                                             spatial_scale=spatial_scale, points=points)
        return output


def roi_align_rotated(input: Tensor, rois: Tensor, output_size: IntPair,
                      spatial_scale: float, sampling_ratio: int = 0, aligned: bool = True,
                      clockwise: bool = False) -> Tensor:
    """``mmcv.ops.roi_align_rotated`` with a deterministic backward.

    Args:
        input: ``(N, C, H, W)`` features.
        rois: ``(K, 6)`` boxes ``[batch, center_x, center_y, w, h, theta]`` (radians),
            in ``input``'s dtype; they get no gradient (as in mmcv).
        output_size: ``h`` or ``(h, w)``.
        spatial_scale: Factor mapping box coordinates onto ``input``.
        sampling_ratio: Points per bin and axis; 0: ``ceil(roi_size / output_size)``.
        aligned: Shift centers by -0.5 pixel (detectron2); if False, sizes >= 1.
        clockwise: The angle turns clockwise in image space.

    Returns:
        ``(K, C, h, w)``, mmcv's forward.
    """
    return RoIAlignRotatedFunction.apply(input, rois, output_size, spatial_scale,
                                         sampling_ratio, aligned, clockwise)


def riroi_align_rotated(features: Tensor, rois: Tensor, out_size: IntPair,
                        spatial_scale: float, num_samples: int = 0,
                        num_orientations: int = 8, clockwise: bool = False) -> Tensor:
    """``mmcv.ops.riroi_align_rotated`` (ReDet) with a deterministic backward.

    Args:
        features: ``(N, C * O, H, W)``; channel ``c * O + j`` is orientation ``j`` of
            field ``c``.
        rois: ``(K, 6)`` boxes ``[batch, center_x, center_y, w, h, theta]`` (radians).
        out_size: ``h`` or ``(h, w)``.
        spatial_scale: Factor mapping box coordinates onto ``features``.
        num_samples: Points per bin and axis; 0: ``ceil(roi_size / out_size)``.
        num_orientations: ``O``.
        clockwise: The angle turns clockwise in image space.

    Returns:
        ``(K, C * O, h, w)``: output orientation ``o`` pools input orientations
        ``(o - ind) mod O`` and the next one, weighted by the angle's position between
        them (``ind = floor(theta * O / 2pi)``).
    """
    return RiRoIAlignRotatedFunction.apply(features, rois, out_size, spatial_scale,
                                           num_samples, num_orientations, clockwise)


def rotated_feature_align(features: Tensor, best_rbboxes: Tensor,
                          spatial_scale: float = 1 / 8, points: int = 1) -> Tensor:
    """``mmcv.ops.rotated_feature_align`` (R3Det) with a deterministic backward.

    Args:
        features: ``(N, C, H, W)``.
        best_rbboxes: ``(N, H, W, 5)`` refined boxes, one per feature pixel.
        spatial_scale: Factor mapping box coordinates onto ``features``.
        points: 1 (each box's center) or 5 (center and corners).

    Returns:
        ``(N, C, H, W)``: each pixel's feature plus the bilinear samples at its box's
        points.
    """
    return RotatedFeatureAlignFunction.apply(features, best_rbboxes, spatial_scale, points)
