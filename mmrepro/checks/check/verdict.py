"""The verdict of ``mmrepro-check CONFIG``: reproducible, or what keeps the config from it.

A run that diverged from ``run_a`` (:func:`divergence_step`: what it depends on, and what
to run next), a generator the train pipeline owns that mmrepro does not key
(:func:`generator_lines`), and what real runs of the config do that the check's runs did
not (:mod:`mmrepro.checks.real_runs`) each make the config not reproducible (status 1);
:func:`say_result` says so, with a ``next:`` line per cause.
"""
from __future__ import annotations

import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

from ...rng.owned import DRAW_GLOBAL
from ...trace.compare import TraceDiff
from ..causes import unkeyed_generators
from ..real_runs import Cause
from ..runs import Run


@dataclass
class CheckResult:
    """What a check found.

    Attributes:
        status: The exit status: 0 every comparison bit-identical and real runs of the
            config reproducible, 1 a run diverged or real runs would not be reproducible.
        work_dir: Where the runs are.
        log_dirs: Run name -> its log dir.
        failed: Descriptions of the runs that diverged (and of an unkeyed generator).
        alerts: PyTorch operation -> the runs that hit it.
        audit: The mmcv op audit's entries, or an error string.
        causes: What real runs of the config do that the check's runs did not
            (:func:`~mmrepro.checks.real_runs.real_run_causes`).
        next_steps: The ``next:`` line of each divergence.
    """

    status: int = 0
    work_dir: str = ''
    log_dirs: Dict[str, str] = field(default_factory=dict)
    failed: List[str] = field(default_factory=list)
    alerts: Dict[str, List[str]] = field(default_factory=dict)
    audit: Any = None
    causes: List[Cause] = field(default_factory=list)
    next_steps: List[str] = field(default_factory=list)


def divergence_step(run: Run, diff: TraceDiff, lines: List[str], root: str) -> str:
    """The next step after ``run`` diverged from ``run_a`` (in the check's work dir
    ``root``): what to look at and fix."""
    compare = f'mmrepro-diff {osp.join(root, "run_a")} {osp.join(root, run.name)} shows ' \
        'every difference'
    if not diff.common:
        return (f'next: {run.name}: it traced no iteration run_a traced; read '
                f'{osp.join(root, run.name + ".log")}')
    source = _SOURCES.get(run.name.rstrip('0123456789'), _SOURCES['run_b'])
    if diff.data_iteration is not None:
        return (f'next: {run.name}: the samples differ from iteration {diff.data_iteration}: '
                f'the data order or augmentation depends on {source}; {DRAW_GLOBAL} '
                f'(mmrepro keys them); {compare}')
    first = [line.split('first difference: ', 1)[1] for line in lines
             if 'first difference: ' in line]
    where = first[0] if first else f'iteration {diff.iteration}'
    step = (f'next: {run.name}: {where} differs with the same samples: it depends on '
            f'{source}, or runs an operation that is not deterministic; make it '
            f'deterministic; {compare}')
    if run.name == 'resume':
        ckpt = run.args[1]
        step += (f'; {ckpt} is kept to reproduce it: mmrepro-train '
                 f'{osp.join(root, "check_repro_config.py")} --work-dir DIR --resume {ckpt}')
    return step


#: What a run's divergence depends on, by run name (a workers run by its prefix).
_SOURCES = {
    'run_b': 'something no seed reaches (a generator of its own, os.urandom, the clock)',
    'resume': "state the checkpoint does not hold (a module's or hook's own counter, cache "
              'or generator)',
    'workers': 'the worker process (per-worker state, a generator of its own)',
}


def say_result(result: CheckResult, compared: int, config: str, resume_checked: bool,
               workers_checked: bool, say: Callable[..., None]) -> None:
    """Set the check's status; say the result line, and the next step for each cause (or
    for a reproducible config).

    Args:
        result: What the check found.
        compared: How many runs were compared with ``run_a``.
        config: The config checked.
        resume_checked: Whether a run resumed ``run_a``.
        workers_checked: Whether a run trained with another ``num_workers``.
        say: Where the lines go.
    """
    failing = [cause for cause in result.causes if cause.fails]
    notes = [cause for cause in result.causes if not cause.fails]
    if result.failed or failing:
        result.status = 1
        what = result.failed + [cause.short for cause in failing]
        if not result.failed:
            what.append(f'its {compared} comparison(s) here are bit-identical')
        say(f'result: NOT REPRODUCIBLE: {"; ".join(what)}')
    else:
        tool = ' when trained with mmrepro-train' if notes else ''
        say(f'result: REPRODUCIBLE{tool}: {compared} comparison(s) bit-identical')
    for step in result.next_steps:
        say(step)
    for cause in failing + notes:
        say(f'next: {cause.fix}')
    if not result.status:
        more = [what for what, done in (
            ('--resume-check (resume)', resume_checked),
            ('--workers-check K (num_workers)', workers_checked)) if not done]
        say(f'next: train it as usual (mmrepro-train {config})' + (
            f'; add {" and ".join(more)} to check more' if more else ''))


def generator_lines(result: CheckResult, record: Dict[str, Any]) -> List[str]:
    """The generators run_a's train pipeline owns (its run ``record`` lists them); one
    mmrepro does not key fails the check (its draws could agree on the check's reruns and
    still differ in real runs)."""
    owned = record.get('pipeline_generators') or []
    if not owned:
        return []
    keyed = sum(bool(g.get('keyed')) for g in owned)
    lines = [f'generators the train pipeline owns: {len(owned)}, {keyed} keyed by mmrepro']
    unkeyed = unkeyed_generators(record)
    if unkeyed:
        lines.append(f'  not keyed: {", ".join(unkeyed)}: their draws change on reruns, '
                     f'with num_workers and after resume; {DRAW_GLOBAL} instead')
        result.failed.append('the train pipeline owns generator(s) mmrepro does not key '
                             f'({", ".join(unkeyed)})')
        result.next_steps.append(f'next: make {", ".join(unkeyed)} {DRAW_GLOBAL} (mmrepro '
                                 'keys them)')
    return lines
