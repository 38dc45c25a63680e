"""mmrotate through its own ``tools/train.py`` with mmrepro's two config lines: a narrow
Rotated RetinaNet R18-FPN (le90) on DOTA-format quadrilaterals generated from the demo's
boxes, with random flips (:mod:`mmrepro.checks.matrix.codebases`).
"""
import os.path as osp

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


@pytest.mark.parametrize('config,expected', [
    ('s2anet/s2anet-le135_r50_fpn_1x_dota.py',
     [('bbox_head_refine.0.feat_refine_module.deform_conv', 'DeformConv2d')]),
    ('r3det/r3det-refine-oc_r50_fpn_1x_dota.py',
     [('bbox_head_refine.0.feat_refine_module', 'FRM'),
      ('bbox_head_refine.1.feat_refine_module', 'FRM')]),
])
def test_the_audit_routes_the_atomic_ops_of_s2anet_and_r3det(config, expected):
    """mmrotate's own zoo configs (ResNet-50, built, not trained): S2ANet's alignment
    convolution (mmcv's DeformConv2d) and R3Det's feature refinement
    (``rotated_feature_align``), whose CUDA backward accumulates with atomics, are the
    ops the audit lists, each routed to mmrepro's deterministic kernels."""
    import mmrotate
    from mmengine.config import Config

    from mmrepro.checks.check.nondeterminism import mmcv_op_audit
    cfg = Config.fromfile(osp.join(osp.dirname(mmrotate.__file__), '.mim', 'configs', config))
    cfg.model.backbone.init_cfg = None
    entries = mmcv_op_audit(cfg)
    assert [(e['name'], e['op'], e['action']) for e in entries] == [
        (name, op, 'replaced') for name, op in expected]
