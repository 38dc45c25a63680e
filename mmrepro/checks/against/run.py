"""``mmrepro-check [CONFIG] --against BASELINE``: does this machine reproduce a baseline?

Without CONFIG the baseline's own config is trained: the config dump of its first log
dir, copied into the check's work dir.

1. **Before training**, this environment and config are compared with the baseline's run
   record (:mod:`.predicted`): what will keep the runs apart is listed, most decisive
   first, each with its fix; a config or data difference (a config without a seed
   included: the check would pin the baseline's, a real run draws one) stops the check
   (status 1) unless ``go_on``.
2. **Then** the config is trained here, on this machine's layout (its global batch
   matched to the baseline's with ``accumulative_counts`` where needed), through the
   baseline's first traced optimizer steps, or from one of its checkpoints
   (``resume_from``) to its next traced step; every step is traced.
3. The traces are compared step by step (:func:`mmrepro.trace.compare.compare_steps`:
   samples, every micro-batch's losses, the applied gradients, the weights after the
   step), and the verdict (:mod:`.verdict`) says the baseline is reproduced
   bit for bit through iteration ``k`` (status 0), or where the data or the numerics
   part and why (status 1), followed by the next step for each cause.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os.path as osp
import shutil
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ...record.initial_weights import initial_differences
from ...record.run_record import RECORD_NAME, RunRecordError, load_run_record
from ...resume.checkpoint_io import peek
from ...resume.preflight import build_offline
from ...resume.verification import check_intact
from ...run.config import ConfigError
from ...run.layout import Layout, global_batch_fix
from ...trace import TRACE_NAME, read_trace
from ...trace.compare import compare_steps, step_lines
from ..envelope import Rounding, judge_rounding, say_rounding
from ..real_runs import Cause, cause_lines, real_run_causes
from ..run_data import RunData, load_run
from ..runs import (
    DEFAULT_ITERS,
    IN_PROCESS_LOCK,
    PROG,
    check_launch,
    load_config,
    prepare_work_dir,
    previous_check,
)
from .predicted import (
    INITIAL_FIX,
    Obstacle,
    layout_of_record,
    obstacles,
    predicted_layout,
    predicted_record,
    rank_averaging_module,
)
from .span import Span, train_span
from .verdict import NUMERICS, fix_steps, judge_steps, rounding_verdict, seed_obstacle

#: Where a check without CONFIG keeps the baseline's config dump it trains.
BASELINE_CONFIG = 'baseline_config.py'


@dataclass
class AgainstOptions:
    """What to check against which baseline.

    Attributes:
        config: The train config file (None: the baseline's own, its config dump).
        baseline: The baseline's work dir (or log dir) or bundle.
        steps: Optimizer steps to train (None: the baseline's traced steps up to
            :data:`~mmrepro.checks.runs.DEFAULT_ITERS`, or to its next traced step
            after ``resume_from``).
        resume_from: One of the baseline's checkpoints to start from.
        go_on: Train although the config or the data differ.
        work_dir: Where the run goes (None: ``work_dirs/check_against/<config name>``, or
            the baseline's name where ``config`` is None).
        cfg_options: ``KEY=VALUE`` overrides, as for ``tools/train.py``.
        nproc: Processes launched by torchrun (0: one process, no launcher).
        bitwise: Require bit for bit: a run equivalent within rounding fails (status 1).
        envelope: Train the rounding envelope's run even where the run is bitwise (for
            ``mmrepro-diff``, which compares other runs with it).
    """

    config: Optional[str]
    baseline: str
    steps: Optional[int] = None
    resume_from: Optional[str] = None
    go_on: bool = False
    work_dir: Optional[str] = None
    cfg_options: List[str] = field(default_factory=list)
    nproc: int = 0
    bitwise: bool = False
    envelope: bool = False

    def validate(self) -> None:
        """Check the options before anything is read or trained.

        Raises:
            ValueError: With a message saying what is wrong and how to fix it.
        """
        if self.steps is not None and self.steps < 1:
            raise ValueError(f'--iters must be >= 1, got {self.steps}')
        if not osp.exists(self.baseline):
            raise ValueError(f'--against {self.baseline!r}: no such work dir or bundle; give '
                             "the baseline's work dir or the file mmrepro-bundle wrote")
        if self.resume_from is not None and not osp.isfile(self.resume_from):
            raise ValueError(f'--from {self.resume_from!r}: no such checkpoint file; give one '
                             "of the baseline's checkpoints (iter_N.pth or epoch_N.pth)")
        if self.resume_from is not None:
            check_intact(self.resume_from, True, f'--from {self.resume_from!r}',
                         "give an intact copy of the baseline's checkpoint")
        check_launch(self.nproc, self.work_dir)


@dataclass
class AgainstResult:
    """What the check found.

    Attributes:
        status: 0 reproduces, 1 data or numerics differ (or config/data before
            training), 3 nothing to compare.
        verdict: The verdict line.
        obstacles: What the comparison before training found.
        causes: What real runs of the config do that the check's run did not
            (:func:`~mmrepro.checks.real_runs.real_run_causes`).
        next_steps: The ``next:`` lines said after the verdict.
        trained: Whether a run was trained.
        steps: The optimizer steps compared.
        log_dir: The check run's log dir.
        seconds: Wall time of the training runs.
        rounding: Where the run is not bitwise: rounding or real, with the evidence.
        nudged_dir: The log dir of the rounding envelope's run, where one was trained.
    """

    status: int = 0
    verdict: str = ''
    obstacles: List[Obstacle] = field(default_factory=list)
    causes: List[Cause] = field(default_factory=list)
    next_steps: List[str] = field(default_factory=list)
    trained: bool = False
    steps: List[int] = field(default_factory=list)
    log_dir: Optional[str] = None
    seconds: float = 0.0
    rounding: Optional[Rounding] = None
    nudged_dir: Optional[str] = None


def run_against(options: AgainstOptions, say: Callable[..., None] = print) -> AgainstResult:
    """Compare, train, compare; report through ``say``; return what was found.

    Raises:
        ConfigError: The config cannot be loaded, or no layout here gives the baseline's
            global batch (nothing is written).
        ValueError: The baseline holds nothing to compare, or the work dir holds files
            no check wrote (nothing is written).
        RunRecordError, TraceError, BundleError: The baseline cannot be read.
        RuntimeError: The training run failed (the message names its log).
    """
    baseline = load_run('baseline', options.baseline)
    if baseline.record is None:
        raise ValueError(f'--against {options.baseline!r}: the baseline has no run record '
                         '(trained without mmrepro?), so there is nothing to compare')
    if not baseline.trace:
        raise ValueError(f'--against {options.baseline!r}: the baseline has no trace '
                         '(trained with trace_interval=0?), so there is nothing to compare')
    if not step_lines(baseline.trace[1]):
        raise ValueError(f'--against {options.baseline!r}: the baseline\'s trace has no '
                         'optimizer-step records (written by an earlier mmrepro release); '
                         'train the baseline with this release, or compare two runs with '
                         'mmrepro-diff')
    config = options.config or baseline_config(baseline)
    work_dir = options.work_dir or osp.join('work_dirs', 'check_against', _stem(
        options.config or options.baseline))
    previous_check(work_dir)
    world = max(options.nproc, 1)
    base_layout = layout_of_record(baseline.record)
    cfg_options = list(options.cfg_options)
    cfg = load_config(config, cfg_options, None, prog=PROG)
    layout = predicted_layout(cfg, world)
    if base_layout is not None and base_layout.global_batch != layout.global_batch:
        cfg_options.append(_matching_accumulation(base_layout, layout))
        cfg = load_config(config, cfg_options, world, prog=PROG)
        layout = predicted_layout(cfg, world)
    seed = (cfg.get('randomness') or {}).get('seed')  # None: the baseline's is pinned
    base_seed = baseline.record.get('seed')
    shown = options.config or "the baseline's config " \
        f'({osp.relpath(config, osp.dirname(baseline.log_dir))})'
    say(f'{PROG}: {shown} against {options.baseline} (seed {base_seed}, '
        f'{_layout_text(base_layout)})')
    say(f'  this run: {_layout_text(layout)}')
    result = AgainstResult()
    predicted = _predicted(cfg, world, baseline, initial=options.resume_from is None)
    result.obstacles = obstacles(baseline.record, predicted, layout,
                                 pinned_seed=seed is None, sync_bn='SyncBN' in cfg.pretty_text,
                                 averaging=rank_averaging_module(cfg.model))
    if seed is None:
        result.obstacles.insert(0, seed_obstacle(base_seed))
    _say_obstacles(result.obstacles, say)
    result.causes = real_run_causes(cfg, None)
    for line in cause_lines(result.causes):
        say(line)
    blocking = [o for o in result.obstacles if o.blocking]
    if blocking and not options.go_on:
        result.status = 1
        verb = 'differ' if blocking[0].kind.endswith('s') else 'differs'
        result.verdict = (f'{blocking[0].kind} {verb} (before training): {blocking[0].text}; '
                          'pass --go-on to train and compare anyway')
        result.next_steps = fix_steps(blocking)
        _say_verdict(result, say)
        return result
    start, stop = _span(baseline, options)
    result.steps = [line['iter'] for line in step_lines(baseline.trace[1])
                    if start < line['iter'] <= stop]
    if not result.steps:
        raise ValueError(f'--against {options.baseline!r}: the baseline traced no optimizer '
                         f'step in {start + 1}..{stop}; choose --iters to reach one')
    prepare_work_dir(work_dir, say)
    if options.config is None:  # the baseline's dump, kept beside the run that uses it
        config = shutil.copy(config, osp.join(work_dir, BASELINE_CONFIG))
        say(f"  the baseline's config: {config}")
    span = Span(options, config, work_dir, cfg, cfg_options,
                base_seed if seed is None else seed, layout, start, stop)
    result.log_dir, result.seconds = train_span(span, say)
    result.trained = True
    _started_otherwise(result, baseline)
    lines = read_trace(osp.join(result.log_dir, TRACE_NAME))[1]
    wanted = set(result.steps)
    base_lines = [line for line in baseline.trace[1] if line.get('iter') == 1
                  or line.get('step') in wanted]
    diff = compare_steps(base_lines, [line for line in lines if line.get('step') in wanted])
    result.status, result.verdict, result.next_steps = judge_steps(
        diff, baseline, options.baseline, result.obstacles, result.causes,
        base_seed if seed is None else None,
        options.config or osp.join(work_dir, BASELINE_CONFIG))
    numerics = result.verdict.startswith(NUMERICS)
    if numerics or options.envelope:
        result.nudged_dir, seconds = train_span(span, say, nudge=True)
        result.seconds += seconds
        result.rounding = judge_rounding(
            base_lines, lines, lines, read_trace(osp.join(result.nudged_dir, TRACE_NAME))[1],
            baseline.trace[0].get('modules'))
    if numerics:
        say_rounding(result.rounding, say)
        result.status, result.verdict = rounding_verdict(result.verdict, result.rounding,
                                                         options.bitwise)
    _say_verdict(result, say)
    return result


def baseline_config(baseline: RunData) -> str:
    """The config dump the baseline started from: its first log dir's (the log dir's,
    where one log dir was given).

    Raises:
        ValueError: The baseline holds no config dump.
    """
    if osp.isfile(osp.join(baseline.path, RECORD_NAME)):
        log_dirs = [baseline.log_dir]
    else:
        log_dirs = sorted(osp.dirname(p) for p in glob.glob(osp.join(
            glob.escape(osp.dirname(baseline.log_dir)), '*', RECORD_NAME)))
    for log_dir in log_dirs:
        dump = osp.join(log_dir, 'vis_data', 'config.py')
        if osp.isfile(dump):
            return dump
    raise ValueError(f'--against {baseline.path!r}: the baseline holds no config dump '
                     '(vis_data/config.py in its log dir), so there is no config to train; '
                     f'give it: mmrepro-check CONFIG --against {baseline.path}')


def _stem(path: str) -> str:
    """A config's or a baseline's name, for the default work dir."""
    name = osp.basename(osp.normpath(path))
    for suffix in ('.tar.gz', '.tgz', '.py'):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def _matching_accumulation(base: Layout, layout: Layout) -> str:
    """The ``--cfg-options`` entry that gives this layout the baseline's global batch.

    Raises:
        ConfigError: No ``accumulative_counts`` can (saying what to set instead).
    """
    per_step = layout.batch_size * layout.world_size
    if base.global_batch % per_step:
        raise ConfigError(
            f'the baseline trains global batches of {base.global_batch} samples, this run '
            f'{layout.global_batch} ({layout.world_size} rank(s) x batch_size '
            f'{layout.batch_size}), and no accumulative_counts gives {base.global_batch}: '
            f'{global_batch_fix(base.global_batch, layout.world_size)}')
    return f'optim_wrapper.accumulative_counts={base.global_batch // per_step}'


def _layout_text(layout: Optional[Layout]) -> str:
    if layout is None:
        return 'layout not recorded'
    return (f'{layout.world_size} rank(s) x batch_size {layout.batch_size} x '
            f'accumulative_counts {layout.accumulation} = global batch {layout.global_batch}')


def _predicted(cfg: Any, world: int, baseline: RunData, initial: bool) -> Dict[str, Any]:
    """This run's predicted record (the train dataset is built for its fingerprint and
    decode canary; with ``initial``, the model without weights, for its initial files)."""
    from mmengine.registry import DATASETS, init_default_scope
    mode = ((baseline.record.get('data') or {}).get('mode')) or 'labels'
    with IN_PROCESS_LOCK, contextlib.redirect_stdout(io.StringIO()):  # pycocotools' lines
        init_default_scope(cfg.get('default_scope', 'mmdet'))
        dataset = DATASETS.build(cfg.train_dataloader.dataset)
        model = build_offline(cfg) if initial else None
        return predicted_record(cfg, world, dataset, mode, model=model)


def _started_otherwise(result: AgainstResult, baseline: RunData) -> None:
    """Where the check's run started from other weights than the baseline (its run
    record's ``initial`` section), say so first among the obstacles."""
    if any(o.kind == 'initial weights' for o in result.obstacles):
        return
    try:
        own, _ = load_run_record(result.log_dir)
    except RunRecordError:
        return
    texts = initial_differences(baseline.record, own)
    result.obstacles[:0] = [Obstacle('initial weights', text, INITIAL_FIX) for text in texts]


def _say_obstacles(found: List[Obstacle], say: Callable[..., None]) -> None:
    if not found:
        say('before training: nothing recorded differs from the baseline (initial weights, '
            'config, data, decoded images, code, library versions, CPU/GPU numerics, '
            'layout)')
        return
    say(f'before training: {len(found)} difference(s) from the baseline, most decisive '
        'first:')
    for i, obstacle in enumerate(found):
        say(f'  {obstacle.kind}: {obstacle.text}')
        if obstacle.fix and (i + 1 == len(found) or found[i + 1].fix != obstacle.fix):
            say(f'    fix: {obstacle.fix}')  # once for a run of obstacles with one fix


def _say_verdict(result: AgainstResult, say: Callable[..., None]) -> None:
    """The verdict line, then its ``next:`` lines."""
    say(f'verdict: {result.verdict}')
    for step in result.next_steps:
        say(step)


def _span(baseline: RunData, options: AgainstOptions) -> Tuple[int, int]:
    """``(first step, last step)``: train after step ``first`` through step ``last``."""
    traced = [line['iter'] for line in step_lines(baseline.trace[1])]
    accumulation = int(baseline.trace[0].get('micro') or 1)
    start = 0
    if options.resume_from is not None:
        meta = (peek(options.resume_from) or {}).get('meta') or {}
        start = int(meta.get('iter', 0)) // accumulation
    if options.steps is not None:
        return start, start + options.steps
    if start == 0:
        early = [s for s in traced if s <= DEFAULT_ITERS]
        return 0, max(early) if early else DEFAULT_ITERS
    later = [s for s in traced if s > start]
    return start, later[0] if later else start + 1
