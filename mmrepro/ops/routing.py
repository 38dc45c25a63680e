"""Route mmcv's deformable and rotated ops and ``point_sample`` to mmrepro's
deterministic ones.

mmcv's layers call module-level functions (``deform_conv2d``,
``modulated_deform_conv2d``, ``MultiScaleDeformableAttnFunction.apply``,
``multi_scale_deformable_attn_pytorch``, and ``RoIAlignRotatedFunction.apply``,
``RiRoIAlignRotatedFunction.apply``; mmrotate's R3Det calls ``rotated_feature_align``,
which calls ``RotatedFeatureAlignFunction.apply``) and MMDetection's heads call
``point_sample`` (``F.grid_sample``). :func:`activate` replaces each of those names, once
per process, by a router, and hooks the given model so that the routers choose
mmrepro's version (:mod:`mmrepro.ops.deformable`, :mod:`mmrepro.ops.rotated`) only

- during that model's forward (a context variable its forward hooks set), and
- when gradients are wanted (the forward passes alone are deterministic), and
- for tensors on :data:`DEVICES` (CUDA; the tests add CPU under Triton's interpreter).

Every other caller, including any model that mmrepro was not asked to make
deterministic, gets mmcv's original function. The names replaced are listed in
:data:`ROUTED_NAMES` (and README).
"""
from __future__ import annotations

import contextvars
import importlib
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch
from torch import Tensor, nn

from . import deformable
from .csr_kernels import triton_available
from .rotated import functions as rotated_functions

__all__ = ['DEVICES', 'ROUTED_NAMES', 'activate', 'routed']

#: True during the forward of a model passed to :func:`activate`.
_ACTIVE = contextvars.ContextVar('mmrepro_deterministic_ops', default=False)
#: Environment variable that, with ``TRITON_INTERPRET=1``, adds CPU to :data:`DEVICES`:
#: a CPU run then takes the exact code path of a CUDA run (mmrepro's Triton kernels,
#: interpreted). For testing the CUDA path without a GPU; slow.
CPU_ENV = 'MMREPRO_TRITON_ON_CPU'


def _devices() -> Set[str]:
    wanted = os.environ.get(CPU_ENV, '0') not in ('', '0')
    if wanted and os.environ.get('TRITON_INTERPRET', '0') in ('', '0'):
        raise RuntimeError(f'{CPU_ENV}={os.environ[CPU_ENV]} needs TRITON_INTERPRET=1 '
                           '(Triton runs its kernels on CPU tensors only when interpreted); '
                           f'set both, or unset {CPU_ENV}.')
    return {'cuda', 'cpu'} if wanted else {'cuda'}


#: Device types on which the routers (and RoIAlign) use mmrepro's Triton ops.
DEVICES: Set[str] = _devices()
#: Attribute on a hooked model (so that it is hooked once).
_HOOKED_ATTR = '_mmrepro_routed'


def routed(*tensors: Any) -> bool:
    """Whether a routed call with these inputs takes mmrepro's deterministic path."""
    if not (_ACTIVE.get() and torch.is_grad_enabled()):
        return False
    inputs = [t for t in tensors if isinstance(t, Tensor)]
    return (any(t.requires_grad for t in inputs)
            and all(t.device.type in DEVICES for t in inputs) and triton_available())


def _check_deform_conv(input: Tensor, im2col_step: Optional[int] = None,
                       weight: Optional[Tensor] = None, bias: Any = False) -> None:
    """mmcv's checks of a deformable convolution's input, with its exceptions and words.

    mmcv processes ``im2col_step`` samples per kernel call and requires the batch to
    divide by ``min(im2col_step, batch)``; mmrepro's op has no such step, but a routed
    call keeps the contract, so code that runs routed also runs on mmcv's op. With
    ``weight``, ``deform_conv2d``'s shape check: the unpadded input is at least the
    kernel's size. The checks run in mmcv's order.
    """
    if input is not None and input.dim() != 4:
        raise ValueError(f'Expected 4D tensor as input, got {input.dim()}D tensor instead.')
    if bias is not False:
        raise AssertionError('Only support bias is False.')
    if im2col_step is not None and input.size(0) % min(im2col_step, input.size(0)) != 0:
        raise AssertionError('batch size must be divisible by im2col_step')
    if weight is not None and (input.size(2) < weight.size(2)
                               or input.size(3) < weight.size(3)):
        raise RuntimeError('input image is smaller than kernel')


def _deform_conv2d(original: Callable) -> Callable:
    def deform_conv2d(input: Tensor, offset: Tensor, weight: Tensor, stride: Any = 1,
                      padding: Any = 0, dilation: Any = 1, groups: int = 1,
                      deform_groups: int = 1, bias: bool = False,
                      im2col_step: int = 32) -> Tensor:
        if not routed(input, offset, weight):
            return original(input, offset, weight, stride, padding, dilation, groups,
                            deform_groups, bias, im2col_step)
        _check_deform_conv(input, im2col_step, weight, bias)
        return deformable.deform_conv2d(input, offset, weight, stride, padding, dilation,
                                        groups, deform_groups)
    return deform_conv2d


def _modulated_deform_conv2d(original: Callable) -> Callable:
    def modulated_deform_conv2d(input: Tensor, offset: Tensor, mask: Tensor,
                                weight: Tensor, bias: Any, stride: Any = 1,
                                padding: Any = 0, dilation: Any = 1, groups: int = 1,
                                deform_groups: int = 1) -> Tensor:
        if not routed(input, offset, mask, weight):
            return original(input, offset, mask, weight, bias, stride, padding, dilation,
                            groups, deform_groups)
        _check_deform_conv(input)
        return deformable.deform_conv2d(input, offset, weight, stride, padding, dilation,
                                        groups, deform_groups, mask=mask, bias=bias)
    return modulated_deform_conv2d


class _MSDAFunction:
    """Stands in for ``MultiScaleDeformableAttnFunction`` (only ``apply`` is used)."""

    def __init__(self, original: Any) -> None:
        self.__wrapped__ = original

    def apply(self, value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
              sampling_locations: Tensor, attention_weights: Tensor,
              im2col_step: int) -> Tensor:
        if not routed(value, sampling_locations, attention_weights):
            return self.__wrapped__.apply(value, spatial_shapes, level_start_index,
                                          sampling_locations, attention_weights, im2col_step)
        batch = value.size(0)
        step = min(batch, int(im2col_step))
        if batch % step:  # mmcv's CUDA op asserts this (a RuntimeError)
            raise RuntimeError(f'batch({batch}) must divide im2col_step({step})')
        return deformable.ms_deform_attn(value, spatial_shapes, level_start_index,
                                         sampling_locations.type_as(value),
                                         attention_weights.type_as(value))


def _msda_pytorch(original: Callable) -> Callable:
    def multi_scale_deformable_attn_pytorch(value: Tensor, value_spatial_shapes: Tensor,
                                            sampling_locations: Tensor,
                                            attention_weights: Tensor) -> Tensor:
        if not routed(value, sampling_locations, attention_weights):
            return original(value, value_spatial_shapes, sampling_locations,
                            attention_weights)
        sizes = value_spatial_shapes[:, 0] * value_spatial_shapes[:, 1]
        starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
        return deformable.ms_deform_attn(value, value_spatial_shapes, starts,
                                         sampling_locations, attention_weights,
                                         grid_sample_rule=True)
    return multi_scale_deformable_attn_pytorch


def _point_sample(original: Callable) -> Callable:
    def point_sample(input: Tensor, points: Tensor, align_corners: bool = False,
                     **kwargs: Any) -> Tensor:
        default = kwargs.get('mode', 'bilinear') == 'bilinear' and \
            kwargs.get('padding_mode', 'zeros') == 'zeros'
        if not (default and routed(input, points)):
            return original(input, points, align_corners=align_corners, **kwargs)
        grid = points.unsqueeze(2) if points.dim() == 3 else points
        if torch.is_autocast_enabled(input.device.type):
            input = input.float()  # autocast runs grid_sample in float32
        out = deformable.grid_sample(input, grid * 2.0 - 1.0, align_corners)
        return out.squeeze(3) if points.dim() == 3 else out
    return point_sample


class _RotatedFunction:
    """Stands in for an mmcv rotated op's ``Function`` class (only ``apply`` is used), or
    for its bound ``apply`` (``mmcv.ops.roi_align_rotated``, a callable): mmrepro's
    ``Function`` of the same name (:mod:`mmrepro.ops.rotated.functions`) when routed
    and it takes the arguments, else mmcv's, which raises mmcv's errors on bad ones.
    """

    def __init__(self, original: Any) -> None:
        self.__wrapped__ = original
        self._mmcv = original if isinstance(original, type) else original.__self__
        self._ours = getattr(rotated_functions, self._mmcv.__name__)

    def apply(self, *args: Any) -> Tensor:
        if routed(*args[:2]) and self._ours.takes(*args):
            return self._ours.apply(*args)
        return self._mmcv.apply(*args)

    __call__ = apply


#: (attribute, router factory, modules holding that name): mmcv's own module first,
#: then its re-export in ``mmcv.ops`` and the modules that import it by name.
_ROUTES: Tuple[Tuple[str, Callable, Tuple[str, ...]], ...] = (
    ('deform_conv2d', _deform_conv2d, (
        'mmcv.ops.deform_conv', 'mmcv.ops', 'mmcv.ops.saconv',
        'mmdet.models.dense_heads.tood_head')),
    ('modulated_deform_conv2d', _modulated_deform_conv2d, (
        'mmcv.ops.modulated_deform_conv', 'mmcv.ops')),
    ('MultiScaleDeformableAttnFunction', _MSDAFunction, ('mmcv.ops.multi_scale_deform_attn',)),
    ('multi_scale_deformable_attn_pytorch', _msda_pytorch, (
        'mmcv.ops.multi_scale_deform_attn',)),
    ('point_sample', _point_sample, (
        'mmcv.ops.point_sample', 'mmcv.ops', 'mmdet.models.dense_heads.mask2former_head',
        'mmdet.models.tracking_heads.mask2former_track_head',
        'mmdet.models.roi_heads.mask_heads.mask_point_head',
        'mmdet.models.roi_heads.point_rend_roi_head', 'mmdet.models.utils.point_sample')),
    ('RoIAlignRotatedFunction', _RotatedFunction, ('mmcv.ops.roi_align_rotated',)),
    ('roi_align_rotated', _RotatedFunction, ('mmcv.ops.roi_align_rotated', 'mmcv.ops')),
    ('RiRoIAlignRotatedFunction', _RotatedFunction, ('mmcv.ops.riroi_align_rotated',)),
    ('riroi_align_rotated', _RotatedFunction, ('mmcv.ops.riroi_align_rotated', 'mmcv.ops')),
    # mmcv's rotated_feature_align (also where mmrotate imported it) calls this one.
    ('RotatedFeatureAlignFunction', _RotatedFunction, ('mmcv.ops.rotated_feature_align',)),
)
#: (module, attribute, router factory) of every name :func:`activate` replaces.
ROUTED_NAMES: Tuple[Tuple[str, str, Callable], ...] = tuple(
    (module, attr, factory) for attr, factory, modules in _ROUTES for module in modules)
#: Original objects by ``(module, attribute)``, for the routers installed so far.
_ORIGINALS: Dict[Tuple[str, str], Any] = {}


def _install() -> List[str]:
    """Replace the names of :data:`ROUTED_NAMES` by routers (once each).

    mmcv's modules are imported here; MMDetection's only if already imported (a model
    that uses them has imported them by the time it is built).
    """
    installed = []
    for module_name, attr, factory in ROUTED_NAMES:
        if (module_name, attr) in _ORIGINALS:
            continue
        if module_name.startswith('mmcv'):
            try:
                importlib.import_module(module_name)
            except ImportError:
                continue
        module = sys.modules.get(module_name)
        original = getattr(module, attr, None)
        if original is None:
            continue
        _ORIGINALS[(module_name, attr)] = original
        setattr(module, attr, factory(original))
        installed.append(f'{module_name}.{attr}')
    return installed


def activate(model: nn.Module) -> List[str]:
    """Route the deterministic ops for ``model``'s forward passes.

    Args:
        model: The model whose forward (and so backward) should use mmrepro's ops.

    Returns:
        The qualified names replaced by routers in this call (empty after the first).
    """
    installed = _install()
    if getattr(model, _HOOKED_ATTR, False):
        return installed
    tokens: List[contextvars.Token] = []

    def enter(module: nn.Module, args: Any) -> None:
        tokens.append(_ACTIVE.set(True))

    def leave(module: nn.Module, args: Any, output: Any) -> None:
        if tokens:
            _ACTIVE.reset(tokens.pop())

    model.register_forward_pre_hook(enter)
    model.register_forward_hook(leave, always_call=True)
    object.__setattr__(model, _HOOKED_ATTR, True)
    return installed
