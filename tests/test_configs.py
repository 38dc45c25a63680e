"""The bundled configs parse, inherit mmdet's, and carry the reproducibility keys."""
import glob
import os.path as osp

import pytest
from mmengine.config import Config
from repro_utils import REPO

CONFIGS = sorted(glob.glob(osp.join(REPO, 'configs', '*.py')))
EXPECTED = {
    'retinanet_r18_fpn_3e_tinycoco.py': ('RetinaNet', 18, 3),
    'faster-rcnn_r18_fpn_3e_tinycoco.py': ('FasterRCNN', 18, 3),
    'mask-rcnn_r18_fpn_3e_tinycoco.py': ('MaskRCNN', 18, 3),
    'fcn_r18-d8_12i_tinyseg.py': ('EncoderDecoder', 18, 4),
    'retinanet_r50_fpn_1x_coco_repro.py': ('RetinaNet', 50, 80),
    'faster-rcnn_r50_fpn_1x_coco_repro.py': ('FasterRCNN', 50, 80),
}


def test_every_config_is_listed():
    assert sorted(map(osp.basename, CONFIGS)) == sorted(EXPECTED)


@pytest.mark.parametrize('path', CONFIGS, ids=osp.basename)
def test_config_is_reproducible_and_inherits_mmdet(path):
    if 'tinyseg' in path:
        pytest.importorskip('mmseg', reason='MMSegmentation is tested on the current stack '
                            'only (tools/setup_env.sh current installs it)')
    cfg = Config.fromfile(path)
    kind, depth, classes = EXPECTED[osp.basename(path)]
    assert cfg.model.type == kind and cfg.model.backbone.depth == depth
    head = (cfg.model.get('bbox_head') or cfg.model.get('decode_head')
            or cfg.model.roi_head.bbox_head)
    assert head.num_classes == classes
    assert cfg.custom_imports == dict(imports=['mmrepro'], allow_failed_imports=False)
    assert cfg.randomness == dict(seed=0, deterministic=True)
    assert cfg.default_scope == ('mmseg' if kind == 'EncoderDecoder' else 'mmdet')
