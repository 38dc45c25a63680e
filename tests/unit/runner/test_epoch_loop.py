"""runner.epoch_loop: a resumed epoch numbers its batches from where the checkpoint stopped.

Hooks then see the ``batch_idx`` of the run that wrote the checkpoint. A Runner for which
mmrepro does not act numbers every epoch from 0, as MMEngine does.
"""
from __future__ import annotations

import glob
import os.path as osp
from typing import List, Tuple

import pytest
from mmengine.hooks import Hook
from mmengine.registry import HOOKS, LOOPS
from mmengine.runner import Runner
from mmengine.runner.loops import EpochBasedTrainLoop
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.run.state import STATE_ATTR, find_state, run_state

#: Epoch checkpoints and one at iteration 10 (batch 2 of the second 8-batch epoch).
CHECKPOINTS = dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)


class BatchProbe(Hook):
    """Keeps ``(epoch, batch_idx, iter)`` of every training iteration."""

    def __init__(self) -> None:
        self.seen: List[Tuple[int, int, int]] = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.seen.append((runner.epoch, batch_idx, runner.iter))


class OwnEpochLoop(EpochBasedTrainLoop):
    """A team's epoch loop."""


@pytest.fixture(autouse=True)
def _probe_registered():
    HOOKS.register_module(module=BatchProbe, force=True)
    LOOPS.register_module(module=OwnEpochLoop, force=True)


def _train(work_dir, hooks, **extra):
    runner = Runner(**runner_kwargs(work_dir, [*hooks, dict(type='BatchProbe')], **extra))
    runner.train()
    return runner, next(h for h in runner.hooks if isinstance(h, BatchProbe)).seen


def test_a_resumed_epoch_numbers_its_batches_as_the_original_run(tmp_path):
    hooks = [dict(type='ReproducibilityHook', trace_interval=0), CHECKPOINTS]
    _, full = _train(tmp_path / 'full', hooks)
    assert full == [(e, b, e * 8 + b) for e in range(3) for b in range(8)]
    resumed, seen = _train(tmp_path / 'resumed', hooks, resume=True,
                           load_from=str(tmp_path / 'full' / 'iter_10.pth'))
    assert seen == full[10:]  # epoch 1 from batch_idx 2: (1, 2, 10), (1, 3, 11), ...
    assert seen[0] == (1, 2, 10) and seen[6] == (2, 0, 16)
    sampler = resumed.train_dataloader.batch_sampler
    assert sampler.positioned_at((1, 2)) and sampler.epoch_start(1) == 0  # applied once


def test_a_positioned_epoch_numbers_from_its_position_and_the_next_from_zero(tmp_path):
    runner = Runner(**runner_kwargs(tmp_path, [dict(type='ReproducibilityHook',
                                                    trace_interval=0),
                                               dict(type='BatchProbe')]))
    sampler = runner.train_loop.dataloader.batch_sampler
    sampler.load_state_dict(dict(epoch=0, global_batches=3, global_batch=4))
    runner.train()
    seen = next(h for h in runner.hooks if isinstance(h, BatchProbe)).seen
    assert [b for e, b, _ in seen if e == 0] == list(range(3, 8))  # 3 batches skipped
    assert [b for e, b, _ in seen if e > 0] == list(range(8)) * 2


@pytest.mark.parametrize('without_state', [False, True])
def test_a_runner_without_mmrepro_numbers_from_zero(tmp_path, without_state):
    runner = Runner(**runner_kwargs(tmp_path, [dict(type='BatchProbe')]))
    assert run_state(runner).settings is None  # not enabled: MMEngine's loop
    if without_state:  # no RunState at all
        del runner.__dict__[STATE_ATTR]
    runner.train()
    assert (find_state(runner) is None) is without_state
    seen = next(h for h in runner.hooks if isinstance(h, BatchProbe)).seen
    assert seen == [(e, b, e * 8 + b) for e in range(3) for b in range(8)]


def test_mmengines_epoch_loop_by_type_or_by_epoch_is_mmrepros(tmp_path):
    hooks = [dict(type='ReproducibilityHook', trace_interval=0)]
    kinds = {}
    for name, train_cfg in (('type', dict(type='EpochBasedTrainLoop', max_epochs=1)),
                            ('by_epoch', dict(by_epoch=True, max_epochs=1)),
                            ('iter', dict(by_epoch=False, max_iters=4)),
                            ('own', dict(type='OwnEpochLoop', max_epochs=1))):
        runner = Runner(**runner_kwargs(tmp_path / name, hooks, train_cfg=train_cfg))
        kinds[name] = type(runner.train_loop).__name__
    assert kinds == dict(type='ReproEpochBasedTrainLoop', by_epoch='ReproEpochBasedTrainLoop',
                         iter='IterBasedTrainLoop', own='OwnEpochLoop')
    log = open(glob.glob(osp.join(str(tmp_path / 'own'), '*', '*.log'))[0]).read()
    assert ('mmrepro: the train loop is OwnEpochLoop, not ReproEpochBasedTrainLoop: after a '
            'resume from the middle of an epoch, hooks number that epoch\'s batches from 0 '
            '(the data and the weights are those of the run resumed)') in log


def test_a_loop_config_with_type_and_by_epoch_is_refused_as_mmengine_does(tmp_path):
    train_cfg = dict(type='EpochBasedTrainLoop', by_epoch=True, max_epochs=1)
    runner = Runner(**runner_kwargs(tmp_path, [dict(type='ReproducibilityHook')],
                                    train_cfg=train_cfg))
    with pytest.raises(RuntimeError, match='Only one of `type` or `by_epoch`'):
        runner.train_loop  # noqa: B018  (the property builds the loop)
