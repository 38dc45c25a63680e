"""ReproducibilityHook: RNG state and data position in checkpoints, exact resume."""
from __future__ import annotations

from typing import Any, Dict, Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ..record.evaluation import EvaluationLedger
from ..record.fingerprint import check_mode
from ..record.recorder import RunRecorder
from ..resume.digests import seal
from ..resume.keeper import ResumeKeeper
from ..resume.rank_buffers import broadcast_buffers
from ..rng.seeding import get_rank
from ..rng.step_draws import seed_step, step_key
from ..run.state import find_state, log_pending


@HOOKS.register_module()
class ReproducibilityHook(Hook):
    """Write RNG state and data position into checkpoints; restore them on resume.

    Every checkpoint gets an ``mmrepro`` section (see
    :mod:`mmrepro.resume.section`): the seed, the python/numpy/torch/CUDA RNG
    states of every rank, the data position (sampler epoch and batches
    consumed) and the data preprocessor's state between iterations
    (:mod:`mmrepro.resume.preprocessor_state`: ``BatchSyncRandomResize``'s size). On resume
    the train loader skips the consumed batches at the index level, each rank's RNG
    states are restored right before the first unseen iteration, and the loop numbers
    batches as the original run did, so the resumed run ends with the same weights,
    byte for byte.

    It also writes the run record (:mod:`mmrepro.record.run_record`) into the log dir and
    every checkpoint's meta, and with ``trace_interval > 0`` records a trace of
    losses and parameter/gradient digests (:mod:`mmrepro.trace`) at the first
    optimizer steps (1, 2, 4, ...) and every ``trace_interval`` steps, so that two runs
    can be compared after the fact (``mmrepro-diff``) or early (``mmrepro-check
    --against``).

    Args:
        trace_interval: Record the trace at optimizer steps 1, 2, 4, ... below N, then
            every N steps; 0 turns it off. Defaults to 50, MMDetection's logging
            interval: about 0.14 % of the training time and one line of about 39 KiB
            per traced step for an R50-FPN detector (68 MiB over COCO 1x's 88,716
            iterations; ``docs/benchmarks.md``).
        trace_forward: Also record every module's forward output in the trace (names
            the first module whose output differs; ``tools/check_repro.py`` turns it
            on). Defaults to False.
        fingerprint: How the run record fingerprints each sample's files:
            ``'labels'`` (label files by content, images by size), ``'content'``
            (every file by content) or ``'stat'`` (every file by size); see
            :mod:`mmrepro.record.fingerprint`. Defaults to ``'labels'``.
        nudge_weights: Move every floating weight one ulp up or down right before
            the first step and after every step (:mod:`mmrepro.trace.nudge`): the run
            that measures the rounding envelope, which the checks train. Defaults to
            False.
        trace_sketches: Sketch the first 32 traced steps and the first iteration's
            module outputs (:mod:`mmrepro.trace.sketch`), what the rounding envelope
            compares. Defaults to True; ``mmrepro-check CONFIG`` turns it off for its
            runs, which it compares bit for bit.

    Its priority (85) places it after the logger and scheduler hooks and before
    ``CheckpointHook`` (VERY_LOW, 90), so the states it captures are those of the
    moment the checkpoint is written.

    It delegates each job: the run record and weights digests to
    :class:`~mmrepro.record.recorder.RunRecorder`, the trace to
    :class:`~mmrepro.trace.Tracer`, the model's keyed draws to
    :mod:`mmrepro.rng.step_draws`, saving and restoring to
    :class:`~mmrepro.resume.keeper.ResumeKeeper`.
    """

    # MMEngine names no priority between LOW (70) and VERY_LOW (90, CheckpointHook);
    # 85 runs after LoggerHook/ParamSchedulerHook and right before CheckpointHook.
    priority = 85

    def __init__(self, trace_interval: int = 50, trace_forward: bool = False,
                 fingerprint: str = 'labels', nudge_weights: bool = False,
                 trace_sketches: bool = True) -> None:
        if isinstance(trace_interval, bool) or not isinstance(trace_interval, int) or \
                trace_interval < 0:
            raise ValueError(
                f'ReproducibilityHook(trace_interval={trace_interval!r}): expected an int '
                '>= 0 (0 turns the trace off; N traces optimizer steps 1, 2, 4, ... below N, '
                'then every N-th step).')
        if not isinstance(trace_forward, bool):
            raise TypeError(f'ReproducibilityHook(trace_forward={trace_forward!r}): '
                            'expected True or False.')
        for name, value in (('nudge_weights', nudge_weights),
                            ('trace_sketches', trace_sketches)):
            if not isinstance(value, bool):
                raise TypeError(f'ReproducibilityHook({name}={value!r}): expected True or '
                                'False.')
        self.trace_interval = trace_interval
        self.trace_forward = trace_forward
        self.nudge_weights = nudge_weights
        self.trace_sketches = trace_sketches
        self.fingerprint = check_mode(fingerprint)
        self._tracer: Any = None
        self._recorder = RunRecorder(self.fingerprint)
        self._keeper = ResumeKeeper()
        self._evaluations = EvaluationLedger()
        self._said_buffers = False

    def before_run(self, runner) -> None:
        """Log the seed into the run's log, write the run record (rank 0); start the trace."""
        log_pending(runner)  # the seed line, if the Runner has not logged it yet
        state = find_state(runner)
        kind = state.entry if state is not None else 'train'
        self._recorder.start(runner, kind)
        if self.trace_interval and kind == 'train':
            from ..trace import Tracer
            self._tracer = Tracer(runner, self.trace_interval, forward=self.trace_forward,
                                  sketches=self.trace_sketches)

    def before_train(self, runner) -> None:
        """Restore RNG state and position the data right before the first new iteration;
        record the weights training starts from."""
        self._keeper.before_train(runner)
        if self.nudge_weights:
            count = self._nudge(runner)
            runner.logger.info(f'mmrepro: {count} weight values moved one ulp up or down '
                               'before the first step and after every step (nudge_weights: '
                               'the rounding envelope run)')
        self._recorder.starting(runner)

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        """Key the model's draws to this micro-batch; let the trace hook into the step."""
        state = find_state(runner)
        if state is not None and state.keyed_accumulation:
            seed_step(step_key(state.settings.seed, runner.iter, get_rank(),
                               state.keyed_accumulation))
        if self._tracer is not None:
            self._tracer.before_train_iter(runner, batch_idx, data_batch)

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None,
                         outputs: Any = None) -> None:
        """Write the trace line; record the data position after this batch."""
        if self._tracer is not None:
            self._tracer.after_train_iter(runner, batch_idx, outputs)
        self._keeper.after_train_iter(runner, batch_idx)
        if self.nudge_weights:
            state = find_state(runner)
            accumulation = state.layout.accumulation if state is not None and state.layout else 1
            if (runner.iter + 1) % accumulation == 0:  # after a step
                self._nudge(runner, (runner.iter + 1) // accumulation)

    @staticmethod
    def _nudge(runner, step: int = 0) -> int:
        """Move every weight one ulp (:func:`~mmrepro.trace.nudge.nudge_weights`)."""
        from mmengine.model import is_model_wrapper

        from ..trace.nudge import nudge_weights
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        return nudge_weights(model, step)

    def after_train_epoch(self, runner) -> None:
        """The next pass starts a new sampler epoch at batch 0."""
        self._keeper.after_train_epoch(runner)

    def after_train(self, runner) -> None:
        """Log the digest of the weights training ended with; add it to the record."""
        self._recorder.finish(runner)

    def after_run(self, runner) -> None:
        """Close the trace."""
        if self._tracer is not None:
            self._tracer.close()
            self._tracer = None

    # ------------------------------------------------------------- evaluation
    def before_val_epoch(self, runner) -> None:
        """Give every rank rank 0's buffers (the checkpoint's); start digesting."""
        sent = broadcast_buffers(runner)
        if sent and not self._said_buffers:
            self._said_buffers = True
            runner.logger.info(f"mmrepro: every rank evaluates with rank 0's {sent} "
                               'buffers (BatchNorm statistics...), which the checkpoint '
                               'holds; broadcast before every evaluation and checkpoint')
        self._evaluations.begin()

    def after_val_iter(self, runner, batch_idx: int, data_batch: Any = None,
                       outputs: Any = None) -> None:
        """Digest this batch's predictions."""
        self._evaluations.add(outputs)

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, Any]] = None) -> None:
        """Record the validation: metrics and predictions digest (gathers every rank)."""
        self._evaluated(runner, 'val', metrics)

    # A test starts and digests as a validation does; only its record entry differs.
    before_test_epoch = before_val_epoch
    after_test_iter = after_val_iter

    def after_test_epoch(self, runner, metrics: Optional[Dict[str, Any]] = None) -> None:
        """Record the test: metrics and predictions digest (gathers every rank)."""
        self._evaluated(runner, 'test', metrics)

    def _evaluated(self, runner, kind: str, metrics: Optional[Dict[str, Any]]) -> None:
        from mmengine.runner import BaseLoop
        loop = runner.val_loop if kind == 'val' else runner.test_loop
        dataset = getattr(getattr(loop, 'dataloader', None), 'dataset', None)
        # Runner.iter would build the train loop of a run that only evaluates
        trained = isinstance(getattr(runner, '_train_loop', None), BaseLoop)
        entry, images = self._evaluations.finish(
            kind, dataset, metrics, runner.iter if trained else None,
            runner.epoch if trained else None)
        self._recorder.evaluated(runner, entry, images)
        runner.logger.info(f"mmrepro: {kind} predictions sha256 after iteration "
                           f"{entry['iter']}: {entry['predictions_sha256']} "
                           f"({entry['images']} images)")

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Add the ``mmrepro`` section, the digests of what a resume restores
        (:func:`~mmrepro.resume.digests.seal`) and the run record to the checkpoint."""
        state = find_state(runner)
        if state is None or not state.enabled:
            return
        self._keeper.before_save_checkpoint(runner, checkpoint)
        self._recorder.saving(runner, checkpoint, seal(checkpoint))

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Validate the checkpoint's section against this run; keep it for restoring;
        record how it compared with its digests."""
        self._keeper.after_load_checkpoint(runner, checkpoint)
        if getattr(runner, '_resume', False):
            self._recorder.resumed(checkpoint)
        else:
            self._recorder.loaded(runner, checkpoint)
        state = find_state(runner)
        if state is not None and state.verification is not None:
            self._recorder.verified(runner, state.verification.record(
                allowed=not state.settings.verify_checkpoints))
