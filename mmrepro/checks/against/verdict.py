"""The verdict of ``mmrepro-check --against``, and the next step for each cause.

:func:`judge_steps` turns the step-by-step comparison of the check's run with the baseline
(:func:`mmrepro.trace.compare.compare_steps`) into the exit status and the one-line
verdict: reproduced bit for bit through iteration ``k`` (status 0), the data or the
numerics differ (status 1, with the recorded causes), or nothing to compare (status 3).
A reproduced verdict is status 1 where real runs of the config would not reproduce the
baseline: the config has no seed (the check pinned the baseline's), or
:func:`~mmrepro.checks.real_runs.real_run_causes` names a cause. Every verdict comes
with ``next:`` lines: each cause's fix, or what to run.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ...trace.compare import TraceDiff, step_lines
from ..envelope import Rounding
from ..real_runs import Cause
from ..run_data import RunData
from .predicted import Obstacle

#: How a verdict of numbers that differ starts (the rounding envelope then judges it).
NUMERICS = 'numerics differ'


def seed_obstacle(seed: Any) -> Obstacle:
    """The config has no seed: the check pins the baseline's, a real run draws one."""
    return Obstacle('config', f'the seed: the config has no randomness.seed, so a real run '
                    f"draws a new one (the check trains with the baseline's seed {seed})",
                    f'set randomness.seed={seed} in the config (or pass --seed {seed} to '
                    'mmrepro-train)')


def fix_steps(found: List[Obstacle]) -> List[str]:
    """One ``next:`` line per distinct fix of ``found``."""
    return [f'next: {fix}' for fix in dict.fromkeys(o.fix for o in found if o.fix)]


def judge_steps(diff: TraceDiff, baseline: RunData, name: str, found: List[Obstacle],
                causes: List[Cause], pinned_seed: Optional[Any],
                config: str) -> Tuple[int, str, List[str]]:
    """``(status, verdict line, next: lines)`` of a step comparison.

    Judges the check's fresh run, step by step, against the baseline's traced optimizer
    steps (samples, losses, gradients, weights), knowing what differed before training;
    ``mmrepro-diff`` judges other evidence, everything two finished runs hold
    (:func:`mmrepro.checks.diff.verdict.judge_runs`).

    Args:
        diff: The comparison of the traced optimizer steps.
        baseline: The baseline.
        name: The baseline as given on the command line.
        found: The differences from the baseline found before training.
        causes: What real runs of the config do that the check's run did not.
        pinned_seed: The baseline's seed where the check pinned it (the config has
            none), else None.
        config: The config trained (for the commands in the ``next:`` lines).
    """
    status, verdict = _verdict(diff, baseline, name, found)
    failing = [cause for cause in causes if cause.fails]
    if status == 0 and (pinned_seed is not None or failing):
        status = 1
        if pinned_seed is not None:
            verdict += (f", but only with the baseline's seed {pinned_seed}, which the check "
                        'pinned: the config has none, so a real run draws a new one')
            return status, verdict, [f'next: {seed_obstacle(pinned_seed).fix}'] + [
                f'next: {cause.fix}' for cause in failing]
        verdict += (', but real runs of this config may not: '
                    + '; '.join(cause.short for cause in failing))
        return status, verdict, [f'next: {cause.fix}' for cause in failing]
    if status == 0:
        return status, verdict, [f'next: {cause.fix}' for cause in causes] + [
            f'next: train it here as usual (mmrepro-train {config} --work-dir DIR); '
            f'mmrepro-diff {name} DIR compares the whole run']
    if status == 3:
        return status, verdict, ["next: pass --iters N to reach one of the baseline's "
                                 'traced optimizer steps']
    data = diff.data_iteration is not None
    steps = fix_steps([o for o in found
                       if o.kind in ('initial weights', 'data', 'config') or not data])
    if not steps:
        what = 'data order or augmentation' if data else 'computation'
        steps = [f'next: nothing recorded explains it, so the {what} is not reproducible '
                 f'here: mmrepro-check {config} --resume-check --workers-check 2 names the '
                 'module or transform']
    return status, verdict, steps


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
    initial = [o.text for o in found if o.kind == 'initial weights']
    if initial and not diff.identical:  # there before the first step: never "numerics"
        return 1, (f'initial weights differ (before the first step): {"; ".join(initial)}; '
                   'so every step after differs (not a nondeterministic operation)')
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
    return 1, (f'{NUMERICS} from iteration {at(diff.iteration)}: first module '
               f'{module} ({what} of {where}); recorded causes: {causes}')


def rounding_verdict(verdict: str, rounding: Rounding, bitwise: bool) -> Tuple[int, str]:
    """``(status, verdict)`` of a run whose numerics differ, judged against the rounding
    envelope: status 0 where equivalent within rounding (1 with ``bitwise``)."""
    status = 0 if rounding.passes(bitwise) else 1
    if rounding.equivalent:
        return status, f'{rounding.clause(bitwise)}: {verdict}'
    if rounding.equivalent is False:
        return status, f'{rounding.clause(bitwise)}; {verdict}'
    return status, f'{verdict}; {rounding.clause(bitwise)}'
