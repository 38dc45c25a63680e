"""``AdaptiveAvgPool2d`` whose CUDA backward is deterministic.

PyTorch's CUDA ``adaptive_avg_pool2d`` backward adds into the input gradient with
atomics, so :func:`torch.use_deterministic_algorithms` makes it raise. Adaptive
average pooling is linear and separable: ``out = P_h @ x @ P_w^T``, where row ``i`` of
``P_h`` averages input rows ``floor(i*H/oh)`` to ``ceil((i+1)*H/oh) - 1`` (PyTorch's
windows). Matrix products have deterministic backward passes; the common ``(1, 1)``
case is a mean. Results match PyTorch within float rounding.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from torch import Tensor, nn

from . import routing

__all__ = ['DeterministicAdaptiveAvgPool2d', 'adaptive_avg_pool2d', 'swap_adaptive_pools']

Size = Union[int, None, Sequence[Optional[int]]]


def _window_matrix(size: int, out: int, like: Tensor) -> Tensor:
    """``(out, size)``: row ``i`` is 1/count over PyTorch's ``i``-th window."""
    i = torch.arange(out, device=like.device)
    start = torch.div(i * size, out, rounding_mode='floor')
    end = torch.div((i + 1) * size + out - 1, out, rounding_mode='floor')
    j = torch.arange(size, device=like.device)
    inside = (j[None, :] >= start[:, None]) & (j[None, :] < end[:, None])
    return inside.to(like.dtype) / (end - start).to(like.dtype)[:, None]


def adaptive_avg_pool2d(input: Tensor, output_size: Size) -> Tensor:
    """``F.adaptive_avg_pool2d`` through a mean or two matrix products.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        output_size: As in ``nn.AdaptiveAvgPool2d`` (``None`` keeps that size).

    Returns:
        The pooled tensor, in ``input``'s dtype.
    """
    height, width = input.shape[-2:]
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    out_h = height if output_size[0] is None else int(output_size[0])
    out_w = width if output_size[1] is None else int(output_size[1])
    if (out_h, out_w) == (1, 1):
        return input.mean((-2, -1), keepdim=True)
    return _window_matrix(height, out_h, input) @ input @ \
        _window_matrix(width, out_w, input).t()


class DeterministicAdaptiveAvgPool2d(nn.AdaptiveAvgPool2d):
    """``nn.AdaptiveAvgPool2d`` that uses :func:`adaptive_avg_pool2d` where it matters.

    On the devices of :data:`mmrepro.ops.routing.DEVICES` (CUDA), with gradients
    wanted; elsewhere PyTorch's own op, whose CPU backward is deterministic.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input`` to ``self.output_size``."""
        if input.device.type in routing.DEVICES and torch.is_grad_enabled() and input.requires_grad:
            return adaptive_avg_pool2d(input, self.output_size)
        return super().forward(input)


def swap_adaptive_pools(model: nn.Module) -> list:
    """Make every ``nn.AdaptiveAvgPool2d`` of ``model`` (or MMDetection's wrapper of it,
    which only adds empty-batch handling that :func:`adaptive_avg_pool2d` has) a
    :class:`DeterministicAdaptiveAvgPool2d`, in place (no parameters, so the
    ``state_dict`` is unchanged).

    Returns:
        The qualified names of the swapped modules.
    """
    names = []
    for name, module in model.named_modules():
        cls = type(module)
        if cls is nn.AdaptiveAvgPool2d or (cls.__name__ == 'AdaptiveAvgPool2d'
                                           and cls.__module__.startswith('mmdet.')):
            module.__class__ = DeterministicAdaptiveAvgPool2d
            names.append(name)
    return names
