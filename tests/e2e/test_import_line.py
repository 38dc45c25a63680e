"""The import line alone is enough, under MMDetection's own tools/train.py: a config
without ``runner_type`` gets ReproRunner through ``Runner.from_cfg``."""
import os
import os.path as osp
import subprocess
import sys

import pytest
from mmengine.config import Config
from support.repro_utils import REPO, RUN_CWD, pythonpath, run_log, state_digest, write_config

pytestmark = [pytest.mark.slow, pytest.mark.floor]

#: The test config's hooks without ReproducibilityHook: only the demo config's
#: custom_imports (through repro_runtime.py) enables mmrepro.
IMPORT_LINE_ONLY = """
custom_hooks = [dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]
"""


def _mmdet_train(config, work_dir, *args):
    import mmdet
    script = osp.join(osp.dirname(mmdet.__file__), '.mim', 'tools', 'train.py')
    env = {**os.environ, 'PYTHONPATH': pythonpath(REPO)}  # mmrepro from this checkout
    proc = subprocess.run([sys.executable, script, config, '--work-dir', work_dir, *args],
                          cwd=RUN_CWD, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-5000:]
    return proc.stdout + proc.stderr


def test_mmdet_train_py_resumes_exactly_from_iteration_10(tmp_path, data_root):
    written = write_config(str(tmp_path / 'cfg' / 'import_line.py'), 'retinanet', data_root,
                           extra=IMPORT_LINE_ONLY, max_epochs=2)
    cfg = Config.fromfile(written)
    assert cfg.pop('runner_type') == 'ReproRunner'  # the demo's base names it: drop it
    config = str(tmp_path / 'cfg' / 'two_lines.py')
    cfg.dump(config)
    full, resumed = str(tmp_path / 'full'), str(tmp_path / 'resumed')
    _mmdet_train(config, full)
    assert 'mmrepro: the Runner is ReproRunner' in run_log(full)
    assert 'mmrepro: added ReproducibilityHook to custom_hooks' in run_log(full)
    out = _mmdet_train(config, resumed, '--resume', osp.join(full, 'iter_10.pth'))
    assert 'mmrepro: resumed RNG states and data position' in out
    assert state_digest(osp.join(resumed, 'epoch_2.pth')) == \
        state_digest(osp.join(full, 'epoch_2.pth'))
