"""A resumed epoch numbers its batches from where the checkpoint stopped.

``ReproRunner.build_train_loop`` builds :class:`ReproEpochBasedTrainLoop` (registered in
``LOOPS``) where the config asks for MMEngine's ``EpochBasedTrainLoop``: by type (as
MMDetection's configs do) or with ``by_epoch=True`` (:func:`train_loop_config`).
Another loop type is built as the config says; an epoch-based one then numbers a resumed
epoch's batches from 0, which the log says (:func:`checked_train_loop`; the weights do
not depend on it).
"""
from __future__ import annotations

import logging
from typing import Union

from mmengine.registry import LOOPS
from mmengine.runner import Runner
from mmengine.runner.base_loop import BaseLoop
from mmengine.runner.loops import EpochBasedTrainLoop

from ..data.seeded_batch_sampler import SeededBatchSampler
from .requested import asks_for_class


@LOOPS.register_module()
class ReproEpochBasedTrainLoop(EpochBasedTrainLoop):
    """``EpochBasedTrainLoop`` whose resumed epoch starts ``batch_idx`` at the offset."""

    def run_epoch(self) -> None:
        """``EpochBasedTrainLoop.run_epoch``, starting ``batch_idx`` at the resume offset.

        Identical to MMEngine's when the loader is not positioned. Positioned (its batch
        sampler holds a resume position for this epoch), the loader skips the consumed
        batches at the index level, and hooks see the same ``batch_idx`` as in the run
        that wrote the checkpoint (logging intervals, end-of-epoch checks).
        """
        self.runner.call_hook('before_train_epoch')  # sets the sampler's epoch
        self.runner.model.train()
        sampler = getattr(self.dataloader, 'batch_sampler', None)
        start = sampler.epoch_start() if isinstance(sampler, SeededBatchSampler) else 0
        for idx, data_batch in enumerate(self.dataloader, start):
            self.run_iter(idx, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1


def train_loop_config(loop: Union[BaseLoop, dict]) -> Union[BaseLoop, dict]:
    """``train_cfg`` with :class:`ReproEpochBasedTrainLoop` where it asks for MMEngine's
    epoch loop (by type, or with ``by_epoch=True``); any other loop as it is."""
    if isinstance(loop, dict):
        loop = dict(loop)
        kind = loop.get('type')
        if kind is None and loop.get('by_epoch') is True:
            del loop['by_epoch']
            loop['type'] = ReproEpochBasedTrainLoop.__name__
        elif asks_for_class(kind, EpochBasedTrainLoop):
            loop['type'] = ReproEpochBasedTrainLoop.__name__
    return loop


def checked_train_loop(runner: Runner, built: BaseLoop) -> BaseLoop:
    """``built``; the log says what an epoch loop that is not mmrepro's lacks."""
    if isinstance(built, EpochBasedTrainLoop) and \
            not isinstance(built, ReproEpochBasedTrainLoop):
        runner.logger.log(logging.WARNING, (
            f'mmrepro: the train loop is {type(built).__name__}, not '
            f'{ReproEpochBasedTrainLoop.__name__}: after a resume from the middle of an '
            'epoch, hooks number that epoch\'s batches from 0 (the data and the weights '
            'are those of the run resumed)'))
    return built
