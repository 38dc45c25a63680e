"""ReproducibilityHook: RNG state and data position in checkpoints, exact resume."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from mmengine.dist import all_gather_object, is_main_process
from mmengine.hooks import CheckpointHook, Hook
from mmengine.registry import HOOKS
from mmengine.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop

from ..data.global_stream import accumulative_counts
from ..data.rng_state import ProcessRNGs
from ..data.seeded_batch_sampler import SeededBatchSampler, rank_position
from ..data_fingerprint import check_mode
from ..patches.epoch_loop import OFFSET_ATTR
from ..patches.runner_randomness import SETTINGS_ATTR, log_pending
from ..preprocessor_state import PreprocessorState
from ..record.weights import RECORD_KEY, WeightsLedger
from ..resume_state import NOT_RESTORED, build_section, check_section, layout_changes
from ..run_record import collect_run_record, write_run_record
from ..seeding import get_rank, get_world_size
from ..step_draws import seed_step, step_key
from .fast_forward import FastForwardIterator


@HOOKS.register_module()
class ReproducibilityHook(Hook):
    """Write RNG state and data position into checkpoints; restore them on resume.

    Every checkpoint gets an ``mmrepro`` section (see
    :mod:`mmrepro.resume_state`): the seed, the python/numpy/torch/CUDA RNG
    states of every rank, the data position (sampler epoch and batches
    consumed) and the data preprocessor's state between iterations
    (:mod:`mmrepro.preprocessor_state`: ``BatchSyncRandomResize``'s size). On resume
    the train loader skips the consumed batches at the index level, each rank's RNG
    states are restored right before the first unseen iteration, and the loop numbers
    batches as the original run did, so the resumed run ends with the same weights,
    byte for byte.

    It also writes the run record (:mod:`mmrepro.run_record`) into the log dir and
    every checkpoint's meta, and with ``trace_interval > 0`` records a trace of
    losses and parameter/gradient digests (:mod:`mmrepro.trace`) at the first
    iteration and every ``trace_interval`` iterations, so that two runs can be
    compared after the fact (``tools/repro_diff.py``).

    Args:
        trace_interval: Record the trace at the first iteration and every N
            iterations; 0 turns it off. Defaults to 50, MMDetection's logging
            interval: about 0.05 % of the training time and one line of about
            28 KiB per traced iteration for an R50-FPN detector (49 MiB over COCO
            1x's 88,716 iterations; ``docs/benchmarks.md``).
        trace_forward: Also record every module's forward output in the trace (names
            the first module whose output differs; ``tools/check_repro.py`` turns it
            on). Defaults to False.
        fingerprint: How the run record fingerprints each sample's files:
            ``'labels'`` (label files by content, images by size), ``'content'``
            (every file by content) or ``'stat'`` (every file by size); see
            :mod:`mmrepro.data_fingerprint`. Defaults to ``'labels'``.

    Its priority (85) places it after the logger and scheduler hooks and before
    ``CheckpointHook`` (VERY_LOW, 90), so the states it captures are those of the
    moment the checkpoint is written.
    """

    # MMEngine names no priority between LOW (70) and VERY_LOW (90, CheckpointHook);
    # 85 runs after LoggerHook/ParamSchedulerHook and right before CheckpointHook.
    priority = 85

    def __init__(self, trace_interval: int = 50, trace_forward: bool = False,
                 fingerprint: str = 'labels') -> None:
        if isinstance(trace_interval, bool) or not isinstance(trace_interval, int) or \
                trace_interval < 0:
            raise ValueError(
                f'ReproducibilityHook(trace_interval={trace_interval!r}): expected an int '
                '>= 0 (0 turns the trace off, N records every N iterations).')
        if not isinstance(trace_forward, bool):
            raise TypeError(f'ReproducibilityHook(trace_forward={trace_forward!r}): '
                            'expected True or False.')
        self.trace_interval = trace_interval
        self.trace_forward = trace_forward
        self.fingerprint = check_mode(fingerprint)
        self._tracer: Any = None
        self._record: Optional[Dict[str, Any]] = None
        self._position: Optional[Dict[str, Any]] = None  # the batch sampler's state
        self._gathered: Optional[List[Dict[str, Any]]] = None
        self._resumed: Optional[Dict[str, Any]] = None
        self._micro: Optional[int] = None  # micro-batches per step; 0: draws not keyed
        self._seed: Optional[int] = None
        self._weights = WeightsLedger()

    # ------------------------------------------------------------ run record
    def before_run(self, runner) -> None:
        """Log the seed into the run's log, write the run record (rank 0); start the trace."""
        log_pending(runner)  # the seed line, if the Runner has not logged it yet
        if is_main_process():  # only rank 0 writes the record and checkpoints
            self._record = collect_run_record(runner, self.fingerprint)
            path = write_run_record(runner, self._record)
            runner.logger.info(f'mmrepro: run record written to {path}')
        if self.trace_interval:
            from ..trace import Tracer
            self._tracer = Tracer(runner, self.trace_interval, forward=self.trace_forward)

    def after_train(self, runner) -> None:
        """Log the digest of the weights training ended with; add it to the record."""
        if self._record is None:
            return
        final = self._weights.final(runner)
        self._write_record(runner)
        runner.logger.info(f"mmrepro: weights sha256 after iteration {final['iter']}: "
                           f"{final['sha256']} ({final['covers']}; compare with "
                           'mmrepro-digest CHECKPOINT)')

    def _write_record(self, runner) -> None:
        """The run record, with the weights digests so far, into the log dir."""
        write_run_record(runner, {**self._record, RECORD_KEY: self._weights.section()})

    def after_run(self, runner) -> None:
        """Close the trace."""
        if self._tracer is not None:
            self._tracer.close()
            self._tracer = None

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        """Key the model's draws to this micro-batch; let the trace hook into the step."""
        if self._micro is None:
            settings = getattr(runner, SETTINGS_ATTR, None) or {}
            self._micro = (accumulative_counts(runner.optim_wrapper)
                           if settings.get('global_stream') else 0)
            self._seed = settings.get('seed')
        if self._micro:
            seed_step(step_key(self._seed, runner.iter, get_rank(), self._micro))
        if self._tracer is not None:
            self._tracer.before_train_iter(runner, batch_idx, data_batch)

    # ----------------------------------------------------------------- saving
    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None,
                         outputs: Any = None) -> None:
        """Record the data position after this batch (and gather RNG if a save is due)."""
        if self._tracer is not None:
            self._tracer.after_train_iter(runner, batch_idx, outputs)
        loop = runner.train_loop
        if isinstance(loop, IterBasedTrainLoop):
            epoch = self._loader_epoch(runner)
            self._position = (self._consumed(runner, epoch, runner.iter + 1)
                              if epoch is not None else None)
        else:
            self._position = self._consumed(runner, runner.epoch, batch_idx + 1)
        self._gather_if_due(runner, by_epoch=False)

    def after_train_epoch(self, runner) -> None:
        """The next pass starts a new sampler epoch at batch 0."""
        if isinstance(runner.train_loop, EpochBasedTrainLoop):
            self._position = self._consumed(runner, runner.epoch + 1, 0)
        self._gather_if_due(runner, by_epoch=True)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Add the ``mmrepro`` section to the checkpoint being written (rank 0)."""
        settings = getattr(runner, SETTINGS_ATTR, None)
        if settings is None:
            return
        world_size = get_world_size()
        rng = self._gathered if self._gathered is not None else [ProcessRNGs().state_dict()]
        self._gathered = None
        if len(rng) != world_size:
            runner.logger.warning(
                'mmrepro: this checkpoint is saved outside CheckpointHook\'s schedule, so '
                'only rank 0\'s RNG state was captured; it will not resume exactly.')
            rng = [rng[0]] * world_size
        loop = 'iter' if isinstance(runner.train_loop, IterBasedTrainLoop) else 'epoch'
        if self._record is not None:
            checkpoint['meta']['run_record'] = json.loads(json.dumps(self._record, default=str))
            self._weights.saving(checkpoint)
            self._write_record(runner)
        checkpoint['mmrepro'] = build_section(
            settings['seed'], settings, world_size, self._batch_size(runner), loop,
            self._position, rng, PreprocessorState(runner.model).state_dict())

    # --------------------------------------------------------------- resuming
    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Validate the checkpoint's section against this run; keep it for restoring."""
        if not runner._resume:
            return
        section = checkpoint.get('mmrepro')
        if section is None:
            runner.logger.warning(
                'mmrepro: the checkpoint being resumed has no mmrepro state (written '
                'without mmrepro?). Cannot restore: ' + '; '.join(NOT_RESTORED) +
                '. The resumed run will not match an uninterrupted one bit for bit.')
            return
        section = check_section(section)
        mismatch = layout_changes(section, get_world_size(), self._batch_size(runner))
        if mismatch:
            scale = runner.auto_scale_lr or {}
            if not scale.get('enable', False):
                raise ValueError(
                    f"mmrepro: cannot resume exactly: {', '.join(mismatch)} between the "
                    'checkpoint and this run. Resume with the same number of processes and '
                    'train_dataloader.batch_size, or set auto_scale_lr=dict(enable=True, '
                    '...) to continue without bitwise reproducibility.')
            runner.logger.warning(
                f"mmrepro: {', '.join(mismatch)}; auto_scale_lr is enabled, so training "
                'continues, but RNG states and data position are not restored and the '
                'result will differ from an uninterrupted run.')
            return
        self._resumed = section

    def before_train(self, runner) -> None:
        """Restore RNG state and position the data right before the first new iteration."""
        section, self._resumed = self._resumed, None
        if section is None:
            return
        ProcessRNGs().load_state_dict(section['rng'][get_rank()])
        preprocessor = PreprocessorState(runner.model)
        preprocessor.load_state_dict(section.get('preprocessor', {}))
        if preprocessor.restored:
            runner.logger.info('mmrepro: restored the data preprocessor\'s '
                               f"{', '.join(preprocessor.restored)}")
        position = section.get('position')
        self._position = position
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
            if sampler.positioned == target:
                loop.dataloader_iterator = FastForwardIterator(loop.dataloader_iterator,
                                                               loop.iter)
            else:  # not positioned before the loop's iterator started: MMEngine replays
                runner.logger.info('mmrepro: the loader was built before the checkpoint '
                                   'was known; replaying the skipped batches instead.')
        else:
            if sampler.positioned != target:
                sampler.resume_at(*target)
            setattr(loop, OFFSET_ATTR, target[1])
        runner.logger.info(f'mmrepro: resumed RNG states and data position '
                           f"(sampler epoch {target[0]}, {target[1]} batches done).")

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _batch_size(runner) -> Optional[int]:
        loader = runner.train_dataloader
        return getattr(loader, 'batch_size', None) or getattr(
            loader.batch_sampler, 'batch_size', None)

    @staticmethod
    def _consumed(runner, epoch: int, batches: int) -> Dict[str, Any]:
        """Tell the train batch sampler what training consumed; return its state.

        Only the loop knows how many batches were trained on (the loader's workers
        draw ahead); a sampler that is not mmrepro's gets a position in its own batches.
        """
        sampler = runner.train_dataloader.batch_sampler
        if not isinstance(sampler, SeededBatchSampler):
            return rank_position(epoch, batches)
        sampler.consumed(epoch, batches)
        return sampler.state_dict()

    @staticmethod
    def _loader_epoch(runner) -> Optional[int]:
        """Sampler epoch for an iteration loop; None if the stream is not infinite."""
        sampler = runner.train_dataloader.batch_sampler
        if not isinstance(sampler, SeededBatchSampler):
            return None
        if hasattr(sampler.sampler, 'epoch'):  # a finite sampler restarted by the loop
            return None
        return sampler.current_epoch()

    def _gather_if_due(self, runner, by_epoch: bool) -> None:
        if get_world_size() == 1 or not self._checkpoint_due(runner, by_epoch):
            return
        self._gathered = all_gather_object(ProcessRNGs().state_dict())

    @staticmethod
    def _checkpoint_due(runner, by_epoch: bool) -> bool:
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
