"""A Runner that does not enable mmrepro trains as plain MMEngine, mmrepro.ops imported or not."""
from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import pytest
from support.repro_utils import CONFIGS, REPO, RUN_CWD, losses, pythonpath, state_digest, train_log

#: A Runner script: ``probe.py MODE CONFIG WORK_DIR``; MODE ``ops`` imports mmrepro.ops
#: first, ``plain`` never imports mmrepro (and checks that nothing else did).
PROBE = """
import sys
if sys.argv[1] == 'ops':
    import mmrepro.ops  # noqa: F401
from mmengine.config import Config
from mmengine.runner import Runner
cfg = Config.fromfile(sys.argv[2])
cfg.work_dir = sys.argv[3]
Runner.from_cfg(cfg).train()
print('MMREPRO_IMPORTED', 'mmrepro' in sys.modules)
"""

#: The demo RetinaNet without the three lines: no custom_imports, no hook. With gradient
#: accumulation and a warmup in iterations, which mmrepro's step clock would change.
PLAIN = """_base_ = {base!r}
custom_imports = dict(_delete_=True, imports=[], allow_failed_imports=False)
custom_hooks = []
randomness = dict(_delete_=True, seed=0)
optim_wrapper = dict(accumulative_counts=2)
param_scheduler = [dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3)]
data_root = {root!r}
train_dataloader = dict(num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root))
train_cfg = dict(max_epochs=1, val_interval=10)
val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
"""


def _train(tmp_path, data_root, mode):
    config = tmp_path / 'plain.py'
    config.write_text(PLAIN.format(base=CONFIGS['retinanet'], root=data_root.rstrip('/') + '/'))
    script = tmp_path / 'probe.py'
    script.write_text(PROBE)
    work_dir = str(tmp_path / mode)
    env = {**os.environ, 'PYTHONPATH': pythonpath(REPO)}
    proc = subprocess.run([sys.executable, str(script), mode, str(config), work_dir],
                          cwd=RUN_CWD, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert f"MMREPRO_IMPORTED {mode == 'ops'}" in proc.stdout
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        return state_digest(f.read().strip()), losses(train_log(work_dir))


@pytest.mark.slow
def test_runner_without_mmrepro_trains_as_plain_mmengine(tmp_path, data_root):
    """Importing mmrepro.ops leaves a Runner that did not ask for it byte-identical."""
    plain = _train(tmp_path, data_root, 'plain')
    with_ops = _train(tmp_path, data_root, 'ops')
    assert plain[1] and with_ops[1] == plain[1]  # every logged loss, every iteration
    assert with_ops[0] == plain[0]
