"""runner.repro_runner: Runners built with keyword arguments, and configs with only the
import line."""
from __future__ import annotations

import glob
import os.path as osp

import torch
from mmengine.config import Config
from mmengine.runner import Runner
from support.repro_utils import state_digest
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.resume.checkpoint_io import safe_load


def _mid_epoch_hook() -> dict:
    return dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)


def test_keyword_runner_with_the_hook_is_enabled_and_resumes_exactly(tmp_path):
    hooks = [dict(type='ReproducibilityHook'), _mid_epoch_hook()]
    Runner(**runner_kwargs(tmp_path / 'full', hooks)).train()
    full = state_digest(str(tmp_path / 'full' / 'epoch_3.pth'))
    iter_10 = safe_load(str(tmp_path / 'full' / 'iter_10.pth'))
    # 8 batches of 4 per epoch: 2 global batches of 4 samples done in the second
    assert iter_10['mmrepro']['position'] == dict(epoch=1, global_batches=2, global_batch=4)
    assert len(iter_10['mmrepro']['rng']) == 1  # one rank's RNG states
    Runner(**runner_kwargs(tmp_path / 'resumed', hooks, resume=True,
                     load_from=str(tmp_path / 'full' / 'iter_10.pth'))).train()
    assert state_digest(str(tmp_path / 'resumed' / 'epoch_3.pth')) == full


def test_keyword_runner_without_the_hook_stays_plain_mmengine(tmp_path):
    runner = Runner(**runner_kwargs(tmp_path, []))
    from mmrepro.run.state import enabled, run_state
    assert type(runner) is Runner
    assert not enabled(runner) and run_state(runner).settings is None
    runner.train()
    assert 'mmrepro' not in torch.load(str(tmp_path / 'epoch_1.pth'), weights_only=False)


def test_import_line_alone_adds_the_hook_and_says_so(tmp_path):
    kwargs = runner_kwargs(tmp_path, None)
    cfg = Config(dict(custom_imports=dict(imports=['mmrepro'], allow_failed_imports=False),
                      randomness=kwargs['randomness'], custom_hooks=None))
    runner = Runner(model=kwargs['model'], cfg=cfg,
                    **{k: v for k, v in kwargs.items() if k != 'model'})
    assert runner.cfg is not cfg
    names = [type(h).__name__ for h in runner.hooks]
    assert names.count('ReproducibilityHook') == 1
    assert cfg.get('custom_hooks') is None  # the caller's config is left alone
    assert runner.cfg.custom_hooks == [dict(type='ReproducibilityHook')]  # the dump has it
    log = open(glob.glob(osp.join(str(tmp_path), '*', '*.log'))[0]).read()
    assert 'mmrepro: added ReproducibilityHook to custom_hooks' in log
