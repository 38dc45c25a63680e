"""Is this config reproducible here? Train it twice (and resumed, and with other workers).

Each run is ``tools/train.py`` in a subprocess (:mod:`.runs`) on a generated child config
that inherits the given one and changes only what the check needs: the training loop is
left as it is and :class:`~mmrepro.hooks.CheckReproStopHook` ends the process after
``iters`` iterations; validation is off, the logger writes every iteration, checkpoints
are saved by iteration, the trace (:mod:`mmrepro.trace`) records every iteration, a seed
is pinned if the config has none, and in deterministic mode ``randomness.warn_only=True``
makes PyTorch report its nondeterministic operations instead of stopping at the first
one. Optionally a third run resumes the first from its middle checkpoint
(``resume_check``) and a fourth uses another ``num_workers`` (``workers_check``).
"""
from __future__ import annotations

import os
import os.path as osp
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ..record.run_record import diff_records, load_run_record
from ..trace import TRACE_NAME, compare_traces, describe_diff, read_trace
from . import runs
from .nondeterminism import report_nondeterminism
from .runs import (
    DEFAULT_ITERS,
    PROG,
    Run,
    check_launch,
    deterministic,
    load_config,
    seed_of,
    train,
)


@dataclass
class CheckOptions:
    """What to check.

    Attributes:
        config: The train config file.
        iters: Iterations per run.
        work_dir: Where the runs go (None: ``work_dirs/check_repro/<config name>``).
        cfg_options: ``KEY=VALUE`` overrides, as for ``tools/train.py``.
        resume_check: Also resume the first run from its middle checkpoint.
        workers_check: Also train with ``train_dataloader.num_workers`` set to this.
        nproc: Processes per run launched by torchrun (0: one process, no launcher).
    """

    config: str
    iters: int = DEFAULT_ITERS
    work_dir: Optional[str] = None
    cfg_options: List[str] = field(default_factory=list)
    resume_check: bool = False
    workers_check: Optional[int] = None
    nproc: int = 0

    def validate(self) -> None:
        """Check the options before anything is trained.

        Raises:
            ValueError: With a message saying what is wrong and how to fix it.
        """
        if self.iters < 1:
            raise ValueError(f'--iters must be >= 1, got {self.iters}')
        if self.resume_check and self.iters < 2:
            raise ValueError(f'--resume-check resumes in the middle of the run, so it needs '
                             f'--iters >= 2, got {self.iters}')
        if self.workers_check is not None and self.workers_check < 0:
            raise ValueError(f'--workers-check must be >= 0, got {self.workers_check}')
        check_launch(self.nproc, self.work_dir)


@dataclass
class CheckResult:
    """What a check found.

    Attributes:
        status: The exit status: 0 every comparison bit-identical, 1 a run diverged.
        work_dir: Where the runs are.
        log_dirs: Run name -> its log dir.
        failed: Descriptions of the runs that diverged.
        alerts: PyTorch operation -> the runs that hit it.
        audit: The mmcv op audit's entries, or an error string.
    """

    status: int = 0
    work_dir: str = ''
    log_dirs: Dict[str, str] = field(default_factory=dict)
    failed: List[str] = field(default_factory=list)
    alerts: Dict[str, List[str]] = field(default_factory=dict)
    audit: Any = None


def child_config(cfg: Any, config: str, iters: int, ckpt_interval: int) -> str:
    """The text of the child config (see the module docstring)."""
    randomness = dict(seed=seed_of(cfg))
    if deterministic(cfg):
        randomness['warn_only'] = True
    return runs.child_config(
        cfg, config, 'check_repro', f'stopped after {iters} iterations, without '
        'validation, traced at every iteration.', dict(trace_interval=1, trace_forward=True),
        iters, ckpt_interval, randomness)


def plan_runs(options: CheckOptions) -> List[Run]:
    """The runs to train: ``run_a``, ``run_b``, then the optional checks."""
    runs = [Run('run_a', 'reference'), Run('run_b', 'rerun')]
    if options.resume_check:
        middle = options.iters // 2
        ckpt = osp.join(options.work_dir, 'run_a', f'iter_{middle}.pth')
        runs.append(Run('resume', f'run_a resumed from iter_{middle}.pth',
                        args=['--resume', ckpt],
                        expected=('config.resume', 'config.load_from')))
    if options.workers_check is not None:
        k = options.workers_check
        runs.append(Run(f'workers{k}', f'num_workers={k}', cfg_options=[
            f'train_dataloader.num_workers={k}',
            f'train_dataloader.persistent_workers={k > 0}'], expected=(
            'config.train_dataloader.num_workers',
            'config.train_dataloader.persistent_workers')))
    return runs


def record_differences(reference: str, other: str, run: Run) -> List[str]:
    """Run record keys that differ from the reference run although they should not."""
    record_a, _ = load_run_record(reference)
    record_b, _ = load_run_record(other)
    return [f'{key}: {value_a!r} -> {value_b!r}'
            for key, value_a, value_b in diff_records(record_a, record_b)
            if key not in run.expected and key != 'config_sha256']


def run_check(options: CheckOptions, say: Callable[..., None] = print) -> CheckResult:
    """Train, compare and report through ``say``; return what was found.

    Raises:
        ConfigError: The config cannot be loaded or is invalid (nothing was written).
        RuntimeError: A training run failed (the message names its log).
    """
    # Checked before anything is written or trained.
    cfg = load_config(options.config, options.cfg_options, options.nproc or 1)
    options.work_dir = options.work_dir or osp.join(
        'work_dirs', 'check_repro', osp.splitext(osp.basename(options.config))[0])
    os.makedirs(options.work_dir, exist_ok=True)
    ckpt_interval = max(options.iters // 2, 1) if options.resume_check else options.iters
    child = osp.join(options.work_dir, 'check_repro_config.py')
    with open(child, 'w') as f:
        f.write(child_config(cfg, options.config, options.iters, ckpt_interval))
    seed = (cfg.get('randomness') or {}).get('seed')
    say(f'{PROG}: {options.config}: {options.iters} iteration(s) per run, traced at every '
        f'iteration; seed {seed_of(cfg)}{" (the config has none)" if seed is None else ""}, '
        f'deterministic={deterministic(cfg)}')
    say(f'  work dir: {options.work_dir} (child config {child})')
    if options.nproc:
        say(f'  every run: {options.nproc} processes launched by torch.distributed.run')
    runs = plan_runs(options)
    result = CheckResult(work_dir=options.work_dir)
    logs: Dict[str, str] = {}
    for i, run in enumerate(runs, 1):
        start = time.perf_counter()
        say(f'[{i}/{len(runs)}] {run.name} ({run.description}) ...', end=' ', flush=True)
        result.log_dirs[run.name] = train(run, child, options.work_dir, options.cfg_options,
                                          options.nproc)
        logs[run.name] = osp.join(options.work_dir, f'{run.name}.log')
        say(f'{time.perf_counter() - start:.1f} s')
    header, lines_a = read_trace(osp.join(result.log_dirs['run_a'], TRACE_NAME))
    say()
    for run in runs[1:]:
        other = read_trace(osp.join(result.log_dirs[run.name], TRACE_NAME))[1]
        diff = compare_traces(lines_a, other)
        lines = describe_diff(diff, header.get('modules'), 'run_a', run.name)
        say(f'{run.name} vs run_a: {lines[0]}')
        for line in lines[1:]:
            say(line)
        unexpected = record_differences(result.log_dirs['run_a'], result.log_dirs[run.name],
                                        run)
        if unexpected:
            say(f'  run records differ from run_a: {"; ".join(unexpected[:6])}'
                + (f' (+{len(unexpected) - 6} more)' if len(unexpected) > 6 else ''))
        if not diff.identical:
            result.failed.append(f'{run.name} ({run.description}) ' + (
                f'diverges at iteration {diff.iteration}' if diff.common else
                'has no iteration in common with run_a'))
    say()
    found: Dict[str, Any] = {}
    for line in report_nondeterminism(cfg, logs, found):
        say(line)
    result.alerts, result.audit = found['alerts'], found['audit']
    say()
    if result.failed:
        say(f'result: NOT REPRODUCIBLE: {"; ".join(result.failed)}')
        result.status = 1
    else:
        say(f'result: REPRODUCIBLE: {len(runs) - 1} comparison(s) bit-identical')
    return result
