"""``auto_scale_lr`` counts accumulated micro-batches: the global batch sets the rate.

1 process x batch 2 x ``accumulative_counts=2`` stands in for 2 ranks x batch 2, so it
must train at the learning rate 2 x 2 gets. The 2-rank rate is what MMEngine's own
``scale_lr`` gives a Runner of world size 2 (no processes are launched).
"""
from __future__ import annotations

import glob
import os.path as osp
from typing import List

from mmengine.runner import Runner
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)

LR, BASE = 0.08, 16


def _runner(work_dir, micro: int, enabled: bool) -> Runner:
    """The toy Runner at batch 2 for one epoch, SGD at ``LR``, seed 0 (not deterministic)."""
    kwargs = runner_kwargs(work_dir, [dict(type='ReproducibilityHook')] if enabled else [],
                           optim_wrapper=dict(optimizer=dict(type='SGD', lr=LR),
                                              accumulative_counts=micro),
                           train_cfg=dict(by_epoch=True, max_epochs=1),
                           auto_scale_lr=dict(enable=True, base_batch_size=BASE),
                           randomness=dict(seed=0))
    return Runner(**dict(kwargs, train_dataloader=dict(kwargs['train_dataloader'],
                                                       batch_size=2)))


def _lrs(runner: Runner) -> List[float]:
    return [group['lr'] for group in runner.optim_wrapper.param_groups]


def _two_ranks_lrs(work_dir, enabled: bool) -> List[float]:
    """What ``Runner.train`` sets on 2 ranks x batch 2 (``scale_lr``, world size 2)."""
    runner = _runner(work_dir, micro=1, enabled=enabled)
    runner._world_size = 2
    runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
    runner.scale_lr(runner.optim_wrapper, runner.auto_scale_lr)
    return _lrs(runner)


def test_accumulation_trains_at_the_learning_rate_of_the_ranks_it_stands_for(tmp_path):
    runner = _runner(tmp_path / 'accumulated', micro=2, enabled=True)
    runner.train()  # scale_lr runs in train(); no parameter scheduler changes the rate
    two_ranks = _two_ranks_lrs(tmp_path / 'ranks', enabled=False)  # MMEngine's own
    assert two_ranks == [LR * (4 / BASE)]
    assert _two_ranks_lrs(tmp_path / 'ranks-mmrepro', enabled=True) == two_ranks
    assert _lrs(runner) == two_ranks  # bit for bit
    log = open(glob.glob(osp.join(str(tmp_path / 'accumulated'), '*', '*.log'))[0]).read()
    assert ('mmrepro: auto_scale_lr: learning rates scaled by global batch 4 / '
            'base_batch_size 16 = 0.25 (global batch = 1 rank(s) x batch_size 2 x '
            'accumulative_counts 2, samples per optimizer step)') in log


def test_without_accumulation_the_scaling_is_mmengines(tmp_path):
    runner = _runner(tmp_path, micro=1, enabled=True)
    runner.train()
    assert _lrs(runner) == [LR * (2 / BASE)]


def test_a_runner_without_mmrepro_keeps_mmengines_scaling(tmp_path):
    runner = _runner(tmp_path, micro=2, enabled=False)
    runner.train()
    assert _lrs(runner) == [LR * (2 / BASE)]  # batch_size x world size, as MMEngine does
    log = open(glob.glob(osp.join(str(tmp_path), '*', '*.log'))[0]).read()
    assert 'mmrepro: auto_scale_lr' not in log
