"""Is this config reproducible here? Train it twice (and resumed, and with other workers).

Each run is ``tools/train.py`` in a subprocess (:mod:`..runs`) on a generated child config
that inherits the given one and changes only what the check needs: the training loop is
left as it is and :class:`~mmrepro.hooks.CheckReproStopHook` ends the process after
``iters`` iterations; validation is off, the logger writes every iteration (each is
reported as it is trained), checkpoints are saved by iteration, the trace
(:mod:`mmrepro.trace`) records every iteration, a seed is pinned if the config has none,
and in deterministic mode ``randomness.warn_only=True`` makes PyTorch report its
nondeterministic operations instead of stopping at the first one. Optionally a third run
resumes the first from its middle checkpoint (``resume_check``) and a fourth uses
another ``num_workers`` (``workers_check``).

The runs are compared, and what real runs of the config would do that the check's did
not (no seed, ``deterministic=False``, an operation a real run stops at:
:mod:`..real_runs`) keeps the config from being called reproducible (:mod:`.verdict`).
Every cause comes with a ``next:`` line saying what removes it. The work dir is the check's own (a
previous check's is replaced, any other non-empty directory refused), and its
checkpoints are deleted once compared, but the one a diverging resume run started from.
"""
from __future__ import annotations

import os.path as osp
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ...determinism.compile import backend_name, compile_options
from ...record.run_record import diff_records, load_run_record
from ...trace import TRACE_NAME, compare_traces, describe_diff, read_trace
from .. import runs
from ..real_runs import cause_lines, real_run_causes
from ..runs import (
    DEFAULT_ITERS,
    PROG,
    Run,
    check_launch,
    deterministic,
    load_config,
    prepare_work_dir,
    previous_check,
    progress,
    remove_checkpoints,
    seed_of,
    train,
)
from .nondeterminism import report_nondeterminism
from .verdict import CheckResult, divergence_step, generator_lines, say_result


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
        keep_checkpoints: Keep the runs' checkpoints (False: delete them once compared,
            but the one a diverging resume run started from).
    """

    config: str
    iters: int = DEFAULT_ITERS
    work_dir: Optional[str] = None
    cfg_options: List[str] = field(default_factory=list)
    resume_check: bool = False
    workers_check: Optional[int] = None
    nproc: int = 0
    keep_checkpoints: bool = True

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


def child_config(cfg: Any, config: str, iters: int, ckpt_interval: int) -> str:
    """The text of the child config (see the module docstring)."""
    randomness = dict(seed=seed_of(cfg))
    if deterministic(cfg):
        randomness['warn_only'] = True
    return runs.child_config(
        cfg, config, 'check_repro', f'stopped after {iters} iterations, without '
        'validation, traced at every iteration.',
        dict(trace_interval=1, trace_forward=True, trace_sketches=False),
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
        ValueError: The work dir holds files no check wrote (nothing was written).
        RuntimeError: A training run failed (the message names its log).
    """
    # Checked before anything is written or trained.
    cfg = load_config(options.config, options.cfg_options, options.nproc or 1)
    options.work_dir = options.work_dir or osp.join(
        'work_dirs', 'check_repro', osp.splitext(osp.basename(options.config))[0])
    previous_check(options.work_dir)
    ckpt_interval = max(options.iters // 2, 1) if options.resume_check else options.iters
    seed = (cfg.get('randomness') or {}).get('seed')
    say(f'{PROG}: {options.config}: {options.iters} iteration(s) per run, traced at every '
        f'iteration; seed {seed_of(cfg)}'
        f'{" (the config has none: the check pins it)" if seed is None else ""}, '
        f'deterministic={deterministic(cfg)}')
    compiled = compile_options(cfg.get('compile'))
    if compiled is not None:
        say(f'  compile: train_step runs compiled ({backend_name(compiled)}): the trace holds '
            'no module outputs, so a difference is named by its first gradient or weight')
    prepare_work_dir(options.work_dir, say)
    child = osp.join(options.work_dir, 'check_repro_config.py')
    with open(child, 'w') as f:
        f.write(child_config(cfg, options.config, options.iters, ckpt_interval))
    say(f'  work dir: {options.work_dir} (child config {child})')
    if options.nproc:
        say(f'  every run: {options.nproc} processes launched by torch.distributed.run')
    runs = plan_runs(options)
    result = CheckResult(work_dir=options.work_dir)
    logs: Dict[str, str] = {}
    for i, run in enumerate(runs, 1):
        first = options.iters // 2 if run.name == 'resume' else 0
        say(f'[{i}/{len(runs)}] {run.name} ({run.description}): iterations '
            f'{first + 1}..{options.iters}', flush=True)
        start = time.perf_counter()
        result.log_dirs[run.name] = train(run, child, options.work_dir, options.cfg_options,
                                          options.nproc,
                                          on_iteration=progress(say, options.iters, first))
        logs[run.name] = osp.join(options.work_dir, f'{run.name}.log')
        say(f'  done in {time.perf_counter() - start:.1f} s')
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
            result.next_steps.append(divergence_step(run, diff, lines, options.work_dir))
    say()
    found: Dict[str, Any] = {}
    for line in report_nondeterminism(cfg, logs, found):
        say(line)
    result.alerts, result.audit = found['alerts'], found['audit']
    for line in generator_lines(result, load_run_record(result.log_dirs['run_a'])[0]):
        say(line)
    result.causes = real_run_causes(cfg, seed_of(cfg), alerts=result.alerts)
    lines = cause_lines(result.causes)
    if lines:
        say()
    for line in lines:
        say(line)
    say()
    if not options.keep_checkpoints:
        say(_remove_checkpoints(options, result))
    say_result(result, len(runs) - 1, options.config, options.resume_check,
               options.workers_check is not None, say)
    return result


def _remove_checkpoints(options: CheckOptions, result: CheckResult) -> str:
    """Delete the runs' checkpoints once compared, but the one the resume run started
    from where that run diverged; the line that says so."""
    keep = []
    if any(failure.startswith('resume ') for failure in result.failed):
        keep.append(osp.join(options.work_dir, 'run_a', f'iter_{options.iters // 2}.pth'))
    count, size = remove_checkpoints(options.work_dir, keep)
    line = f'checkpoints: removed {count} ({size / 2**20:.1f} MiB) after comparing'
    if keep:
        line += (f'; kept {osp.relpath(keep[0], options.work_dir)}, where the resume run '
                 'starts, to reproduce its divergence')
    return line
