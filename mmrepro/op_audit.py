"""Find layers backed by mmcv ops that are nondeterministic on CUDA, and fix what we can.

:func:`torch.use_deterministic_algorithms` only knows about PyTorch's own kernels; mmcv's
compiled CUDA ops bypass it. :data:`NONDETERMINISTIC_MMCV_OPS` lists the mmcv 2.x
``nn.Module`` classes whose CUDA kernels accumulate with ``atomicAdd`` (so the order of
the floating-point additions, and hence the result bits, vary between runs). It was
derived by grepping ``mmcv/ops/csrc`` (mmcv 2.1.0) for ``atomicAdd`` and mapping each
kernel to the module classes that call it. Kernels checked and found free of atomics
(deterministic): CARAFE/CARAFEPack (warp-shuffle reductions in a fixed order), PSAMask,
MaskedConv2d, Correlation, CrissCrossAttention, SyncBatchNorm, FusedBiasLeakyReLU,
upfirdn2d, TINShift, the focal losses, NMS. Ops that are only functions (not modules)
and so cannot be found by scanning modules: ``rotated_feature_align``,
``chamfer_distance``, ``gather_points``, ``three_interpolate``, ``assign_score_withk``
(all ``atomicAdd`` in backward); ``Voxelization(deterministic=False)`` is
nondeterministic by its own flag.
"""
from __future__ import annotations

import warnings
from typing import Dict, List, Optional

from torch import nn

from .ops.replace import is_mmcv_roi_align, replace_roi_align

__all__ = ['NONDETERMINISTIC_MMCV_OPS', 'audit_model', 'format_audit']

_BW = 'CUDA backward accumulates with atomicAdd'
#: mmcv.ops module class name -> why it is nondeterministic on CUDA (mmcv 2.1.0 sources).
NONDETERMINISTIC_MMCV_OPS: Dict[str, str] = {
    'RoIAlign': f'{_BW} into the feature map (roi_align_cuda_kernel.cuh)',
    'RoIPool': f'{_BW} at the argmax (roi_pool_cuda_kernel.cuh)',
    'DeformConv2d': f'{_BW} in deformable_col2im (deform_conv_cuda_kernel.cuh)',
    'DeformConv2dPack': f'{_BW} in deformable_col2im (deform_conv_cuda_kernel.cuh)',
    'ModulatedDeformConv2d': f'{_BW} in modulated_deformable_col2im '
                             '(modulated_deform_conv_cuda_kernel.cuh)',
    'ModulatedDeformConv2dPack': f'{_BW} in modulated_deformable_col2im '
                                 '(modulated_deform_conv_cuda_kernel.cuh)',
    'SAConv2d': f'uses deform_conv2d: {_BW} (deform_conv_cuda_kernel.cuh)',
    'DeformRoIPool': f'{_BW} into input and offset (deform_roi_pool_cuda_kernel.cuh)',
    'DeformRoIPoolPack': f'{_BW} into input and offset (deform_roi_pool_cuda_kernel.cuh)',
    'ModulatedDeformRoIPoolPack': f'{_BW} into input and offset '
                                  '(deform_roi_pool_cuda_kernel.cuh)',
    'MultiScaleDeformableAttention': f'{_BW} into value, sampling locations and attention '
                                     'weights (ms_deform_attn_cuda_kernel.cuh)',
    'CARAFENaive': f'{_BW} into features and masks (carafe_naive_cuda_kernel.cuh)',
    'PrRoIPool': f'{_BW} into input and rois (prroi_pool_cuda_kernel.cuh)',
    'RoIAlignRotated': f'{_BW} (roi_align_rotated_cuda_kernel.cuh)',
    'RiRoIAlignRotated': f'{_BW} (riroi_align_rotated_cuda_kernel.cuh)',
    'BezierAlign': f'{_BW} (bezier_align_cuda_kernel.cuh)',
    'BorderAlign': f'{_BW} (border_align_cuda_kernel.cuh)',
    'QueryAndGroup': f'grouping_operation: {_BW} (group_points_cuda_kernel.cuh)',
    'RoIAwarePool3d': f'{_BW} (roiaware_pool3d_cuda_kernel.cuh)',
    'DynamicScatter': 'CUDA forward and backward reduce with atomicAdd '
                      '(scatter_points_cuda_kernel.cuh)',
    'SparseConvolution': 'indice pairs are generated with atomicAdd, so the order of the '
                         'accumulation varies (spconv/indice.cuh)',
    'SparseMaxPool': 'indice pairs are generated with atomicAdd, so the order of the '
                     'accumulation varies (spconv/indice.cuh)',
    'SimpleRoIAlign': 'point_sample uses F.grid_sample, whose CUDA backward is '
                      'nondeterministic (torch raises under deterministic mode)',
}

ACTION_REPLACED = 'replaced'
ACTION_NONDETERMINISTIC = 'nondeterministic-on-cuda'


def _mmcv_op(module: nn.Module) -> Optional[str]:
    """The first class in ``module``'s MRO that is a listed ``mmcv.ops`` class, if any."""
    for cls in type(module).__mro__:
        if cls.__name__ in NONDETERMINISTIC_MMCV_OPS and cls.__module__.startswith('mmcv.'):
            return cls.__name__
    return None


def audit_model(model: nn.Module, deterministic: bool, strict: bool = False,
                replace: bool = True) -> List[Dict[str, str]]:
    """Report (and optionally replace) layers backed by nondeterministic mmcv ops.

    Args:
        model: The model to scan (modified in place when layers are replaced).
        deterministic: Whether the run asks for deterministic algorithms. Only then are
            layers replaced and is ``strict`` enforced.
        strict: With ``deterministic``, raise instead of warning when a listed layer
            remains.
        replace: With ``deterministic``, swap every ``mmcv.ops.RoIAlign`` for an
            equivalent :class:`~mmrepro.ops.DeterministicRoIAlign`.

    Returns:
        One dict per listed layer, in ``named_modules`` order, with keys ``name``
        (qualified module name), ``type`` (class name), ``op`` (the listed mmcv class it
        is or derives from), ``action`` (``'replaced'`` or ``'nondeterministic-on-cuda'``)
        and ``reason``.

    Raises:
        ValueError: With ``deterministic`` and ``strict``, if any listed layer remains,
            naming the module paths, their ops and how to proceed.
    """
    entries: List[Dict[str, str]] = []
    for name, module in model.named_modules():
        op = _mmcv_op(module)
        if op is not None:
            entries.append(dict(name=name, type=type(module).__name__, op=op,
                                action=ACTION_NONDETERMINISTIC,
                                reason=NONDETERMINISTIC_MMCV_OPS[op]))
    if deterministic and replace and any(is_mmcv_roi_align(m) for m in model.modules()):
        replaced = set(replace_roi_align(model))
        for entry in entries:
            if entry['name'] in replaced:
                entry['action'] = ACTION_REPLACED
                entry['reason'] += '; replaced by mmrepro.ops.DeterministicRoIAlign'
    remaining = [e for e in entries if e['action'] == ACTION_NONDETERMINISTIC]
    if deterministic and remaining:
        listing = '; '.join(f"{e['name']} ({e['type']}: {e['op']}, {e['reason']})"
                            for e in remaining)
        fix = ('replace these layers with deterministic ones (mmcv.ops.RoIAlign is replaced '
               'automatically with replace=True), or accept run-to-run differences with '
               'strict=False (a warning is issued)')
        message = (f'{len(remaining)} module(s) use mmcv ops that are nondeterministic on '
                   f'CUDA: {listing}. To fix: {fix}.')
        if strict:
            raise ValueError(f'deterministic=True and strict=True, but {message}')
        warnings.warn(f'deterministic=True, but {message}', stacklevel=2)
    return entries


def format_audit(entries: List[Dict[str, str]]) -> str:
    """Render :func:`audit_model`'s entries as a plain-text table for the log.

    Args:
        entries: The list returned by :func:`audit_model`.

    Returns:
        A multi-line table (``name | type | op | action``), or a one-line note when
        ``entries`` is empty.
    """
    if not entries:
        return 'mmcv op audit: no modules backed by mmcv ops that are nondeterministic on CUDA'
    columns = ('name', 'type', 'op', 'action')
    rows = [[str(e[c]) for c in columns] for e in entries]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]

    def line(cells: List[str]) -> str:
        return ' | '.join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()

    out = [f'mmcv op audit: {len(entries)} module(s) backed by ops nondeterministic on CUDA',
           line(list(columns)), '-+-'.join('-' * w for w in widths)]
    out += [line(r) for r in rows]
    return '\n'.join(out)
