"""The OpenMMLab codebases beside MMDetection in the test environments, and the script
each trains with: its own ``tools/train.py`` (the one its package ships in ``.mim``).

``tools/setup_env.sh`` installs mmpretrain, mmpose and mmrotate (``mmrotate-dev``) on the
current stack, and MMYOLO on the yolo stack (the floor's packages under mmcv 2.0.1:
docs/install.md) (:func:`stack_codebases`). The models and their configs are the support
matrix's (:mod:`mmrepro.checks.matrix.codebases`).
"""
from __future__ import annotations

import importlib.util
import os
import os.path as osp
import re
from typing import Tuple

from mmrepro.checks.matrix.codebases import CODEBASES

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def stack_codebases() -> Tuple[str, ...]:
    """The codebases (package names) the pins of this Python's stack name: the
    ``requirements/stack-<name>.txt`` whose ``torch==`` and ``mmcv==`` are the running
    ones (the yolo stack runs the floor's torch under its own mmcv)."""
    import mmcv
    import torch
    running = (torch.__version__.split('+')[0], mmcv.__version__)
    distributions = {'mmpretrain': 'mmpretrain', 'mmpose': 'mmpose',
                     'mmrotate': 'mmrotate-dev', 'mmyolo': 'mmyolo'}
    for name in sorted(os.listdir(osp.join(REPO, 'requirements'))):
        if name.startswith('stack-'):
            with open(osp.join(REPO, 'requirements', name)) as f:
                pins = dict(re.findall(r'^([\w.-]+)==(\S+)', f.read(), re.M))
            if (pins.get('torch'), pins.get('mmcv')) == running:
                return tuple(c for c in CODEBASES if distributions[c] in pins)
    return ()


def train_script(package: str) -> str:
    """The codebase's own ``tools/train.py``, as its package installs it (``.mim``)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f'{package} is not installed (tools/setup_env.sh installs '
                                  f'it on the current stack)')
    return osp.join(osp.dirname(spec.origin), '.mim', 'tools', 'train.py')
