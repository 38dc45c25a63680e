"""Which optimizer steps a trace records, and what it records of each whole step.

A run is traced at its first optimizer steps densely (1, 2, 4, 8, ... below the
interval), so that a teammate's short check has early points to compare with, and then
every ``interval`` steps. Every micro-batch of a traced step is traced.

At the last micro-batch of a traced step the trace line also holds the step as a whole,
the same for every process layout with the same global batch (ranks, per-rank batch,
``accumulative_counts``), so that runs of different layouts compare step by step:

- ``step``: the optimizer step (1-based);
- ``step_data``: one digest per sample of the global batch, by place in it;
- ``step_losses``: every micro-batch's loss values, as ``'<slice>.<name>'``;
- ``step_grad``: the gradients the optimizer applied (after the all-reduce, the
  accumulation and any clipping), per parameter;
- ``weight`` and ``buffer`` (written at every traced iteration) are then after the step;
- ``sketch``: at the first :data:`SKETCHED_STEPS` steps, a sketch (:mod:`.sketch`) of
  each applied gradient (``grad``) and of each weight after the step (``weight``), from
  which two runs' distance is estimated: the early steps a teammate's check trains
  (a sketch line of an R50-FPN detector is about three times a digest line).
"""
from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional, Tuple

from torch import nn

from ..determinism.compile import outside_graphs
from .batching import _Batch, _batch
from .samples import global_slots
from .sketch import read_back, sketch

#: Trace line keys of the whole step (see the module docstring).
STEP = 'step'
STEP_SECTIONS = ('step_data', 'step_losses', 'step_grad')
#: How traced steps are chosen (the trace header's ``points``).
POINTS = 'dense'
#: Traced steps up to this one also hold sketches.
SKETCHED_STEPS = 32


def traced_step(step: int, interval: int) -> bool:
    """Whether the 1-based optimizer ``step`` is traced: 1, 2, 4, ... below ``interval``,
    then every ``interval``."""
    return step % interval == 0 or (step < interval and step & (step - 1) == 0)


class StepRecorder:
    """Collect what a traced step holds over its micro-batches and ranks.

    Args:
        model: The model (its parameters' gradients are read before the step).
        optim_wrapper: The Runner's optimizer wrapper (a step pre-hook is added to each of
            its optimizers; removed by :meth:`close`).
        rank: This process's rank.
        world_size: Number of ranks.
        sketches: Sketch the first :data:`SKETCHED_STEPS` steps (False: none).
        compiled: ``train_step`` runs compiled: the step pre-hook is excluded from
            compilation (:func:`~mmrepro.determinism.compile.outside_graphs`).
    """

    def __init__(self, model: nn.Module, optim_wrapper: Any, rank: int,
                 world_size: int, sketches: bool = True, compiled: bool = False) -> None:
        self.model = model
        self.sketched_steps = SKETCHED_STEPS if sketches else 0
        self.rank, self.world_size = rank, world_size
        self._data: List[Tuple[int, Dict[str, str]]] = []
        self._losses: List[Tuple[int, Dict[str, str]]] = []
        self._grads: Optional[_Batch] = None
        self._grad_sketches: Dict[str, Any] = {}
        self._active = self._sketch = False
        hook = outside_graphs(self._before_step) if compiled else self._before_step
        self._handles = [_InstanceStepHook(optimizer, hook)
                         for optimizer in _optimizers(optim_wrapper)]

    def begin(self, step: int) -> None:
        """A traced micro-batch of the 1-based optimizer ``step`` starts: the optimizer
        step ending it is read."""
        self._active = True
        self._sketch = step <= self.sketched_steps

    def add(self, place: int, data: Dict[str, str], losses: Dict[str, str]) -> None:
        """Keep one traced micro-batch's sample digests and losses (its slice ``place``)."""
        self._data.append((place, data))
        self._losses.append((place, losses))

    def finish(self, step: int) -> Tuple[Dict[str, Any], Optional[_Batch]]:
        """The step's fields for the trace line (gathered from every rank) and the pending
        gradient digests; start anew."""
        slices = [(self._data, self._losses)]
        if self.world_size > 1:
            from mmengine.dist import all_gather_object
            slices = all_gather_object(slices[0])
        data = global_slots([item for pair in slices for item in pair[0]])
        losses = {f'{place}.{name}': value for pair in slices
                  for place, values in sorted(pair[1]) for name, value in values.items()}
        fields: Dict[str, Any] = {STEP: step, 'step_data': data,
                                  'step_losses': dict(sorted(losses.items()))}
        if step <= self.sketched_steps:
            weights = {name: sketch(param) for name, param in self.model.named_parameters()
                       if param.is_floating_point()}
            fields['sketch'] = dict(grad=read_back(self._grad_sketches),
                                    weight=read_back(weights))
        grads, self._grads, self._grad_sketches = self._grads, None, {}
        self._data, self._losses, self._active = [], [], False
        return fields, grads

    def close(self) -> None:
        """Remove the optimizer hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """Digest the gradients the optimizer is about to apply (traced steps only)."""
        if not self._active:
            return
        named = [(name, param.grad) for name, param in self.model.named_parameters()
                 if param.grad is not None]
        if named:
            self._grads = _batch([('step_grad', name) for name, _ in named],
                                 [grad for _, grad in named])
            if self._sketch:
                self._grad_sketches = {name: sketch(grad) for name, grad in named
                                       if grad.is_floating_point()}


class _InstanceStepHook:
    """``hook(optimizer, args, kwargs)`` before each ``optimizer.step``, from a wrapper of
    the instance's ``step``: the first time a process compiles, torch 2.1's dynamo takes
    the hook-calling wrapper off every optimizer class's ``step`` (its ``TorchPatcher``),
    so a hook registered with ``register_step_pre_hook`` is never called after that in
    the process, a compiled run's included. Schedulers wrap the instance's ``step`` too;
    :meth:`remove` restores it where it is still this wrapper, and makes the wrapper a
    pass-through otherwise."""

    def __init__(self, optimizer: Any, hook: Any) -> None:
        self.optimizer, self.hook, self.active = optimizer, hook, True
        self.own = 'step' in vars(optimizer)  # an instance's own step (a scheduler's wrapper)
        original = optimizer.step

        @functools.wraps(original)
        def step(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                self.hook(optimizer, args, kwargs)
            return original(*args, **kwargs)

        self.original, self.wrapper = original, step
        optimizer.step = step

    def remove(self) -> None:
        """Stop calling the hook (and unwrap ``step`` where nothing wrapped it since)."""
        self.active = False
        if vars(self.optimizer).get('step') is self.wrapper:
            if self.own:
                self.optimizer.step = self.original
            else:
                del self.optimizer.step  # the class's step again


def _optimizers(optim_wrapper: Any) -> List[Any]:
    """The torch optimizers of an ``OptimWrapper`` or ``OptimWrapperDict``."""
    if optim_wrapper is None:
        return []
    wrappers = optim_wrapper.values() if hasattr(optim_wrapper, 'values') else [optim_wrapper]
    return [getattr(wrapper, 'optimizer', None) for wrapper in wrappers
            if hasattr(getattr(wrapper, 'optimizer', None), 'register_step_pre_hook')]
