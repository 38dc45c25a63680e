"""``mmrepro-diff``'s verdict: a data difference or a numeric one, and what explains it.

The run records' differences that can change training (:func:`..causes.sort_settings`)
are sorted into data causes and numeric causes (:mod:`..causes`). Where the samples are
the same, a different process layout (ranks, per-rank batch, accumulation: the same
global batch) comes first: each rank computes its loss over fewer images; weights that
differ before the first step come before anything else. Each cause comes with what
removes it (:func:`..fixes.next_steps`).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ..causes import (
    CANARY_CAUSE,
    DATA_CAUSES,
    INITIAL_CAUSE,
    LAYOUT_CAUSE,
    causes,
    numeric_table,
)
from ..fixes import DRAW_GLOBAL, next_steps

__all__ = ['settings_verdict', 'verdict_lines']

Diff = Tuple[str, Any, Any]
#: The check that finds where a config's data stream stops being reproducible.
CHECK_DATA = "mmrepro-check CONFIG --workers-check 2 --resume-check, on the run's config"


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
