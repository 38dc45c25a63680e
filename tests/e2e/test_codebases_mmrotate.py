"""mmrotate through its own ``tools/train.py`` with mmrepro's two config lines: a narrow
Rotated RetinaNet R18-FPN (le90) on DOTA-format quadrilaterals generated from the demo's
boxes, with random flips (:mod:`mmrepro.checks.matrix.codebases`).
"""
import pytest
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import CodebaseRuns, codebase_marks

MODEL = 'rotated_retinanet'
pytestmark = codebase_marks(MODEL)


@pytest.mark.full
def test_oriented_rcnn_rerun_and_mid_epoch_resume_are_byte_identical(tmp_path_factory,
                                                                     data_root):
    """The two-stage rotated detector (RoIAlignRotated, RPN sampling): a second rotated
    family, full tier (Rotated RetinaNet proves the codebase in CI)."""
    CodebaseRuns('oriented_rcnn', str(tmp_path_factory.mktemp('orcnn')),
                 data_root).assert_rerun_and_mid_epoch_resume()
