"""runner.schedules: under accumulation, parameter schedules step once per optimizer step.

The toy Runner (32 samples, batch 4: 8 micro-batches an epoch) with
``accumulative_counts=2`` takes 4 optimizer steps an epoch. Its learning rate is read
before every iteration.
"""
from __future__ import annotations

from typing import List

import pytest
from mmengine.hooks import Hook
from mmengine.runner import Runner
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.run.state import run_state

LR = 0.05  # the toy Runner's
#: A warmup from a quarter of the rate, over 4 scheduler steps: factors 0.25 .. 1.
WARMUP = [dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=4)]
RAMP = [0.25, 0.5, 0.75, 1.0]
#: A step at epoch 1, converted to iterations.
EPOCH_STEP = [dict(type='MultiStepLR', by_epoch=True, milestones=[1], gamma=0.1,
                   convert_to_iter_based=True)]


class LrProbe(Hook):
    """Keeps the learning rate each iteration trains at."""

    priority = 'HIGHEST'

    def __init__(self) -> None:
        self.lrs: List[float] = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.lrs.append(runner.optim_wrapper.get_lr()['lr'][0])


def _train(tmp_path, name: str, schedule: list, micro: int, enabled: bool = True):
    hooks = [dict(type='LrProbe')] if not enabled else [
        dict(type='ReproducibilityHook', trace_interval=0), dict(type='LrProbe')]
    kwargs = runner_kwargs(tmp_path / name, hooks, param_scheduler=schedule,
                           train_cfg=dict(by_epoch=True, max_epochs=2))
    kwargs['optim_wrapper'] = dict(kwargs['optim_wrapper'], accumulative_counts=micro)
    runner = Runner(**kwargs)
    runner.train()
    probe = next(h for h in runner.hooks if isinstance(h, LrProbe))
    log = open(runner.logger.log_file).read()
    return runner, probe.lrs, log


@pytest.fixture(autouse=True)
def _probe_registered():
    from mmengine.registry import HOOKS
    HOOKS.register_module(module=LrProbe, force=True)


def test_warmup_steps_once_per_optimizer_step(tmp_path):
    runner, lrs, log = _train(tmp_path, 'acc2', WARMUP, micro=2)
    assert len(lrs) == 16
    assert run_state(runner).step_clock == 2
    assert ('mmrepro: accumulative_counts=2: iteration-based parameter schedules step once '
            'per optimizer step') in log
    # Both micro-batches of a step train at one rate; it rises over 4 optimizer steps.
    assert lrs[0::2] == lrs[1::2]
    assert lrs[0::2] == pytest.approx([LR * f for f in RAMP + [1.0] * 4], rel=1e-12)


def test_an_epoch_schedule_converts_with_optimizer_steps_per_epoch(tmp_path):
    _, lrs, _ = _train(tmp_path, 'acc2', EPOCH_STEP, micro=2)
    # 4 optimizer steps an epoch: the rate drops at the first micro-batch of epoch 2.
    assert lrs[:8] == [LR] * 8
    assert lrs[8:] == pytest.approx([LR * 0.1] * 8, rel=1e-12)


def test_without_accumulation_the_clock_is_mmengines(tmp_path):
    runner, lrs, log = _train(tmp_path, 'acc1', WARMUP, micro=1)
    assert run_state(runner).step_clock == 1
    assert 'parameter schedules step once per optimizer step' not in log
    assert lrs == pytest.approx([LR * f for f in RAMP + [1.0] * 12], rel=1e-12)


def test_a_runner_without_mmrepro_steps_every_micro_batch(tmp_path):
    runner, lrs, log = _train(tmp_path, 'plain', WARMUP, micro=2, enabled=False)
    assert run_state(runner).settings is None and run_state(runner).step_clock == 1
    assert 'mmrepro:' not in log
    # MMEngine's clock: the warmup counts micro-batches, so it ends within 2 steps.
    assert lrs == pytest.approx([LR * f for f in RAMP + [1.0] * 12], rel=1e-12)
