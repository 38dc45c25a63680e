"""What ``mmrepro-diff`` prints on each part of two runs: settings, traces, logged losses.

:func:`describe_records` lists how the run records differ (the settings that cannot
change training apart, as information: :func:`mmrepro.checks.causes.sort_settings`),
:func:`trace_lines` where the traces part (:mod:`mmrepro.trace`: first differing
module, whether the samples were the same), :func:`logged_lines` the first logged
iteration whose losses differ (``vis_data/scalars.json``; not where the runs log with
other ``log_processor`` settings, which average other windows).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ...record.run_record import MISSING, diff_records
from ...trace import TraceDiff, comparable_sections, compare_traces, describe_diff
from ..causes import sort_settings
from ..evidence import Comparison
from ..run_data import SCALARS, RunData

__all__ = ['LOG_SETTINGS', 'Settings', 'describe_records', 'logged_lines', 'source_lines',
           'trace_lines']

_SHORT = 100  # longest value shown in full
_VALUED = 4  # settings that cannot change training shown with their values
Diff = Tuple[str, Any, Any]


def source_lines(a: RunData, b: RunData) -> List[str]:
    """Where each run was read from (and the log dirs of a resumed run, joined)."""
    lines = []
    for run in (a, b):
        lines.append(f'{run.label}: {run.source}')
        if run.stitched:
            lines.append(f'  a resumed run: {len(run.stitched)} log dirs joined in iteration '
                         'order: ' + ', '.join(f'{name} (iterations {first}-{last})'
                                               for name, first, last in run.stitched))
    return lines


def _show(value: Any) -> str:
    if value is MISSING or value == MISSING:
        return '(missing)'
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if isinstance(value, str) and len(value) == 64 and all(c in '0123456789abcdef'
                                                           for c in value):
        return value[:12]  # a sha256
    return text if len(text) <= _SHORT else text[:_SHORT - 3] + '...'


_TITLES = dict(config='config key(s) differ', versions='version(s) differ',
               env='environment variable(s) differ', data='fingerprint value(s) differ: '
               'the training data differs')


def _inert_line(inert: List[Diff]) -> str:
    """The settings that cannot change training, as information: the first few with
    their values, the names of the rest."""
    shown = [f'{key.split(".", 1)[-1]} {_show(value_a)} -> {_show(value_b)}'
             for key, value_a, value_b in inert[:_VALUED]]
    rest = [key.split('.', 1)[-1] for key, _, _ in inert[_VALUED:]]
    more = f'; and {", ".join(rest)}' if rest else ''
    return (f'  cannot change training (information, not causes): {len(inert)} key(s): '
            f'{", ".join(shown)}{more}')


class Settings(NamedTuple):
    """How two run records differ.

    Attributes:
        lines: What to print.
        kept: The differing settings that can change training.
        inert: The differing settings that cannot (information).
    """

    lines: List[str]
    kept: List[Diff]
    inert: List[Diff]


def describe_records(a: RunData, b: RunData, places: Sequence[str] = ()) -> Settings:
    """Lines describing how the two run records differ, and the differing settings.

    The config hash is shown only when no config key is (records written before the
    config was recorded key by key). ``resume`` and, for a resumed run, ``load_from``
    say how a run was started, not what it computes: they are left out, and said so.
    Settings that cannot change training are listed apart, as information. ``places``:
    keys left out because they only name a place (a test run's ``config.load_from``: its
    checkpoint is compared by its weights digest).
    """
    missing = [run.label for run in (a, b) if run.record is None]
    if missing:
        return Settings([f'run records: none in {" and ".join(missing)} (a checkpoint '
                         'written without mmrepro); settings not compared'], [], [])
    diffs = [d for d in diff_records(a.record, b.record) if d[0] not in places]
    by_key = {key: (value_a, value_b) for key, value_a, value_b in diffs}
    resumed = any(str(v) == 'True' for v in by_key.get('config.resume', ()))
    started = [k for k in ('config.resume', 'config.load_from') if k in by_key and resumed]
    diffs = [d for d in diffs if d[0] not in started]
    if started or any(key.startswith('config.') for key, _, _ in diffs):
        diffs = [d for d in diffs if d[0] != 'config_sha256']
    note = ([f"run records: {' and '.join(k.split('.', 1)[1] for k in started)} differ "
             '(a resumed run); not settings, left out'] if started else [])
    diffs, inert, follows = sort_settings(diffs, (a.record, b.record))
    apart = [_inert_line(inert)] if inert else []
    if not diffs:
        what = ('every setting that can change training' if inert else
                'seed, randomness, world size, versions, devices, environment, PyTorch '
                'flags, code, config, data')
        return Settings(note + [f'run records: identical ({what})'] + apart, [], inert)
    groups: Dict[str, List[Tuple[str, Any, Any]]] = {}
    for key, value_a, value_b in diffs:
        section, _, rest = key.partition('.')
        if section == 'config_sha256':
            section, rest = 'config', '(sha256 of the whole config)'
        groups.setdefault(section, []).append((rest, value_a, value_b))
    lines = note + [f'run records: {len(diffs)} setting(s) differ (A -> B)']
    for section, entries in groups.items():
        also = (f" (the same cause, also recorded as {', '.join(follows[section])})"
                if follows.get(section) else '')
        if len(entries) == 1 and not entries[0][0]:
            lines.append(f'  {section}: {_show(entries[0][1])} -> {_show(entries[0][2])}'
                         f'{also}')
            continue
        lines.append(f'  {section}: {len(entries)} {_TITLES.get(section, "setting(s) differ")}')
        lines += [f'    {key}: {_show(value_a)} -> {_show(value_b)}'
                  for key, value_a, value_b in entries]
    return Settings(lines + apart, diffs, inert)


def trace_lines(a: RunData, b: RunData) -> Tuple[List[str], Optional[TraceDiff]]:
    """Lines on the traces' comparison, and the comparison (None unless both have one)."""
    if a.trace is None or b.trace is None:
        missing = ' and '.join(r.label for r in (a, b) if r.trace is None)
        return ([f'traces: none in {missing}; train with custom_hooks=[dict(type='
                 "'ReproducibilityHook', trace_interval=1)] to compare modules"]
                if a.log_dir or b.log_dir else []), None
    sections, reason = comparable_sections(a.trace[0], b.trace[0])
    diff = compare_traces(a.trace[1], b.trace[1], sections)
    lines = describe_diff(diff, a.trace[0].get('modules'), 'A', 'B')
    lines[0] = f'traces: {lines[0]}'
    if reason is not None:
        lines.insert(0, f'traces: {reason}')
    return lines, diff


#: Why logged losses are not compared (runs that log with other settings).
LOG_SETTINGS = 'config.log_processor.'


def logged_lines(a: RunData, b: RunData, result: Comparison) -> List[str]:
    """Lines on the logged losses (``vis_data/scalars.json``) of both runs."""
    if not (a.scalars and b.scalars):
        if a.log_dir is None and b.log_dir is None:
            return []
        missing = ' and '.join(r.label for r in (a, b) if not r.scalars)
        return [f'scalars logs: no training rows in {SCALARS} of {missing}']
    if result.logged_skipped:
        return ['scalars logs: not compared: the runs log with other log_processor settings '
                '(listed above), so their logged losses average other windows']
    common, first = result.logged, result.logged_first
    if not common:
        return ['scalars logs: no logged iteration in common']
    if first is None:
        return [f'scalars logs: losses equal at every logged iteration in common '
                f'({common[0]}..{common[-1]}, {len(common)} logged)']
    previous = result.logged_previous
    since = f', equal at iteration {previous}' if previous is not None else ''
    row_a = next(r for r in a.scalars if r['iter'] == first)
    row_b = next(r for r in b.scalars if r['iter'] == first)
    losses = ', '.join(f'{k} {row_a.get(k)} vs {row_b.get(k)}' for k in sorted(row_a)
                       if k.startswith('loss') and row_a.get(k) != row_b.get(k))
    return [f'scalars logs: first logged iteration whose losses differ: {first}{since}',
            f'  {losses}']
