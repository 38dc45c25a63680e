"""Under gradient accumulation, iteration-based schedules count optimizer steps.

With ``accumulative_counts=k`` MMEngine counts micro-batches as iterations, so an
iteration-based schedule (``LinearLR`` warmup with ``by_epoch=False``, or a by-epoch
one with ``convert_to_iter_based=True``) advances ``k`` times per optimizer step, and
its learning rate changes between the micro-batches of one step. On ``k`` ranks
without accumulation it advances once per step. With the global stream on, the
schedulers of an accumulating run step once per optimizer step instead, so one process
with ``k`` micro-batches follows the learning rates of ``k`` ranks step for step:

- ``Runner.build_param_scheduler`` converts epochs to iterations with the number of
  optimizer steps per epoch (MMEngine uses the loader's length, in micro-batches);
- ``ParamSchedulerHook.after_train_iter`` steps only after the last micro-batch of
  each optimizer step.

Iteration counts of the loop itself (``IterBasedTrainLoop``'s ``max_iters`` and
``val_interval``, iteration-based checkpoint and logging intervals) still count
micro-batches, as in MMEngine.
"""
from __future__ import annotations

from typing import Any

from mmengine.hooks import ParamSchedulerHook
from mmengine.runner import Runner

from ..run.state import find_state

_original_build = Runner.build_param_scheduler
_original_after_train_iter = ParamSchedulerHook.after_train_iter


def build_param_scheduler(self: Runner, scheduler: Any) -> Any:
    """``Runner.build_param_scheduler``, in optimizer steps under accumulation."""
    state = find_state(self)
    micro = state.micro if state is not None else 0
    if micro <= 1:
        return _original_build(self, scheduler)
    with self.train_dataloader.batch_sampler.counting_steps():
        schedulers = _original_build(self, scheduler)
    state.step_clock = micro
    self.logger.info(f'mmrepro: accumulative_counts={micro}: iteration-based '
                     'parameter schedules step once per optimizer step')
    return schedulers


def after_train_iter(self: ParamSchedulerHook, runner: Runner, batch_idx: int,
                     data_batch: Any = None, outputs: Any = None) -> None:
    """``ParamSchedulerHook.after_train_iter``, once per optimizer step under the clock."""
    state = find_state(runner)
    if state is not None and (runner.iter + 1) % state.step_clock:
        return
    _original_after_train_iter(self, runner, batch_idx, data_batch, outputs)


def apply() -> None:
    """Install both on MMEngine's classes."""
    Runner.build_param_scheduler = build_param_scheduler
    ParamSchedulerHook.after_train_iter = after_train_iter
