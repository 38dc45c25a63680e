"""Parameter schedules and ``auto_scale_lr`` that count optimizer steps and global batches.

**Step clock.** With ``accumulative_counts=k`` MMEngine counts micro-batches as
iterations, so an iteration-based schedule (``LinearLR`` warmup with ``by_epoch=False``,
or a by-epoch one with ``convert_to_iter_based=True``) advances ``k`` times per optimizer
step, and its learning rate changes between the micro-batches of one step. On ``k``
ranks without accumulation it advances once per step. With the global stream on, the
schedulers of an accumulating run step once per optimizer step instead, so one process
with ``k`` micro-batches follows the learning rates of ``k`` ranks step for step:

- ``ReproRunner.build_param_scheduler`` converts epochs to iterations with the number of
  optimizer steps per epoch (MMEngine uses the loader's length, in micro-batches;
  :func:`counting_optimizer_steps`);
- :class:`ReproParamSchedulerHook` (``default_hooks.param_scheduler``) steps only after
  the last micro-batch of each optimizer step.

Iteration counts of the loop itself (``IterBasedTrainLoop``'s ``max_iters`` and
``val_interval``, iteration-based checkpoint and logging intervals) still count
micro-batches, as in MMEngine.

**auto_scale_lr.** MMEngine's ``Runner.scale_lr`` scales the learning rate by
``batch_size x world_size / base_batch_size`` and does not count
``optim_wrapper.accumulative_counts``, so one process with ``k`` micro-batches of ``B``
(standing in for ``k`` ranks of ``B``) would train at ``1/k`` of the learning rate the
``k`` ranks get. ``ReproRunner.scale_lr`` runs MMEngine's method as if the per-rank batch
were ``batch_size x accumulative_counts`` (:func:`scaling_by_global_batch`): the ratio
is ``global batch / base_batch_size``, with the global batch ``batch_size x ranks x
accumulative_counts`` (samples per optimizer step), the same number, computed the same
way, for every layout of that global batch. One line in the Runner's log says what it
scaled by.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Optional

from mmengine.hooks import ParamSchedulerHook
from mmengine.registry import HOOKS
from mmengine.runner import Runner
from torch.utils.data import DataLoader

from ..run.layout import Layout, accumulative_counts
from ..run.state import find_state, run_state


@contextlib.contextmanager
def counting_optimizer_steps(runner: Runner) -> Iterator[None]:
    """While MMEngine builds the parameter schedulers: under accumulation with the global
    stream, the train loader's length counts optimizer steps, so that epochs convert to
    iterations by steps; after, the step clock is set and the log says so. Elsewhere
    MMEngine's build, unchanged."""
    state = run_state(runner)
    accumulation = state.keyed_accumulation
    if accumulation <= 1:
        yield
        return
    with runner.train_dataloader.batch_sampler.counting_steps():
        yield
    state.step_clock = accumulation
    runner.logger.info(f'mmrepro: accumulative_counts={accumulation}: iteration-based '
                       'parameter schedules step once per optimizer step')


@contextlib.contextmanager
def scaling_by_global_batch(runner: Runner, optim_wrapper: Any,
                            auto_scale_lr: Optional[Mapping]) -> Iterator[None]:
    """While MMEngine's ``Runner.scale_lr`` runs with ``auto_scale_lr`` enabled, the
    per-rank batch it reads is ``batch_size x accumulative_counts``, so that it scales by
    the global batch (see the module docstring); after, the log says by what."""
    if not (auto_scale_lr or {}).get('enable', False):
        yield
        return
    loader = runner._train_dataloader
    batch_size = (loader.batch_size if isinstance(loader, DataLoader)
                  else loader['batch_size'])
    layout = run_state(runner).layout or Layout(batch_size, 0, runner.world_size,
                                                accumulative_counts(optim_wrapper))
    # MMEngine reads the per-rank batch size from the train loader (a config or a
    # DataLoader) and multiplies it by the world size: give it the micro-batches too.
    runner._train_dataloader = dict(batch_size=batch_size * layout.accumulation)
    try:
        yield
    finally:
        runner._train_dataloader = loader
    base = auto_scale_lr['base_batch_size']
    runner.logger.info(
        f'mmrepro: auto_scale_lr: learning rates scaled by global batch '
        f'{layout.global_batch} / base_batch_size {base} = {layout.global_batch / base} '
        f'(global batch = {layout.world_size} rank(s) x batch_size {batch_size} x '
        f'accumulative_counts {layout.accumulation}, samples per optimizer step)')


@HOOKS.register_module()
class ReproParamSchedulerHook(ParamSchedulerHook):
    """``ParamSchedulerHook`` that steps once per optimizer step under the step clock.

    ``ReproRunner`` puts it in place of MMEngine's ``ParamSchedulerHook`` in
    ``default_hooks``; where no clock is set (no accumulation, or a plain Runner) it is
    MMEngine's hook.
    """

    def after_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None,
                         outputs: Any = None) -> None:
        """``ParamSchedulerHook.after_train_iter`` after an optimizer step's last batch."""
        state = find_state(runner)
        if state is not None and (runner.iter + 1) % state.step_clock:
            return
        super().after_train_iter(runner, batch_idx, data_batch, outputs)
