"""Evaluation: predictions that do not depend on the number of ranks, and runs that only
evaluate recorded as such.

With a batch size above 1 an image's predictions depend on the images it is batched
with (MMDetection pads a batch to its largest image), and MMEngine's
``DefaultSampler(shuffle=False)`` batches other images together on another number of
ranks. :class:`ReproValLoop` and :class:`ReproTestLoop` (registered in ``LOOPS``) give
such a loader :class:`~mmrepro.data.eval_batch_sampler.EvalBatchSampler`: the same
batches on any number of ranks, and on one rank exactly MMEngine's.

MMEngine's ``collect_results`` puts the ranks' results back in dataset order assuming
``DefaultSampler``'s assignment (rank ``r``'s ``i``-th result is index ``r + W x i``).
So on more than one rank, just before the evaluator evaluates, the ranks exchange each
metric's ``(index, result)`` pairs and every rank holds the list ``DefaultSampler``
would have given it: the evaluator and every metric see the results of one rank, in
its order. That is the one seam: ``evaluate`` of the loop's evaluator, wrapped on the
instance while the loop runs; MMEngine's ``run`` is not restated, so its hooks, fp16
and ``val_loss`` are MMEngine's.

``ReproRunner.build_val_loop`` and ``build_test_loop`` build these loops where the
config asks for MMEngine's ``ValLoop``/``TestLoop`` (:func:`build_eval_loop`); a loop of
another type is kept, and the log says what it lacks. A loader that asks for another
sampler or batch sampler keeps it, and the log says so. ``ReproRunner.val`` and
``test`` mark a run that only evaluates (:func:`evaluating`).
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from mmengine.dataset import DefaultSampler
from mmengine.dist import all_gather_object
from mmengine.registry import LOOPS
from mmengine.runner import Runner
from mmengine.runner.base_loop import BaseLoop
from mmengine.runner.loops import TestLoop, ValLoop

from ..data.eval_batch_sampler import EvalBatchSampler, default_sampler_share
from ..run.state import enabled, find_state
from .requested import asks_for_class, type_name

#: MMEngine's validation and test loops.
MMENGINE_LOOPS = {'val': ValLoop, 'test': TestLoop}
#: What a loader or loop that keeps MMEngine's per-rank batches lacks.
RANK_BATCHES = ("with batch_size > 1 an image's padding, and so its predictions, can "
                'change with the number of ranks')


def eval_batches_problem(dataloader: Any) -> Optional[str]:
    """What keeps a loader config from :class:`EvalBatchSampler`, as a phrase, or None.

    It takes loader configs (dicts) that use MMEngine's ``DefaultSampler`` with
    ``shuffle=False``, without a batch sampler of their own or ``drop_last=True``.
    """
    if not isinstance(dataloader, dict):
        return f'is a {type(dataloader).__name__} object, not a config'
    batch_sampler = dataloader.get('batch_sampler')
    if batch_sampler is not None:
        kind = (batch_sampler.get('type') if isinstance(batch_sampler, dict)
                else type(batch_sampler))
        return f'has a batch_sampler of its own ({type_name(kind)})'
    sampler = dataloader.get('sampler')
    kind = sampler.get('type') if isinstance(sampler, dict) else type(sampler)
    if not asks_for_class(kind, DefaultSampler):
        return f'samples with {type_name(kind)}, not DefaultSampler'
    if sampler.get('shuffle', True) is not False:
        return 'shuffles (DefaultSampler without shuffle=False)'
    if dataloader.get('drop_last'):
        return 'drops a short last batch (drop_last=True)'
    return None


def with_eval_batches(dataloader: Dict[str, Any]) -> Dict[str, Any]:
    """The loader config ``dataloader`` with :class:`EvalBatchSampler` as its batch
    sampler (the same batch size; ``drop_last``, which is False, removed, since a
    DataLoader with a batch sampler refuses it)."""
    loader = dict(dataloader)
    loader.pop('drop_last', None)
    loader['batch_size'] = loader.get('batch_size', 1)
    loader['batch_sampler'] = dict(type=EvalBatchSampler)
    return loader


def find_eval_batches(loader: Any) -> Optional[EvalBatchSampler]:
    """The :class:`EvalBatchSampler` of ``loader`` (below mmrepro's wrapper), or None."""
    sampler = getattr(loader, 'batch_sampler', None)
    for _ in range(4):
        if isinstance(sampler, EvalBatchSampler):
            return sampler
        sampler = getattr(sampler, 'batch_sampler', None)
    return None


def share_results(metrics: List[Any], batches: EvalBatchSampler) -> None:
    """Give each metric on this rank the results ``DefaultSampler`` would have given it.

    Every rank sends its indices and each metric's ``results`` to every rank
    (``all_gather_object``); each then keeps, per metric, the results of the indices
    of :func:`~mmrepro.data.eval_batch_sampler.default_sampler_share`, in its order.

    Raises:
        ValueError: On every rank, if a metric does not hold one result per sample some
            rank evaluated.
    """
    indices = batches.indices()
    parts = all_gather_object((indices, [list(m.results) for m in metrics]))
    for rank, (done, results) in enumerate(parts):
        for metric, held in zip(metrics, results, strict=True):
            if len(held) != len(done):
                raise ValueError(
                    f'mmrepro: {type(metric).__name__}.results holds {len(held)} entries on '
                    f'rank {rank}, expected one per sample that rank evaluated '
                    f'({len(done)}), to order them as on one rank; fix: append one result '
                    'per data sample in its process(), or evaluate on one rank.')
    round_up = getattr(batches.sampler, 'round_up', True)
    share = default_sampler_share(batches.size, batches.rank, batches.world_size, round_up)
    for j, metric in enumerate(metrics):
        by_index: Dict[int, Any] = {}
        for done, results in parts:
            by_index.update(zip(done, results[j], strict=True))
        metric.results[:] = [by_index[i] for i in share]


@contextlib.contextmanager
def results_in_default_order(evaluator: Any, batches: EvalBatchSampler) -> Iterator[None]:
    """While it is open, ``evaluator.evaluate`` first calls :func:`share_results`.

    The wrapper is an attribute of the instance, removed (or the instance's own put
    back) on exit; the class is untouched.
    """
    own = evaluator.__dict__.get('evaluate')
    original: Callable[..., Dict[str, Any]] = evaluator.evaluate

    def evaluate(size: int, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        share_results(list(getattr(evaluator, 'metrics', [])), batches)
        return original(size, *args, **kwargs)

    evaluator.evaluate = evaluate
    try:
        yield
    finally:
        if own is None:
            evaluator.__dict__.pop('evaluate', None)
        else:
            evaluator.evaluate = own


class _RankFreeBatches:
    """What :class:`ReproValLoop` and :class:`ReproTestLoop` add to MMEngine's loops."""

    stage = ''

    def __init__(self, runner: Any, dataloader: Any, evaluator: Any, *args: Any,
                 **kwargs: Any) -> None:
        problem = eval_batches_problem(dataloader)
        if problem is None:
            dataloader = with_eval_batches(dataloader)
        super().__init__(runner, dataloader, evaluator, *args, **kwargs)
        if problem is not None:
            runner.logger.log(logging.WARNING, (
                f'mmrepro: {self.stage}_dataloader {problem}, so it keeps its batches: '
                f'{RANK_BATCHES}'))
        #: The loader's evaluation batch sampler (None: the loader keeps its own).
        self.eval_batches = find_eval_batches(self.dataloader)

    def run(self) -> Dict[str, Any]:
        """MMEngine's ``run``; on several ranks, the metrics' results in one rank's order."""
        batches = self.eval_batches
        if batches is None or batches.world_size == 1:
            return super().run()
        with results_in_default_order(self.evaluator, batches):
            return super().run()


@LOOPS.register_module()
class ReproValLoop(_RankFreeBatches, ValLoop):
    """``ValLoop`` whose batches and results are the same on any number of ranks."""

    stage = 'val'


@LOOPS.register_module()
class ReproTestLoop(_RankFreeBatches, TestLoop):
    """``TestLoop`` whose batches and results are the same on any number of ranks."""

    stage = 'test'


REPRO_LOOPS = {'val': ReproValLoop, 'test': ReproTestLoop}


def build_eval_loop(runner: Runner, stage: str, loop: Union[BaseLoop, dict],
                    build: Callable[[Any], BaseLoop]) -> BaseLoop:
    """``build`` (MMEngine's ``build_{stage}_loop``) with mmrepro's loop where the
    config asks for MMEngine's (see the module docstring)."""
    if not enabled(runner):
        return build(loop)
    mine = REPRO_LOOPS[stage]
    if isinstance(loop, dict):
        kind = loop.get('type')
        if kind is None or asks_for_class(kind, MMENGINE_LOOPS[stage]):
            loop = dict(loop, type=mine.__name__)
    built = build(loop)
    if not isinstance(built, mine):
        runner.logger.log(logging.WARNING, (
            f'mmrepro: the {stage} loop is {type(built).__name__}, not {mine.__name__}: '
            f'{RANK_BATCHES}'))
    return built


def evaluating(runner: Runner, entry: str) -> None:
    """Mark the run as one that only evaluates (``entry``: ``'val'`` or ``'test'``), from
    ``Runner.val()`` or ``Runner.test()``.

    ``ReproducibilityHook`` then writes ``test_record.json`` (not ``run_record.json``, so a
    training work dir's newest record stays the training run's): the evaluated data's
    fingerprint, the checkpoint's weights digest, the metrics and the predictions digest
    (:mod:`mmrepro.record.evaluation`).
    """
    state = find_state(runner)
    if state is not None:
        state.entry = entry
