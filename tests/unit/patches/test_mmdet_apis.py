"""mmrepro.patches.mmdet_apis: MMDetection's legacy names and registries reach mmrepro.

The test taken from the end-to-end module of tools/train.py keeps its ``slow`` marker.
"""
import os
import subprocess
import sys

import pytest
import torch
from support.repro_utils import REPO, pythonpath

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


def test_names_are_added_when_mmdet_apis_is_imported_later():
    """``import mmrepro`` leaves ``mmdet.apis`` (and its inferencer) unimported."""
    code = ('import sys, mmrepro\n'
            "print('mmdet.apis' in sys.modules)\n"
            'from mmdet.apis import DetInferencer, init_random_seed, set_random_seed\n'
            'print(init_random_seed is mmrepro.init_random_seed,'
            ' set_random_seed is mmrepro.set_random_seed)\n'
            "print([f.done for f in sys.meta_path if type(f).__name__ == '_AddNamesOnImport'])\n"
            "print('exec_module' in vars(sys.modules['mmdet.apis'].__spec__.loader))\n")
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env={**os.environ, 'PYTHONPATH': pythonpath(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # One finder, done; the module's loader is MMDetection's own again.
    assert proc.stdout.split() == ['False', 'True', 'True', '[True]', 'False']
