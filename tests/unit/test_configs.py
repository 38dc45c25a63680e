"""The bundled configs parse, inherit mmdet's, and carry the reproducibility keys."""
import glob
import os
import os.path as osp
import subprocess
import sys

import pytest
from mmengine.config import Config
from support.repro_utils import REPO, pythonpath

CONFIGS = sorted(glob.glob(osp.join(REPO, 'configs', '*.py')))
EXPECTED = {
    'retinanet_r18_fpn_3e_tinycoco.py': ('RetinaNet', 18, 3),
    'retinanet_r18_fpn_albu_3e_tinycoco.py': ('RetinaNet', 18, 3),
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
    shared = {'global_batch': 16} if 'coco_repro' in path else {}  # pinned for teams
    assert cfg.randomness == dict(seed=0, deterministic=True, **shared)
    assert cfg.default_scope == ('mmseg' if kind == 'EncoderDecoder' else 'mmdet')


#: Runs the wheel's ``.pth`` line twice, as Python would at start (here from the checkout
#: on PYTHONPATH), then loads a config inheriting ``mmrepro::`` without importing mmrepro.
PTH_PROBE = """
import sys
line = sys.argv[1]
exec(line)
exec(line)
from mmengine.config import Config
from mmengine.config.utils import MODULE2PACKAGE
cfg = Config.fromfile(sys.argv[2], import_custom_modules=False)
print('mmrepro' in sys.modules, MODULE2PACKAGE.get('mmrepro'), cfg.randomness,
      sum(getattr(f, '_mmrepro_config_scope', False) for f in sys.meta_path))
"""


@pytest.mark.parametrize('name', ['retinanet_r50_fpn_1x_coco_repro.py',
                                  'faster-rcnn_r50_fpn_1x_coco_repro.py'])
def test_configs_to_share_stand_alone(name, tmp_path):
    """A teammate who gets only the file (no checkout beside it) can load it."""
    alone = tmp_path / name
    alone.write_text(open(osp.join(REPO, 'configs', name)).read())
    assert "'./" not in alone.read_text()  # no relative base
    cfg = Config.fromfile(str(alone))
    assert cfg.randomness.global_batch == 16
    assert cfg.train_dataloader.batch_size == 2 and cfg.auto_scale_lr.base_batch_size == 16


def test_pth_line_makes_mmrepro_configs_resolve_without_importing_mmrepro(tmp_path):
    from mmrepro.configs import PTH_LINE
    assert PTH_LINE.startswith('import ') and '\n' not in PTH_LINE
    child = tmp_path / 'child.py'
    child.write_text("_base_ = 'mmrepro::_base_/repro_runtime.py'\n")
    env = {**os.environ, 'PYTHONPATH': pythonpath(REPO)}
    proc = subprocess.run([sys.executable, '-c', PTH_PROBE, PTH_LINE, str(child)], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == \
        "False mmrepro {'seed': 0, 'deterministic': True} 1"
