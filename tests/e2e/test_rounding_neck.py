"""Rounding or real, a real cause no record shows: a neck scaled by 1 + 1e-3 in a module
that a ``custom_imports`` plugin imports, outside the work tree (real RetinaNet runs on
the tiny COCO data). The other causes are in test_rounding.py.
"""
import os.path as osp

import pytest
from support.repro_utils import pythonpath, run_train, write_config
from support.rounding import BEYOND, check, diff

from mmrepro.checks.envelope import THRESHOLD

pytestmark = pytest.mark.slow

#: A neck whose output is scaled by the factor a module beside it holds: the plugin
#: ``custom_imports`` names is recorded by digest, the module it imports is not.
PLUGIN = '''from mmdet.models.necks import FPN
from mmdet.registry import MODELS

from neck_scale import SCALE


@MODELS.register_module()
class ScaledFPN(FPN):
    def forward(self, inputs):
        return tuple(out * SCALE for out in super().forward(inputs))
'''


@pytest.fixture(scope='module')
def scaled(tmp_path_factory, data_root):
    """A baseline trained with the neck's factor 1.0, outside the work tree."""
    root = tmp_path_factory.mktemp('scaled')
    ext = root / 'ext'
    ext.mkdir()
    (ext / 'scaled_neck.py').write_text(PLUGIN)
    (ext / 'neck_scale.py').write_text('SCALE = 1.0\n')
    extra = ("custom_imports = dict(imports=['mmrepro', 'scaled_neck'], "
             "allow_failed_imports=False)\nmodel = dict(neck=dict(type='ScaledFPN'))\n")
    config = write_config(str(root / 'cfg' / 'retinanet.py'), 'retinanet', data_root, extra,
                          num_workers=0, max_epochs=1)
    baseline = str(root / 'baseline')
    run_train(config, baseline, env=dict(PYTHONPATH=pythonpath(str(ext))))
    return dict(ext=ext, config=config, baseline=baseline)


@pytest.mark.full
def test_a_neck_scaled_where_no_record_looks_differs_beyond_rounding(scaled, tmp_path, capsys,
                                                                     monkeypatch):
    """Full tier, a second proof of a difference beyond rounding is never equivalent, which
    CI's default run proves in
    ``test_rounding.py::test_an_lr_higher_by_a_thousandth_is_never_equivalent``."""
    (scaled['ext'] / 'neck_scale.py').write_text('SCALE = 1.0 + 1e-3\n')  # the teammate's
    monkeypatch.setenv('PYTHONPATH', pythonpath(str(scaled['ext'])))  # the runs'
    monkeypatch.syspath_prepend(str(scaled['ext']))  # the config, read here
    work = str(tmp_path / 'check')
    code, out, _ = check(capsys, scaled['config'], '--against', scaled['baseline'],
                         '--iters', '2', '--work-dir', work)
    assert code == 1, out
    assert 'before training: nothing recorded differs from the baseline' in out
    found = BEYOND.search(out)
    assert found, out
    assert float(found.group(2)) > 10 * THRESHOLD
    assert found.group(1) == '1'  # before any step: the computation itself differs
    assert found.group(3) == ('first module neck (ScaledFPN): its forward output at the first '
                              'iteration'), found.group(3)
    assert 'not bitwise, but equivalent' not in out
    # the finished runs: the baseline and the check's own run
    code, out, _ = diff(capsys, scaled['baseline'], osp.join(work, 'against'))
    assert code == 1, out
    found = BEYOND.search(out)
    assert found, out
    assert found.group(3).startswith('first module neck (ScaledFPN)'), found.group(3)
    assert "rounding envelope: A's config trained here through step 2, twice" in out
    assert 'not bitwise, but equivalent' not in out
