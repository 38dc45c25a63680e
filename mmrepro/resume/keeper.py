"""Keep what exact resume needs in every checkpoint, and put it back on resume.

:class:`ResumeKeeper` is the resume half of ``ReproducibilityHook``: it tells the train
batch sampler how far training got (the sampler holds the position,
:class:`~mmrepro.data.data_position.DataPosition`), gathers every rank's RNG states when
a checkpoint is due, writes the ``mmrepro`` section (:mod:`.section`) and, on resume,
restores RNG states and the data preprocessor's state right before the first new
iteration. The train loader itself is positioned by the Runner
(:func:`mmrepro.runner.loaders.position_train_loader`); the keeper asks its sampler
whether it was, to absorb the iteration loop's replay.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from mmengine.dist import all_gather_object
from mmengine.hooks import CheckpointHook
from mmengine.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop

from ..data.data_position import rank_position
from ..data.seeded_batch_sampler import SeededBatchSampler
from ..rng.host_state import ProcessRNGs
from ..rng.seeding import get_rank, get_world_size
from ..run.state import ResumeSource, find_state
from .fast_forward import FastForwardIterator
from .preprocessor_state import PreprocessorState
from .rank_buffers import broadcast_buffers
from .section import CONTINUE, EXACT, NOT_RESTORED, build_section, check_section, planned


class ResumeKeeper:
    """The data position, RNG states and preprocessor state of one run, saved and restored.

    ``ReproducibilityHook`` forwards its calls: :meth:`after_train_iter`,
    :meth:`after_train_epoch`, :meth:`before_save_checkpoint`,
    :meth:`after_load_checkpoint` and :meth:`before_train`.
    """

    def __init__(self) -> None:
        #: Where a sampler that is not mmrepro's got, in its own batches (that sampler
        #: cannot restore it); a SeededBatchSampler holds its own.
        self._unkeyed: Optional[Dict[str, Any]] = None
        self._gathered: Optional[List[Dict[str, Any]]] = None
        self._resumed: Optional[Dict[str, Any]] = None
        self._mode = EXACT

    # ----------------------------------------------------------------- saving
    def after_train_iter(self, runner: Any, batch_idx: int) -> None:
        """Record the data position after this batch (and gather RNG if a save is due)."""
        loop = runner.train_loop
        if isinstance(loop, IterBasedTrainLoop):
            epoch = _loader_epoch(runner)
            if epoch is not None:
                self._consumed(runner, epoch, runner.iter + 1)
        else:
            self._consumed(runner, runner.epoch, batch_idx + 1)
        self._gather_if_due(runner, by_epoch=False)

    def after_train_epoch(self, runner: Any) -> None:
        """The next pass starts a new sampler epoch at batch 0."""
        if isinstance(runner.train_loop, EpochBasedTrainLoop):
            self._consumed(runner, runner.epoch + 1, 0)
        self._gather_if_due(runner, by_epoch=True)

    def before_save_checkpoint(self, runner: Any, checkpoint: dict) -> None:
        """Add the ``mmrepro`` section to the checkpoint being written."""
        state = find_state(runner)
        if state is None or not state.enabled:
            return
        settings = state.settings
        world_size = get_world_size()
        rng = self._gathered if self._gathered is not None else [ProcessRNGs().state_dict()]
        self._gathered = None
        if len(rng) != world_size:
            runner.logger.warning(
                'mmrepro: this checkpoint is saved outside CheckpointHook\'s schedule, so '
                'only rank 0\'s RNG state was captured; it will not resume exactly.')
            rng = [rng[0]] * world_size
        loop = 'iter' if isinstance(runner.train_loop, IterBasedTrainLoop) else 'epoch'
        checkpoint['mmrepro'] = build_section(
            settings.seed, settings.to_dict(), world_size, _batch_size(runner), loop,
            self._position(runner), rng, PreprocessorState(runner.model).state_dict())

    def _consumed(self, runner: Any, epoch: int, batches: int) -> None:
        """Tell the train batch sampler what training consumed (only the loop knows: the
        loader's workers draw ahead); a sampler that is not mmrepro's is noted here."""
        sampler = runner.train_dataloader.batch_sampler
        if isinstance(sampler, SeededBatchSampler):
            sampler.consume(epoch, batches)
        else:
            self._unkeyed = rank_position(epoch, batches)

    def _position(self, runner: Any) -> Optional[Dict[str, Any]]:
        """The data position a checkpoint saved now holds (None: unknown)."""
        sampler = runner.train_dataloader.batch_sampler
        if not isinstance(sampler, SeededBatchSampler):
            return self._unkeyed
        if isinstance(runner.train_loop, IterBasedTrainLoop) and _loader_epoch(runner) is None:
            return None  # a finite sampler restarted by the iteration loop: MMEngine's
        return sampler.consumed_state()  # None: nothing consumed or loaded yet, unknown

    def _gather_if_due(self, runner: Any, by_epoch: bool) -> None:
        """Where a checkpoint is due (every rank asks): gather every rank's RNG states,
        and give every rank rank 0's buffers, which the checkpoint holds."""
        if get_world_size() == 1 or not _checkpoint_due(runner, by_epoch):
            return
        self._gathered = all_gather_object(ProcessRNGs().state_dict())
        broadcast_buffers(runner)

    # --------------------------------------------------------------- resuming
    def after_load_checkpoint(self, runner: Any, checkpoint: dict) -> None:
        """Take the checkpoint's section (validated once) for restoring, as planned.

        On another layout with the same global batch (:data:`~.section.CONTINUE`), the
        checkpoint's iteration count is converted into this run's micro-batches before
        MMEngine's ``Runner.resume`` reads it.

        Raises:
            ValueError: The plan refuses the layout and ``auto_scale_lr`` is off.
        """
        if not runner._resume:
            return
        state = find_state(runner)
        if state is None:
            return
        source = state.resume
        if (source is None or source.section is None) and \
                checkpoint.get('mmrepro') is not None:
            # not peeked at (a remote file): validated here, planned once below
            source = state.resume = ResumeSource(
                path=str(runner._load_from or 'checkpoint'), seed=source and source.seed,
                section=check_section(checkpoint['mmrepro']))
        if source is None or source.section is None:
            runner.logger.warning(
                'mmrepro: the checkpoint being resumed has no mmrepro state (written '
                'without mmrepro?). Cannot restore: ' + '; '.join(NOT_RESTORED) +
                '. The resumed run will not match an uninterrupted one bit for bit.')
            return
        section = source.section
        plan = planned(source, state.layout, state.global_stream)
        if not plan.restores:
            if not (runner.auto_scale_lr or {}).get('enable', False):
                raise ValueError(f'{plan.reason} Or set auto_scale_lr=dict(enable=True, ...) '
                                 'to continue without bitwise reproducibility.')
            runner.logger.warning(
                f"mmrepro: {', '.join(plan.changes)}; auto_scale_lr is enabled, so training "
                'continues, but RNG states and data position are not restored and the '
                'result will differ from an uninterrupted run.')
            return
        if plan.mode == CONTINUE:
            meta = checkpoint['meta']
            converted = plan.iteration(meta['iter'])
            runner.logger.info(
                f"mmrepro: resuming on another layout ({', '.join(plan.changes)}) with the "
                f"same global batch: the data stream continues exactly; iteration "
                f"{meta['iter']} of the checkpoint is iteration {converted} here "
                f'({plan.accumulation_to} micro-batch(es) per optimizer step).')
            meta['iter'] = converted
        self._resumed, self._mode = section, plan.mode

    def before_train(self, runner: Any) -> None:
        """Restore RNG state right before the first new iteration; an iteration loop's
        replay of the trained batches is absorbed where the sampler was positioned."""
        section, self._resumed = self._resumed, None
        if section is None:
            return
        if self._mode == EXACT:  # elsewhere every draw is keyed by the data it serves
            ProcessRNGs().load_state_dict(section['rng'][get_rank()])
        preprocessor = PreprocessorState(runner.model)
        preprocessor.load_state_dict(section.get('preprocessor', {}))
        if preprocessor.restored:
            runner.logger.info('mmrepro: restored the data preprocessor\'s '
                               f"{', '.join(preprocessor.restored)}")
        position = section.get('position')
        if not position:
            return
        loop = runner.train_loop
        sampler = loop.dataloader.batch_sampler
        if not isinstance(sampler, SeededBatchSampler):
            runner.logger.warning('mmrepro: sample seeding is off, so the data position '
                                  'is not restored.')
            return
        target = sampler.local_position(position)  # (epoch, this rank's batches)
        if isinstance(loop, IterBasedTrainLoop):
            if sampler.positioned_at(target):
                loop.dataloader_iterator = FastForwardIterator(loop.dataloader_iterator,
                                                               loop.iter)
            else:  # not positioned before the loop's iterator started: MMEngine replays
                runner.logger.info('mmrepro: the loader was built before the checkpoint '
                                   'was known; replaying the skipped batches instead.')
        what = 'RNG states and data position' if self._mode == EXACT else 'data position'
        runner.logger.info(f'mmrepro: resumed {what} '
                           f"(sampler epoch {target[0]}, {target[1]} batches done).")


def _batch_size(runner: Any) -> Optional[int]:
    loader = runner.train_dataloader
    return getattr(loader, 'batch_size', None) or getattr(
        loader.batch_sampler, 'batch_size', None)


def _loader_epoch(runner: Any) -> Optional[int]:
    """Sampler epoch for an iteration loop; None if the stream is not infinite."""
    sampler = runner.train_dataloader.batch_sampler
    if not isinstance(sampler, SeededBatchSampler):
        return None
    if hasattr(sampler.sampler, 'epoch'):  # a finite sampler restarted by the loop
        return None
    return sampler.current_epoch()


def _checkpoint_due(runner: Any, by_epoch: bool) -> bool:
    """Whether a CheckpointHook saves at this point (its own test, asked)."""
    for hook in runner.hooks:
        if not isinstance(hook, CheckpointHook) or hook.by_epoch != by_epoch:
            continue
        if by_epoch:
            due = hook.every_n_epochs(runner, hook.interval, hook.save_begin) or (
                hook.save_last and hook.is_last_train_epoch(runner))
        else:
            due = hook.every_n_train_iters(runner, hook.interval, hook.save_begin) or (
                hook.save_last and hook.is_last_train_iter(runner))
        if due:
            return True
    return False
