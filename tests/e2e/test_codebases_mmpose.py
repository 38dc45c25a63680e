"""mmpose through its own ``tools/train.py`` with mmrepro's two config lines: a narrow
ResNet-18 SimpleBaseline (top-down heatmap) with RandomBBoxTransform, RandomHalfBody and
TopdownAffine, at 64x64, over COCO keypoints generated in the demo's boxes
(:mod:`support.codebases`).

Default tier: a rerun and a mid-epoch resume, bitwise; full tier: ``num_workers``,
epoch resume, 2 ranks, ``mmrepro-check``, ``mmrepro-diff`` (:mod:`support.codebase_checks`).
"""
from __future__ import annotations

import pytest
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import skip_unless_installed

MODEL = 'topdown_heatmap'
skip_unless_installed(MODEL)
pytestmark = pytest.mark.slow
