"""``mmrepro-check CONFIG --against BASELINE``: does this machine reproduce a team's baseline?

1. **Before training**, this environment and config are compared with the baseline's run
   record (:mod:`.predicted`): what will keep the runs apart is listed, most decisive
   first; a config or data difference stops the check (status 1) unless ``go_on``.
2. **Then** the config is trained here, on this machine's layout (its global batch
   matched to the baseline's with ``accumulative_counts`` where needed), through the
   baseline's first traced optimizer steps, or from one of its checkpoints
   (``resume_from``) to its next traced step; every step is traced.
3. The traces are compared step by step (:func:`mmrepro.trace.compare.compare_steps`:
   samples, every micro-batch's losses, the applied gradients, the weights after the
   step), and the verdict says the baseline is reproduced bit for bit through iteration
   ``k`` (status 0), or where the data or the numerics part and why (status 1).
"""
from __future__ import annotations

import contextlib
import io
import os
import os.path as osp
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..data.global_stream import Layout, global_batch_fix
from ..resume.checkpoint_io import peek
from ..run.config import ConfigError
from ..trace import TRACE_NAME, read_trace
from ..trace.compare import TraceDiff, compare_steps, step_lines
from . import runs
from .predicted import (
    Obstacle,
    layout_of_record,
    obstacles,
    predicted_layout,
    predicted_record,
    rank_averaging_module,
)
from .run_data import RunData, load_run
from .runs import DEFAULT_ITERS, IN_PROCESS_LOCK, PROG, Run, check_launch, load_config, train


@dataclass
class AgainstOptions:
    """What to check against which baseline.

    Attributes:
        config: The train config file.
        baseline: The baseline's work dir (or log dir) or bundle.
        steps: Optimizer steps to train (None: the baseline's traced steps up to
            :data:`~mmrepro.checks.runs.DEFAULT_ITERS`, or to its next traced step
            after ``resume_from``).
        resume_from: One of the baseline's checkpoints to start from.
        go_on: Train although the config or the data differ.
        work_dir: Where the run goes (None: ``work_dirs/check_against/<config name>``).
        cfg_options: ``KEY=VALUE`` overrides, as for ``tools/train.py``.
        nproc: Processes launched by torchrun (0: one process, no launcher).
    """

    config: str
    baseline: str
    steps: Optional[int] = None
    resume_from: Optional[str] = None
    go_on: bool = False
    work_dir: Optional[str] = None
    cfg_options: List[str] = field(default_factory=list)
    nproc: int = 0

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
        check_launch(self.nproc, self.work_dir)


@dataclass
class AgainstResult:
    """What the check found.

    Attributes:
        status: 0 reproduces, 1 data or numerics differ (or config/data before
            training), 3 nothing to compare.
        verdict: The verdict line.
        obstacles: What the comparison before training found.
        trained: Whether a run was trained.
        steps: The optimizer steps compared.
        log_dir: The check run's log dir.
        seconds: Wall time of the training run.
    """

    status: int = 0
    verdict: str = ''
    obstacles: List[Obstacle] = field(default_factory=list)
    trained: bool = False
    steps: List[int] = field(default_factory=list)
    log_dir: Optional[str] = None
    seconds: float = 0.0


def run_against(options: AgainstOptions, say: Callable[..., None] = print) -> AgainstResult:
    """Compare, train, compare; report through ``say``; return what was found.

    Raises:
        ConfigError: The config cannot be loaded, or no layout here gives the baseline's
            global batch (nothing is written).
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
    world = max(options.nproc, 1)
    base_layout = layout_of_record(baseline.record)
    cfg_options = list(options.cfg_options)
    cfg = load_config(options.config, cfg_options, None, prog=PROG)
    layout = predicted_layout(cfg, world)
    if base_layout is not None and base_layout.global_batch != layout.global_batch:
        cfg_options.append(_matching_accumulation(base_layout, layout))
        cfg = load_config(options.config, cfg_options, world, prog=PROG)
        layout = predicted_layout(cfg, world)
    seed = (cfg.get('randomness') or {}).get('seed')  # None: the baseline's is pinned
    say(f'{PROG}: {options.config} against {options.baseline} (seed '
        f"{baseline.record.get('seed')}, {_layout_text(base_layout)})")
    say(f'  this run: {_layout_text(layout)}')
    result = AgainstResult()
    result.obstacles = obstacles(baseline.record, _predicted(cfg, world, baseline), layout,
                                 pinned_seed=seed is None, sync_bn='SyncBN' in cfg.pretty_text,
                                 averaging=rank_averaging_module(cfg.model))
    _say_obstacles(result.obstacles, say)
    blocking = [o for o in result.obstacles if o.blocking]
    if blocking and not options.go_on:
        result.status = 1
        result.verdict = (f'{blocking[0].kind} differs (before training): {blocking[0].text}; '
                          'pass --go-on to train and compare anyway')
        say(f'verdict: {result.verdict}')
        return result
    start, stop = _span(baseline, options)
    result.steps = [line['iter'] for line in step_lines(baseline.trace[1])
                    if start < line['iter'] <= stop]
    if not result.steps:
        raise ValueError(f'--against {options.baseline!r}: the baseline traced no optimizer '
                         f'step in {start + 1}..{stop}; choose --iters to reach one')
    train_seed = baseline.record.get('seed') if seed is None else seed
    result.log_dir, result.seconds = _train(options, cfg, cfg_options, train_seed, layout,
                                            start, stop, say)
    result.trained = True
    lines = read_trace(osp.join(result.log_dir, TRACE_NAME))[1]
    wanted = set(result.steps)
    diff = compare_steps([line for line in baseline.trace[1] if line.get('step') in wanted],
                         [line for line in lines if line.get('step') in wanted])
    result.status, result.verdict = _verdict(diff, baseline, options.baseline,
                                             result.obstacles)
    say(f'verdict: {result.verdict}')
    return result


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
            f'accumulative_counts {layout.micro} = global batch {layout.global_batch}')


def _predicted(cfg: Any, world: int, baseline: RunData) -> Dict[str, Any]:
    """This run's predicted record (the train dataset is built for its fingerprint)."""
    from mmengine.registry import DATASETS, init_default_scope
    mode = ((baseline.record.get('data') or {}).get('mode')) or 'labels'
    with IN_PROCESS_LOCK, contextlib.redirect_stdout(io.StringIO()):  # pycocotools' lines
        init_default_scope(cfg.get('default_scope', 'mmdet'))
        dataset = DATASETS.build(cfg.train_dataloader.dataset)
        return predicted_record(cfg, world, dataset, mode)


def _say_obstacles(found: List[Obstacle], say: Callable[..., None]) -> None:
    if not found:
        say('before training: nothing recorded differs from the baseline (config, data, '
            'library versions, CPU/GPU numerics, layout)')
        return
    say(f'before training: {len(found)} difference(s) from the baseline, most decisive '
        'first:')
    for obstacle in found:
        say(f'  {obstacle.kind}: {obstacle.text}')


def _span(baseline: RunData, options: AgainstOptions) -> Tuple[int, int]:
    """``(first step, last step)``: train after step ``first`` through step ``last``."""
    traced = [line['iter'] for line in step_lines(baseline.trace[1])]
    micro = int(baseline.trace[0].get('micro') or 1)
    start = 0
    if options.resume_from is not None:
        meta = (peek(options.resume_from) or {}).get('meta') or {}
        start = int(meta.get('iter', 0)) // micro
    if options.steps is not None:
        return start, start + options.steps
    if start == 0:
        early = [s for s in traced if s <= DEFAULT_ITERS]
        return 0, max(early) if early else DEFAULT_ITERS
    later = [s for s in traced if s > start]
    return start, later[0] if later else start + 1


def _train(options: AgainstOptions, cfg: Any, cfg_options: List[str], seed: Any,
           layout: Layout, start: int, stop: int,
           say: Callable[..., None]) -> Tuple[str, float]:
    """Write the child config and train it with ``seed`` (the config's own, or the
    baseline's where the config has none); return its log dir and the wall time."""
    work_dir = options.work_dir or osp.join(
        'work_dirs', 'check_against', osp.splitext(osp.basename(options.config))[0])
    os.makedirs(work_dir, exist_ok=True)
    child = osp.join(work_dir, 'check_against_config.py')
    what = (f'optimizer steps {start + 1}..{stop} from {options.resume_from}'
            if options.resume_from else f'optimizer steps 1..{stop}')
    with open(child, 'w') as f:
        f.write(child_config(cfg, options.config, options.baseline, what,
                             seed, stop * layout.micro))
    args = ['--resume', options.resume_from] if options.resume_from else []
    say(f'training {what} here ({stop - start} step(s) of {layout.micro} micro-batch(es)) '
        '...', end=' ', flush=True)
    begin = time.perf_counter()
    log_dir = train(Run('against', what, args=args), child, work_dir, cfg_options,
                    options.nproc)
    seconds = time.perf_counter() - begin
    say(f'{seconds:.1f} s')
    return log_dir, seconds


def child_config(cfg: Any, config: str, baseline: str, what: str, seed: Any,
                 stop_iter: int) -> str:
    """The text of the check run's config: the user's, traced at every step, stopped."""
    return runs.child_config(cfg, config, f'check_repro --against {baseline}',
                             f'{what}; every optimizer step traced, without validation or '
                             'checkpoints.', dict(trace_interval=1), stop_iter, 10**9,
                             dict(seed=seed))


def _sample(entry: Optional[str]) -> str:
    """A sample's name from its digest entry (``'img_id=3 <digest>'``)."""
    if not entry:
        return 'missing'
    return entry.rsplit(' ', 1)[0] if ' ' in entry else 'unnamed'


def _verdict(diff: TraceDiff, baseline: RunData, name: str,
             found: List[Obstacle]) -> Tuple[int, str]:
    """``(status, verdict line)`` of a step comparison."""
    iters = {line['iter']: line['run_iter'] for line in step_lines(baseline.trace[1])}

    def at(step: int) -> int:
        return iters.get(step, step)
    if not diff.common:
        return 3, 'inconclusive: no optimizer step was traced in both runs'
    if diff.data_iteration is not None:
        slot, a, b = diff.data_first
        why = '; '.join(o.text for o in found if o.kind in ('data', 'config')) or (
            'nothing recorded differs, so the data order or augmentation is not '
            'reproducible here')
        return 1, (f'data differs from iteration {at(diff.data_iteration)}: sample {slot} of '
                   f'the global batch ({_sample(a)} in the baseline, {_sample(b)} here), '
                   f'because {why}')
    if diff.identical:
        return 0, (f'reproduces {name} bit for bit through iteration {at(diff.common[-1])} '
                   f'({len(diff.common)} traced optimizer step(s): samples, losses, '
                   'gradients and weights)')
    section, where = diff.culprit() or ('losses', '?')
    causes = '; '.join(o.text for o in found) or (
        'none (an operation is nondeterministic, or a setting is not recorded: run '
        'mmrepro-check CONFIG on its own)')
    what = 'loss' if section == 'losses' else {'grad': 'gradient', 'weight': 'weight',
                                               'buffer': 'buffer'}.get(section, section)
    module = where.rsplit('.', 1)[0] if section != 'losses' else where
    return 1, (f'numerics differ from iteration {at(diff.iteration)}: first module '
               f'{module} ({what} of {where}); recorded causes: {causes}')
