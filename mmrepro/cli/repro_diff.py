"""``tools/repro_diff.py``: do two training runs match, and if not, why?

Compares two runs (work dirs, log dirs, ``run_record.json`` files or checkpoints):

1. their run records (:mod:`mmrepro.record.run_record`): seed, randomness, world size,
   backend, versions, devices, environment, PyTorch flags, every config key, the
   training data fingerprint (keys that cannot change training listed apart);
2. everything both runs hold (:mod:`mmrepro.checks.evidence`): every logged iteration's
   losses (``vis_data/scalars.json``), every traced iteration (:mod:`mmrepro.trace`:
   first differing module, whether the samples were the same), and the weights at
   every checkpoint both know, the final ones included; two checkpoint files compare
   by their weights;
3. a verdict (:mod:`.diff_verdict`): a data or a numeric difference and the recorded
   differences that explain it, ranked; identical only when all of it agrees, and only
   "through iteration k" when the runs cover different spans;
4. optionally (``--plot out.png``) both loss curves with the divergence marked.

Exit status: 0 identical in everything compared (and no setting that can change
training differs), 1 something differs, 2 a run cannot be read (missing or corrupted
record, trace, log or checkpoint; the message names the file) or bad arguments,
3 inconclusive: nothing both runs hold could be compared (and no setting that can change
training differs; if one does, that is exit 1).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..checks.diff_verdict import settings_verdict, sort_settings, verdict_lines
from ..checks.evidence import Comparison, compare_evidence, weights_lines
from ..checks.run_data import SCALARS, RunData, load_run, read_scalars
from ..checks.weights_index import WeightsReadError
from ..record.bundle import BundleError
from ..record.run_record import MISSING, RunRecordError, diff_records
from ..trace import TraceDiff, TraceError, comparable_sections, compare_traces, describe_diff
from .config_args import ArgumentParser
from .diff_plot import loss_points, plot_losses

__all__ = ['SCALARS', 'load_run', 'main', 'read_scalars']

PROG = 'repro_diff'
#: Exit status when nothing both runs hold could be compared.
INCONCLUSIVE = 3
_SHORT = 100  # longest value shown in full


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line (argparse exits with status 2 on a malformed one)."""
    parser = ArgumentParser(
        prog=PROG, description='Compare two training runs: run records, logged losses, '
        'traces, weights digests; the first diverging iteration and module; loss curves.',
        epilog='exit status: 0 identical in all compared; 1 something differs; 2 bad '
        'arguments, or a run record, trace, log or checkpoint is missing or corrupted '
        '(the file and problem are named); 3 inconclusive: nothing both runs hold could be '
        'compared')
    parser.add_argument('run_a', help='work dir, log dir, run_record.json, checkpoint or '
                        'bundle (.tar.gz)')
    parser.add_argument('run_b', help='work dir, log dir, run_record.json, checkpoint or '
                        'bundle (.tar.gz)')
    parser.add_argument('--plot', metavar='OUT.png', help='write both loss curves here')
    return parser.parse_args(argv)


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


def describe_records(a: RunData, b: RunData) -> Tuple[List[str], List[Tuple[str, Any, Any]]]:
    """Lines describing how the two run records differ, and the differing settings.

    The config hash is shown only when no config key is (records written before the
    config was recorded key by key). ``resume`` and, for a resumed run, ``load_from``
    say how a run was started, not what it computes: they are left out, and said so.
    """
    missing = [run.label for run in (a, b) if run.record is None]
    if missing:
        return [f'run records: none in {" and ".join(missing)} (a checkpoint written without '
                'mmrepro); settings not compared'], []
    diffs = diff_records(a.record, b.record)
    by_key = {key: (value_a, value_b) for key, value_a, value_b in diffs}
    resumed = any(str(v) == 'True' for v in by_key.get('config.resume', ()))
    started = [k for k in ('config.resume', 'config.load_from') if k in by_key and resumed]
    diffs = [d for d in diffs if d[0] not in started]
    if started or any(key.startswith('config.') for key, _, _ in diffs):
        diffs = [d for d in diffs if d[0] != 'config_sha256']
    note = ([f"run records: {' and '.join(k.split('.', 1)[1] for k in started)} differ "
             '(a resumed run); not settings, left out'] if started else [])
    diffs, inert, follows = sort_settings(diffs)
    apart = ([f'  cannot change training, not causes: {len(inert)} key(s): ' + ', '.join(
        f'{key.split(".", 1)[-1]} {_show(value_a)} -> {_show(value_b)}'
        for key, value_a, value_b in inert[:4]) + (', ...' if len(inert) > 4 else '')]
        if inert else [])
    if not diffs:
        what = ('every setting that can change training' if inert else
                'seed, randomness, world size, versions, devices, environment, PyTorch '
                'flags, code, config, data')
        return note + [f'run records: identical ({what})'] + apart, []
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
    return lines + apart, diffs


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


def logged_lines(a: RunData, b: RunData, result: Comparison) -> List[str]:
    """Lines on the logged losses (``vis_data/scalars.json``) of both runs."""
    if not (a.scalars and b.scalars):
        if a.log_dir is None and b.log_dir is None:
            return []
        missing = ' and '.join(r.label for r in (a, b) if not r.scalars)
        return [f'scalars logs: no training rows in {SCALARS} of {missing}']
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


def judge(a: RunData, b: RunData, differences: List[Tuple[str, Any, Any]],
          result: Comparison) -> Tuple[List[str], int]:
    """The verdict lines and the exit status."""
    compared = [f'compared: {result.compared()}']
    trace = result.trace
    data_traced = bool(trace is not None and trace.data_checked)
    if result.checkpoints is not None and len(set(result.checkpoints)) > 1:
        at_a, at_b = result.checkpoints
        same = result.weights_first is None
        return compared + [
            f"verdict: {'the same' if same else 'different'} weights, from different "
            f'points of training (A at iteration {at_a}, B at iteration {at_b})'], int(not same)
    if result.differs:
        return compared + verdict_lines(
            differences, True, result.first, trace.data_iteration if trace else None,
            data_traced), 1
    if not result.anything and differences:
        return compared + settings_verdict(differences), 1
    if not result.anything:
        return compared + ['verdict: inconclusive: the runs hold nothing in common to '
                           'compare (no common logged or traced iteration, no common '
                           'checkpoint or recorded weights digest)'], INCONCLUSIVE
    span = result.span()
    lines = verdict_lines(differences, False, None, None, data_traced,
                          identical=f'identical {span}' if span else 'bit-identical')
    return compared + lines, int(bool(differences))


def run_diff(args: argparse.Namespace) -> int:
    """Compare, print, plot; return the exit status (:func:`judge`)."""
    a, b = load_run('A', args.run_a), load_run('B', args.run_b)
    for run in (a, b):
        print(f'{run.label}: {run.source}')
        if run.stitched:
            print(f'  a resumed run: {len(run.stitched)} log dirs joined in iteration order: '
                  + ', '.join(f'{name} (iterations {first}-{last})'
                              for name, first, last in run.stitched))
    record_lines, differences = describe_records(a, b)
    traced, trace_diff = trace_lines(a, b)
    result = compare_evidence(a.evidence, b.evidence, trace_diff)
    notes = a.evidence.weights.notes + b.evidence.weights.notes
    verdict, status = judge(a, b, differences, result)
    for line in (*record_lines, *traced, *logged_lines(a, b, result),
                 *weights_lines(result, notes), *verdict):
        print(line)
    if args.plot:
        curve_a, curve_b = (loss_points(r.trace, r.scalars) for r in (a, b))
        if not (curve_a and curve_b):
            raise RunRecordError(f'--plot: no loss values to plot in '
                                 f'{a.path if not curve_a else b.path} (no trace or '
                                 f'{SCALARS})')
        plot_losses(curve_a, curve_b, args.plot, result.first, f'A: {a.path}',
                    f'B: {b.path}')
        print(f'plot: {args.plot}')
    return status


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``tools/repro_diff.py``; returns the exit status."""
    args = parse_args(argv)
    try:
        return run_diff(args)
    except (RunRecordError, TraceError, WeightsReadError, BundleError, OSError) as err:
        print(f'{PROG}: error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
