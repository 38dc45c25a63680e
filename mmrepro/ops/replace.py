"""In-place replacement of ``mmcv.ops.RoIAlign`` layers by :class:`DeterministicRoIAlign`."""
from __future__ import annotations

from typing import Dict, List

from torch import nn

from .roi_align.layer import DeterministicRoIAlign

__all__ = ['is_mmcv_roi_align', 'replace_roi_align']


def is_mmcv_roi_align(module: nn.Module) -> bool:
    """Whether ``module`` is exactly an ``mmcv.ops.RoIAlign`` (not a subclass).

    Matching by qualified class name keeps this usable without importing mmcv's compiled
    extension. Subclasses are not matched because they may change ``forward``.
    """
    cls = type(module)
    return cls.__name__ == 'RoIAlign' and cls.__module__.startswith('mmcv.ops')


def replace_roi_align(model: nn.Module) -> List[str]:
    """Swap every ``mmcv.ops.RoIAlign`` submodule for an equivalent deterministic one.

    The new layers get the same ``output_size``, ``spatial_scale``, ``sampling_ratio``,
    ``pool_mode``, ``aligned`` and ``use_torchvision`` and the same ``training`` flag. A
    layer registered under several names is replaced by one shared instance.

    Args:
        model: The model to modify in place.

    Returns:
        The qualified names of the replaced submodules, in ``named_modules`` order.

    Raises:
        ValueError: If ``model`` itself is an ``mmcv.ops.RoIAlign`` (it cannot be
            replaced in place; use ``DeterministicRoIAlign.from_mmcv(model)``).
    """
    if is_mmcv_roi_align(model):
        raise ValueError('replace_roi_align: the model itself is an mmcv.ops.RoIAlign and '
                         'cannot be replaced in place; use '
                         'DeterministicRoIAlign.from_mmcv(layer) instead.')
    targets = [(name, module) for name, module in model.named_modules(remove_duplicate=False)
               if is_mmcv_roi_align(module)]
    new_layers: Dict[int, DeterministicRoIAlign] = {}
    replaced = []
    for name, module in targets:
        if id(module) not in new_layers:
            new_layers[id(module)] = DeterministicRoIAlign.from_mmcv(module).train(
                module.training)
        parent_name, _, child_name = name.rpartition('.')
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child_name, new_layers[id(module)])
        replaced.append(name)
    return replaced
