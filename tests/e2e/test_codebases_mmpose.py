"""mmpose through its own ``tools/train.py`` with mmrepro's two config lines: a narrow
ResNet-18 SimpleBaseline (top-down heatmap) with RandomBBoxTransform, RandomHalfBody and
TopdownAffine, at 64x64, over COCO keypoints generated in the demo's boxes
(:mod:`mmrepro.checks.matrix.codebases`).
"""
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import codebase_marks

MODEL = 'topdown_heatmap'
pytestmark = codebase_marks(MODEL)
