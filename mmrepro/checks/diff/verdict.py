"""``mmrepro-diff``'s verdict on two runs, and its exit status.

:func:`judge_runs` judges everything two runs were compared on (:mod:`..evidence`):
identical (through the span both cover), different, or nothing to compare; training that
agrees with validations that differ (:func:`..eval_verdict.validation_verdict`). Where
they differ, :func:`verdict_lines` says whether the data or the numbers do, and what
explains it: the run records' differences that can change training
(:func:`..causes.sort_settings`), sorted into data causes and numeric causes
(:mod:`..causes`). Where the samples are the same, a different process layout (ranks,
per-rank batch, accumulation: the same global batch) comes first: each rank computes its
loss over fewer images; weights that differ before the first step come before anything
else. Each cause comes with what removes it (:func:`..fixes.next_steps`). Where only the
numbers differ, the rounding envelope judges them (:func:`with_rounding`).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ...record.initial_weights import initial_differences
from ...rng.owned import DRAW_GLOBAL
from ...trace import TraceDiff
from ..causes import (
    CANARY_CAUSE,
    DATA_CAUSES,
    INITIAL_CAUSE,
    LAYOUT_CAUSE,
    causes,
    numeric_table,
    unkeyed_generators,
)
from ..envelope import Rounding
from ..eval_verdict import validation_verdict
from ..evaluations import EvaluationDiff
from ..evidence import Comparison
from ..fixes import next_steps
from ..run_data import RunData

__all__ = ['DIFFERENT', 'IDENTICAL', 'INCONCLUSIVE', 'SETTINGS_DIFFER', 'judge_runs',
           'numeric', 'settings_verdict', 'verdict_lines', 'with_rounding']

#: Identical in everything compared; no setting that can change training differs.
IDENTICAL = 0
#: The outcomes differ, or nothing compared and settings that change training differ.
DIFFERENT = 1
#: Nothing both runs hold could be compared.
INCONCLUSIVE = 3
#: Identical in everything compared, although settings that can change training differ.
SETTINGS_DIFFER = 4
Diff = Tuple[str, Any, Any]
#: The check that finds where a config's data stream stops being reproducible.
CHECK_DATA = "mmrepro-check CONFIG --workers-check 2 --resume-check, on the run's config"


def judge_runs(a: RunData, b: RunData, differences: List[Diff], result: Comparison,
               evaluations: EvaluationDiff) -> Tuple[List[str], int]:
    """The verdict lines and the exit status (:data:`IDENTICAL`, :data:`DIFFERENT`,
    :data:`INCONCLUSIVE` or :data:`SETTINGS_DIFFER`) of two finished runs.

    Judges everything both runs hold (logged losses, traced iterations, weights,
    validations) over the span both cover; ``mmrepro-check --against`` judges other
    evidence, a fresh run's traced optimizer steps against a baseline's
    (:func:`mmrepro.checks.against.verdict.judge_steps`).

    Args:
        a: Run A.
        b: Run B.
        differences: The run records' differences that can change training.
        result: What the runs were compared on (:func:`..evidence.compare_evidence`).
        evaluations: Their validations compared.
    """
    lines, status = _judge_training(a, b, differences, result)
    if status != DIFFERENT and evaluations.first is not None:
        same = bool(result.weights) and result.weights_first is None
        sizes = tuple((run.record or {}).get('world_size') for run in (a, b))
        return [*lines[:1], *validation_verdict(evaluations, same, sizes)], DIFFERENT
    return lines, status


def _judge_training(a: RunData, b: RunData, differences: List[Diff],
                    result: Comparison) -> Tuple[List[str], int]:
    """:func:`judge_runs` on what training left (all but the validations)."""
    compared = [f'compared: {result.compared()}']
    trace = result.trace
    data_traced = bool(trace is not None and trace.data_checked)
    alike = SETTINGS_DIFFER if differences else IDENTICAL
    if result.checkpoints is not None and len(set(result.checkpoints)) > 1:
        at_a, at_b = result.checkpoints
        same = result.weights_first is None
        return compared + [
            f"verdict: {'the same' if same else 'different'} weights, from different "
            f'points of training (A at iteration {at_a}, B at iteration {at_b})',
            '  next: compare two checkpoints of the same iteration, or the two work dirs '
            '(they compare at every checkpoint both hold)'], alike if same else DIFFERENT
    if result.differs:
        return compared + verdict_lines(
            differences, True, result.first, trace.data_iteration if trace else None,
            data_traced, unkeyed=unkeyed_generators(a.record, b.record),
            initial=initial_differences(a.record, b.record)), DIFFERENT
    if not result.anything and differences:
        return compared + settings_verdict(differences), DIFFERENT
    if not result.anything:
        return compared + [
            'verdict: inconclusive: the runs hold nothing in common to compare (no common '
            'logged or traced iteration, no common checkpoint or recorded weights digest)',
            '  next: compare runs that share an iteration: keep the trace '
            '(ReproducibilityHook trace_interval > 0), the scalars log or a checkpoint of '
            'the same iteration in both'], INCONCLUSIVE
    span = result.span()
    return compared + verdict_lines(
        differences, False, None, None, data_traced,
        identical=f'identical {span}' if span else 'bit-identical'), alike


def numeric(a: RunData, b: RunData, diff: Optional[TraceDiff]) -> bool:
    """Whether the traces differ in their numbers alone: a traced step differs, the
    samples and the initial weights do not."""
    return (diff is not None and bool(diff.common) and not diff.identical
            and diff.data_iteration is None and not initial_differences(a.record, b.record))


def with_rounding(verdict: List[str], rounding: Rounding,
                  bitwise: bool) -> Tuple[List[str], int]:
    """The verdict lines with the rounding-or-real verdict, and the exit status."""
    at = next(i for i, line in enumerate(verdict) if line.startswith('verdict: '))
    lines = list(verdict)
    lines[at] += f'; {rounding.clause(bitwise)}'
    return lines, IDENTICAL if rounding.passes(bitwise) else DIFFERENT


def _listing(found: List[Tuple[str, List[str]]]) -> str:
    shown = []
    for cause, keys in found:
        names = ', '.join(keys[:3]) + (f' and {len(keys) - 3} more' if len(keys) > 3 else '')
        shown.append(f'{cause} ({names})')
    return '; '.join(shown)


def _found(diffs: Sequence[Diff]) -> Tuple[List[Tuple[str, List[str]]],
                                          List[Tuple[str, List[str]]]]:
    """``(data causes, numeric causes)`` of the differing settings."""
    data = causes(diffs, DATA_CAUSES)
    data_keys = {key for _, keys in data for key in keys}
    return data, causes([d for d in diffs if d[0] not in data_keys], numeric_table(diffs))


def settings_verdict(diffs: Sequence[Diff]) -> List[str]:
    """The verdict when no outcome could be compared but settings differ: the runs
    differ in what they were given (data causes first, then numeric ones), and what
    removes each difference."""
    data, numeric = _found(diffs)
    return [f'verdict: settings that change training differ: {_listing(data + numeric)}',
            '  no outcome was compared: the runs hold no common logged or traced iteration '
            'and no common weights'] + next_steps(data + numeric, diffs)


def verdict_lines(diffs: Sequence[Diff], diverged: bool, first: Optional[int],
                  data_iteration: Optional[int], data_traced: bool,
                  identical: str = 'bit-identical', unkeyed: Sequence[str] = (),
                  initial: Sequence[str] = ()) -> List[str]:
    """The verdict of ``mmrepro-diff``.

    Args:
        diffs: The run records' differences that can change training
            (:func:`..causes.sort_settings`).
        diverged: Whether the traces (or logged losses) differ.
        first: The first diverging iteration, if known.
        data_iteration: The first traced iteration whose samples differ (None if none).
        data_traced: Whether both traces hold per-sample data digests.
        identical: How equal runs are called: ``bit-identical``, or ``identical
            through iteration k (...)`` where they cover different spans.
        unkeyed: Generators the pipeline owns that mmrepro does not key
            (:func:`..causes.unkeyed_generators`): the cause of data that differ with nothing
            recorded differing.
        initial: How the weights the runs start from differ
            (:func:`mmrepro.record.initial_weights.initial_differences`): where the runs
            differ, that is the verdict, whatever else differs.
    """
    data, numeric = _found(diffs)
    if initial and (diverged or data_iteration is not None):
        return initial_verdict(initial, data + numeric, diffs)
    fingerprint = any(key.startswith('data.') for _, keys in data for key in keys)
    if data_iteration is not None or (not data_traced and fingerprint):
        where = f' from iteration {data_iteration}' if data_iteration is not None else ''
        if data:
            return [f'verdict: the data differ{where}', f'  why: {_listing(data)}',
                    *next_steps(data, diffs)]
        if unkeyed:
            return [f'verdict: the data differ{where}',
                    '  why: the train pipeline owns generator(s) mmrepro does not key: '
                    f"{', '.join(unkeyed)} ({DRAW_GLOBAL} instead)"]
        return [f'verdict: the data differ{where}',
                '  why: nothing recorded: the same files and settings, so the data order or '
                'augmentation is not reproducible',
                f'  next: {CHECK_DATA}: it names the first iteration whose samples differ '
                'on a rerun, with other num_workers or after resuming']
    same = 'the same samples in every traced iteration; ' if data_traced else ''
    layout = [cause for cause in data if cause[0] == LAYOUT_CAUSE]
    starts = [cause for cause in numeric if cause[0] == INITIAL_CAUSE]
    canary = [cause for cause in data if cause[0] == CANARY_CAUSE]  # there before step 1
    found = starts + canary + layout + [
        cause for cause in numeric if cause[0] != INITIAL_CAUSE] + [
        cause for cause in data if cause[0] not in (LAYOUT_CAUSE, CANARY_CAUSE)]
    if not diverged:
        if not found:
            return [f'verdict: {same}{identical}, as expected (no setting that changes '
                    'results differs)']
        return [f'verdict: {same}{identical}, although settings that can change training '
                f'differ: {_listing(found)}', *next_steps(found, diffs)]
    at = f' from iteration {first}' if first is not None else ''
    lines = [f'verdict: {same}the numbers differ{at}']
    if found:
        return lines + [f'  explained by (most likely first): {_listing(found)}',
                        '  bitwise equality expected: no, settings that change results '
                        'differ', *next_steps(found, diffs)]
    iters = f' --iters {first}' if first is not None and first > 1 else ''
    return lines + ['  bitwise equality expected: yes: nothing recorded that changes results '
                    'differs, so an operation is nondeterministic or a setting is not '
                    'recorded',
                    f"  next: mmrepro-check CONFIG{iters}, on the run's config: it trains it "
                    'twice and names the first module whose output, gradient or weight '
                    'differs, and the nondeterministic operations met']


def initial_verdict(initial: Sequence[str], found: List[Tuple[str, List[str]]],
                    diffs: Sequence[Diff]) -> List[str]:
    """The verdict where the runs start from other weights: that difference is there
    before the first step, so it is the verdict, never "numerics".

    Args:
        initial: How the initial weights differ, most decisive first.
        found: Every cause the records show (``the initial weights`` among them).
        diffs: The differing settings.
    """
    rest = [cause for cause in found if cause[0] != INITIAL_CAUSE]
    lines = [f'verdict: initial weights differ (before the first step): {initial[0]}',
             *(f'  also: {text}' for text in initial[1:]),
             '  why: the runs start from other weights, so every step after differs (not a '
             'nondeterministic operation)']
    if rest:
        lines.append(f'  other recorded differences: {_listing(rest)}')
    mine = [cause for cause in found if cause[0] == INITIAL_CAUSE] or [(INITIAL_CAUSE, [])]
    return lines + next_steps(mine + rest, diffs)
