"""mmrepro.patches.mmdet_apis: MMDetection's legacy names and registries reach mmrepro.

The test taken from the end-to-end module of tools/train.py keeps its ``slow`` marker.
"""
import pytest
import torch

import mmrepro


@pytest.mark.slow
def test_legacy_mmdet_names_and_registries():
    import mmdet.apis
    from mmdet.registry import HOOKS as MMDET_HOOKS
    from mmengine.registry import FUNCTIONS, HOOKS
    assert mmdet.apis.init_random_seed is mmrepro.init_random_seed
    assert mmdet.apis.set_random_seed(3) == 3 and torch.initial_seed() == 3
    assert HOOKS.get('ReproducibilityHook') is mmrepro.ReproducibilityHook
    assert isinstance(MMDET_HOOKS.build(dict(type='ReproducibilityHook')),
                      mmrepro.ReproducibilityHook)
    assert FUNCTIONS.get('mmrepro_worker_init_fn') is mmrepro.worker_init_fn
