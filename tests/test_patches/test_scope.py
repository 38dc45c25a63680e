"""mmrepro acts only for Runners whose config enables it; explicit arguments win."""
from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys
import types

import pytest
from mmengine.config import Config
from mmengine.dataset import DefaultSampler
from mmengine.runner import Runner
from repro_utils import CONFIGS, REPO, RUN_CWD, losses, pythonpath, state_digest, train_log

from mmrepro.run.enable import enabled_by_config
from mmrepro.run.settings import validate_randomness
from mmrepro.run.state import run_state

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


@pytest.mark.parametrize('cfg, expected', [
    (dict(custom_imports=dict(imports=['mmrepro'])), True),
    (dict(custom_imports=dict(imports=['mmdet', 'mmrepro.ops'])), True),
    (dict(custom_imports=dict(imports='mmrepro')), True),
    (dict(custom_hooks=[dict(type='ReproducibilityHook', trace_interval=2)]), True),
    (dict(custom_hooks=[dict(type='mmrepro.ReproducibilityHook')]), True),
    (dict(custom_imports=dict(imports=['mmrepro_other']),
          custom_hooks=[dict(type='EMAHook')]), False),
    (dict(), False),
])
def test_enabled_by_config(cfg, expected):
    assert enabled_by_config(Config(cfg)) is expected


def _runner_like(seed: int = 7):
    runner = types.SimpleNamespace(seed=seed, _train_dataloader=None, logger='current')
    # As set_randomness stores them: every key, defaults filled in.
    run_state(runner).settings = validate_randomness(dict(seed=seed))
    return runner


class _Numbers:
    """A map-style dataset of 8 numbers."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return index


def _loader_cfg():
    return dict(dataset=_Numbers(), batch_size=2, num_workers=0,
                sampler=dict(type=DefaultSampler, shuffle=True))


def test_explicit_seed_wins_on_an_enabled_runner():
    runner = _runner_like(seed=7)
    build = Runner.__dict__['build_dataloader'].__get__(runner)
    assert build(_loader_cfg(), seed=123).sampler.seed == 123
    assert build(_loader_cfg(), seed=runner.seed).sampler.seed == 7  # the Runner's own
    assert build(_loader_cfg()).sampler.seed == 7


def test_plain_runner_is_mmengine(tmp_path):
    """Not enabled: set_randomness and build_dataloader are MMEngine's."""
    runner = types.SimpleNamespace(seed=7, _train_dataloader=None)
    build = Runner.__dict__['build_dataloader'].__get__(runner)
    loader = build(_loader_cfg(), seed=123)
    assert loader.sampler.seed == 123
    assert type(loader.batch_sampler).__name__ == 'BatchSampler'  # not rebuilt


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
