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
and so cannot be found by scanning modules: ``chamfer_distance``, ``gather_points``,
``three_interpolate``, ``assign_score_withk`` (all ``atomicAdd`` in backward), and
``rotated_feature_align``, found through its caller (:data:`NONDETERMINISTIC_CALLERS`);
``Voxelization(deterministic=False)`` is nondeterministic by its own flag.

:data:`NONDETERMINISTIC_TORCH_USERS` lists the classes (PyTorch's and MMDetection's)
that call PyTorch ops whose CUDA backward torch itself cannot make deterministic;
:data:`NONDETERMINISTIC_CALLERS` the classes (mmrotate's) that call such an mmcv
function.
:data:`REPLACED_OPS` says how ``replace=True`` makes each replaceable op deterministic;
every other listed op gets a fix in the message (:data:`FIXES`).
"""
from __future__ import annotations

import warnings
from typing import Dict, List, Optional, Tuple

from torch import nn

from .replace import is_mmcv_roi_align, replace_roi_align

__all__ = ['NONDETERMINISTIC_CALLERS', 'NONDETERMINISTIC_MMCV_OPS',
           'NONDETERMINISTIC_TORCH_USERS', 'REPLACED_OPS', 'audit_model', 'format_audit']

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

_GRID = ('point_sample calls F.grid_sample, whose CUDA backward has no deterministic '
         'kernel (torch raises in deterministic mode)')
#: Classes outside mmcv.ops whose forward calls a PyTorch op with no deterministic CUDA
#: backward: class name -> (module prefix, why).
NONDETERMINISTIC_TORCH_USERS: Dict[str, tuple] = {
    'AdaptiveAvgPool2d': (('torch.nn.', 'mmdet.'), 'adaptive_avg_pool2d backward has no '
                          'deterministic CUDA kernel (torch raises in deterministic mode)'),
    'Mask2FormerHead': (('mmdet.',), _GRID),
    'Mask2FormerTrackHead': (('mmdet.',), _GRID),
    'MaskPointHead': (('mmdet.',), _GRID),
    'PointRendRoIHead': (('mmdet.',), _GRID),
}
#: Classes outside mmcv.ops whose forward calls an mmcv function that is
#: nondeterministic on CUDA: class name -> (module prefix, why).
NONDETERMINISTIC_CALLERS: Dict[str, tuple] = {
    'FRM': (('mmrotate.',), f'calls rotated_feature_align: {_BW} '
            '(rotated_feature_align_cuda_kernel.cuh)'),
}
_ROUTED = 'routed to mmrepro.ops.'
#: Ops that ``replace=True`` makes deterministic -> how.
REPLACED_OPS: Dict[str, str] = {
    'RoIAlign': 'replaced by mmrepro.ops.DeterministicRoIAlign',
    'AdaptiveAvgPool2d': 'replaced by mmrepro.ops.DeterministicAdaptiveAvgPool2d',
    **{op: f'{_ROUTED}deformable.deform_conv2d' for op in (
        'DeformConv2d', 'DeformConv2dPack', 'ModulatedDeformConv2d',
        'ModulatedDeformConv2dPack', 'SAConv2d')},
    'MultiScaleDeformableAttention': f'{_ROUTED}deformable.ms_deform_attn',
    **{op: f'{_ROUTED}deformable.grid_sample (point_sample)' for op in (
        'SimpleRoIAlign', 'Mask2FormerHead', 'Mask2FormerTrackHead', 'MaskPointHead',
        'PointRendRoIHead')},
    'RoIAlignRotated': f'{_ROUTED}rotated.roi_align_rotated',
    'RiRoIAlignRotated': f'{_ROUTED}rotated.riroi_align_rotated',
    'FRM': f'{_ROUTED}rotated.rotated_feature_align',
}
#: How to get rid of a listed op that mmrepro does not replace.
FIXES: Dict[str, str] = {
    'RoIPool': "use RoIAlign (roi_layer=dict(type='RoIAlign', ...)), which mmrepro replaces",
    'DeformRoIPool': 'use RoIAlign, which mmrepro replaces',
    'DeformRoIPoolPack': 'use RoIAlign, which mmrepro replaces',
    'ModulatedDeformRoIPoolPack': 'use RoIAlign, which mmrepro replaces',
    'CARAFENaive': "use CARAFEPack (type='carafe'), whose kernels have no atomics",
}
_NO_FIX = ('mmrepro has no deterministic replacement: train on CPU for exact results, or '
           'accept run-to-run differences on CUDA with strict=False (a warning is issued)')

ACTION_REPLACED = 'replaced'
ACTION_NONDETERMINISTIC = 'nondeterministic-on-cuda'


def _listed_op(module: nn.Module) -> Optional[Tuple[str, str]]:
    """``(op, reason)`` for the first listed class in ``module``'s MRO, if any."""
    for cls in type(module).__mro__:
        name, origin = cls.__name__, cls.__module__
        if name in NONDETERMINISTIC_MMCV_OPS and origin.startswith('mmcv.'):
            return name, NONDETERMINISTIC_MMCV_OPS[name]
        prefixes, reason = (NONDETERMINISTIC_TORCH_USERS.get(name)
                            or NONDETERMINISTIC_CALLERS.get(name, ((), '')))
        if origin.startswith(tuple(prefixes)):
            return name, reason
    return None


def _fix(entry: Dict[str, str], replace: bool) -> str:
    op = entry['op']
    if op in REPLACED_OPS and not replace:
        return f'keep replace=True (the default), so that it is {REPLACED_OPS[op]}'
    if REPLACED_OPS.get(op, '').startswith(_ROUTED) and 'not routed' in entry['reason']:
        return ('use a torch whose Triton is >= 3.0 (torch >= 2.4), so that it is '
                f'{REPLACED_OPS[op]}')
    if op in REPLACED_OPS:
        return (f"{entry['type']} subclasses {op} and may change its forward, so it is "
                f'not replaced; use {op} itself')
    return FIXES.get(op, _NO_FIX)


def _replace(model: nn.Module, entries: List[Dict[str, str]]) -> None:
    """Make every replaceable listed layer deterministic, and mark its entry."""
    from .adaptive_pool import swap_adaptive_pools
    from .csr_kernels import triton_status
    from .routing import activate
    triton_ok, why_not = triton_status()
    replaced = set()
    if any(is_mmcv_roi_align(m) for m in model.modules()):
        replaced.update(replace_roi_align(model))
    replaced.update(swap_adaptive_pools(model))
    routed = [e for e in entries if e['op'] in REPLACED_OPS and
              REPLACED_OPS[e['op']].startswith(_ROUTED)]
    if routed and triton_ok:
        activate(model)
        replaced.update(e['name'] for e in routed)
    for entry in entries:
        if entry['name'] in replaced:
            entry['action'] = ACTION_REPLACED
            entry['reason'] += f"; {REPLACED_OPS[entry['op']]}"
            if entry['op'] == 'RoIAlign' and not triton_ok:
                entry['reason'] += (f' (its pure-PyTorch CUDA backward, slower: {why_not})')
        elif entry in routed:
            entry['reason'] += f'; not routed to mmrepro\'s Triton kernels: {why_not}'


def audit_model(model: nn.Module, deterministic: bool, strict: bool = False,
                replace: bool = True) -> List[Dict[str, str]]:
    """Report (and optionally replace) layers backed by nondeterministic mmcv ops.

    Args:
        model: The model to scan (modified in place when layers are replaced).
        deterministic: Whether the run asks for deterministic algorithms. Only then are
            layers replaced and is ``strict`` enforced.
        strict: With ``deterministic``, raise instead of warning when a listed layer
            remains.
        replace: With ``deterministic``, make every op of :data:`REPLACED_OPS`
            deterministic: ``mmcv.ops.RoIAlign`` and ``AdaptiveAvgPool2d`` layers are
            replaced in place (``state_dict`` keys unchanged), and the deformable ops
            and ``point_sample``, and the rotated ops, are routed to
            :mod:`mmrepro.ops.deformable` and :mod:`mmrepro.ops.rotated` during
            ``model``'s forward (:func:`mmrepro.ops.routing.activate`).

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
        listed = _listed_op(module)
        if listed is not None:
            entries.append(dict(name=name, type=type(module).__name__, op=listed[0],
                                action=ACTION_NONDETERMINISTIC, reason=listed[1]))
    if deterministic and replace:
        _replace(model, entries)
    remaining = [e for e in entries if e['action'] == ACTION_NONDETERMINISTIC]
    if deterministic and remaining:
        listing = '; '.join(f"{e['name']} ({e['type']}: {e['op']}, {e['reason']}; to fix: "
                            f"{_fix(e, replace)})" for e in remaining)
        message = (f'{len(remaining)} module(s) use ops that are nondeterministic on '
                   f'CUDA: {listing}.')
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
