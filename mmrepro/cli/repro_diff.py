"""``tools/repro_diff.py``: why do two training runs differ?

Compares two runs (work dirs, log dirs, ``run_record.json`` files or checkpoints):

1. their run records (:mod:`mmrepro.run_record`): seed, randomness, world size,
   backend, versions, devices, environment, PyTorch flags, every config key, the
   training data fingerprint;
2. where they diverge: the first differing iteration and module from the traces
   (:mod:`mmrepro.trace`) when both runs have one, else the first logged iteration
   whose losses differ in ``vis_data/scalars.json``;
3. whether the runs were given the same samples (the traces' per-sample digests);
4. a verdict (:mod:`.diff_verdict`): a data or a numeric difference, the recorded
   differences that explain it, ranked, and whether bitwise equality was expected;
5. optionally (``--plot out.png``) both loss curves with the divergence marked.

Exit status: 0 when nothing differs, 1 when something does, 2 when a run cannot be
read (missing or corrupted record, trace or log; the message names the file).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os.path as osp
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..run_record import MISSING, RECORD_NAME, RunRecordError, diff_records, load_run_record
from ..trace import (
    TRACE_NAME,
    TraceDiff,
    TraceError,
    comparable_sections,
    compare_traces,
    describe_diff,
    loss_curve,
    read_trace,
)
from .diff_verdict import verdict_lines

PROG = 'repro_diff'
SCALARS = osp.join('vis_data', 'scalars.json')
_SHORT = 100  # longest value shown in full


@dataclass
class RunData:
    """What could be read of one run.

    Attributes:
        label: ``A`` or ``B``.
        path: The path given on the command line.
        record: The run record.
        source: The file the record was read from.
        log_dir: The log dir (None for a checkpoint).
        trace: ``(header, lines)`` of its trace, if any.
        scalars: Its logged training rows (with a ``loss``), if any.
        stitched: ``(log dir, first iteration, last iteration)`` of each log dir whose
            rows were joined (a work dir trained, stopped and resumed), else empty.
    """

    label: str
    path: str
    record: Dict[str, Any]
    source: str
    log_dir: Optional[str] = None
    trace: Optional[Tuple[Dict[str, Any], List[Dict[str, Any]]]] = None
    scalars: List[Dict[str, Any]] = field(default_factory=list)
    stitched: List[Tuple[str, int, int]] = field(default_factory=list)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line (argparse exits with status 2 on a malformed one)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description='Compare two training runs: run records, first diverging '
        'iteration and module, loss curves.',
        epilog='exit status: 0 nothing differs; 1 something differs; 2 bad arguments, or a '
        'run record, trace or log is missing or corrupted (the file and problem are named)')
    parser.add_argument('run_a', help='work dir, log dir, run_record.json or checkpoint')
    parser.add_argument('run_b', help='work dir, log dir, run_record.json or checkpoint')
    parser.add_argument('--plot', metavar='OUT.png', help='write both loss curves here')
    return parser.parse_args(argv)


def read_scalars(path: str) -> List[Dict[str, Any]]:
    """The training rows (those with ``loss`` and ``iter``) of a ``scalars.json`` log.

    Raises:
        RunRecordError: A line other than a cut-short last one is not JSON.
    """
    rows: List[Dict[str, Any]] = []
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            if number >= len(lines) - 1:  # the last line, cut short by a crash
                break
            raise RunRecordError(f'{path}: line {number} is not valid JSON ({err.msg}); '
                                 'the scalars log is corrupted') from None
        if isinstance(row, dict) and 'loss' in row and isinstance(row.get('iter'), int):
            rows.append(row)
    return rows


def load_run(label: str, path: str) -> RunData:
    """Read the record, and the trace and scalars log next to it, of one run.

    Given a work dir with several log dirs (a run stopped and resumed, each start
    writing its own ``<timestamp>/``), the traces and scalars logs of all of them are
    joined in iteration order, a later log dir's row replacing an earlier one's for the
    same iteration; the record is the newest one.

    Raises:
        RunRecordError: The record (or the scalars log) is missing or corrupted.
        TraceError: The trace exists but is corrupted.
    """
    record, source = load_run_record(path)
    run = RunData(label, path, record, source)
    if osp.basename(source) != RECORD_NAME:
        return run
    run.log_dir = osp.dirname(source)
    log_dirs = [run.log_dir]
    if osp.samefile(osp.dirname(run.log_dir), path):
        log_dirs = sorted(osp.dirname(p) for p in glob.glob(
            osp.join(glob.escape(path), '*', RECORD_NAME)))
    traces = {d: read_trace(osp.join(d, TRACE_NAME)) for d in log_dirs
              if osp.isfile(osp.join(d, TRACE_NAME))}
    scalars = {d: read_scalars(osp.join(d, SCALARS)) for d in log_dirs
               if osp.isfile(osp.join(d, SCALARS))}
    if traces:
        header = traces[log_dirs[-1]][0] if log_dirs[-1] in traces else \
            list(traces.values())[-1][0]
        run.trace = (header, _join_by_iteration(
            [lines for head, lines in traces.values()
             if head.get('version') == header.get('version')]))
    run.scalars = _join_by_iteration(list(scalars.values()))
    if len(log_dirs) > 1:
        for log_dir in log_dirs:  # each dir's iterations: from its trace, else its log
            rows = traces[log_dir][1] if log_dir in traces else scalars.get(log_dir, [])
            if rows:
                run.stitched.append((osp.basename(log_dir), rows[0]['iter'],
                                     rows[-1]['iter']))
    return run


def _join_by_iteration(parts: Sequence[Sequence[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Rows of every part by ``iter``; a later part's row wins for the same iteration."""
    joined: Dict[int, Dict[str, Any]] = {}
    for rows in parts:
        joined.update((row['iter'], row) for row in rows)
    return [joined[i] for i in sorted(joined)]


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
    diffs = diff_records(a.record, b.record)
    by_key = {key: (value_a, value_b) for key, value_a, value_b in diffs}
    resumed = any(str(v) == 'True' for v in by_key.get('config.resume', ()))
    started = [k for k in ('config.resume', 'config.load_from') if k in by_key and resumed]
    diffs = [d for d in diffs if d[0] not in started]
    if started or any(key.startswith('config.') for key, _, _ in diffs):
        diffs = [d for d in diffs if d[0] != 'config_sha256']
    note = ([f"run records: {' and '.join(k.split('.', 1)[1] for k in started)} differ "
             '(a resumed run); not settings, left out'] if started else [])
    if not diffs:
        return note + ['run records: identical (seed, randomness, world size, versions, '
                       'devices, environment, PyTorch flags, code, config, data)'], []
    groups: Dict[str, List[Tuple[str, Any, Any]]] = {}
    for key, value_a, value_b in diffs:
        section, _, rest = key.partition('.')
        if section == 'config_sha256':
            section, rest = 'config', '(sha256 of the whole config)'
        groups.setdefault(section, []).append((rest, value_a, value_b))
    lines = note + [f'run records: {len(diffs)} setting(s) differ (A -> B)']
    for section, entries in groups.items():
        if len(entries) == 1 and not entries[0][0]:
            lines.append(f'  {section}: {_show(entries[0][1])} -> {_show(entries[0][2])}')
            continue
        lines.append(f'  {section}: {len(entries)} {_TITLES.get(section, "setting(s) differ")}')
        lines += [f'    {key}: {_show(value_a)} -> {_show(value_b)}'
                  for key, value_a, value_b in entries]
    return lines, diffs


def scalars_divergence(rows_a: Sequence[Dict[str, Any]],
                       rows_b: Sequence[Dict[str, Any]]) -> Tuple[List[int], Optional[int],
                                                                  Optional[int]]:
    """First logged iteration whose loss values differ.

    Returns:
        tuple: ``(common iterations, first differing iteration or None, the last equal
        logged iteration before it or None)``.
    """
    by_iter_b = {row['iter']: row for row in rows_b}
    common, previous = [], None
    for row in sorted(rows_a, key=lambda r: r['iter']):
        other = by_iter_b.get(row['iter'])
        if other is None:
            continue
        common.append(row['iter'])
        keys = sorted(k for k in set(row) | set(other) if k.startswith('loss'))
        if any(row.get(k) != other.get(k) for k in keys):
            return common, row['iter'], previous
        previous = row['iter']
    return common, None, previous


def describe_divergence(a: RunData, b: RunData) -> Tuple[List[str], Optional[int], bool,
                                                         Optional[TraceDiff]]:
    """Lines on where the runs diverge, the first diverging iteration, if they do, and
    the trace comparison (None without traces)."""
    if a.trace is not None and b.trace is not None:
        sections, reason = comparable_sections(a.trace[0], b.trace[0])
        diff = compare_traces(a.trace[1], b.trace[1], sections)
        lines = describe_diff(diff, a.trace[0].get('modules'), 'A', 'B')
        lines[0] = f'traces: {lines[0]}'
        if reason is not None:
            lines.insert(0, f'traces: {reason}')
        return lines, diff.iteration, not diff.identical, diff
    missing = [r.label for r in (a, b) if r.trace is None]
    note = f'(no {TRACE_NAME} in {" and ".join(missing)}; train with ' \
           "custom_hooks=[dict(type='ReproducibilityHook', trace_interval=1)] to compare " \
           'modules)'
    if not (a.scalars and b.scalars):
        return [f'divergence: nothing to compare {note}, and no training rows in '
                f'{SCALARS}'], None, False, None
    common, first, previous = scalars_divergence(a.scalars, b.scalars)
    if not common:
        return [f'scalars logs: no logged iteration in common {note}'], None, True, None
    if first is None:
        return [f'scalars logs: losses equal at every logged iteration in common '
                f'({common[0]}..{common[-1]}, {len(common)} logged) {note}'], None, False, None
    since = f', equal at iteration {previous}' if previous is not None else ''
    row_a = next(r for r in a.scalars if r['iter'] == first)
    row_b = next(r for r in b.scalars if r['iter'] == first)
    losses = ', '.join(f'{k} {row_a.get(k)} vs {row_b.get(k)}' for k in sorted(row_a)
                       if k.startswith('loss') and row_a.get(k) != row_b.get(k))
    return [f'scalars logs: first logged iteration whose losses differ: {first}{since} '
            f'{note}', f'  {losses}'], first, True, None


def curve(run: RunData) -> List[Tuple[int, float]]:
    """``(iteration, loss)`` of a run, from its trace if it has one, else its scalars."""
    if run.trace is not None:
        return loss_curve(run.trace[1])
    return [(row['iter'], float(row['loss'])) for row in run.scalars]


def plot_losses(curve_a: Sequence[Tuple[int, float]], curve_b: Sequence[Tuple[int, float]],
                out: str, divergence: Optional[int] = None, label_a: str = 'A',
                label_b: str = 'B') -> List[Any]:
    """Plot both loss curves (and the first diverging iteration) into a PNG file.

    Uses Matplotlib's Agg canvas directly, so it needs no display and leaves the
    global backend alone.

    Args:
        curve_a: ``(iteration, loss)`` pairs of run A.
        curve_b: ``(iteration, loss)`` pairs of run B.
        out: The PNG file to write.
        divergence: The first diverging iteration, marked with a vertical line.
        label_a: Legend of run A.
        label_b: Legend of run B.

    Returns:
        list: The two curves' ``Line2D`` objects.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    figure = Figure(figsize=(8, 6), dpi=100)
    FigureCanvasAgg(figure)
    axes, below = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    lines = []
    for points, label, style in ((curve_a, label_a, '-'), (curve_b, label_b, '--')):
        xs = [x for x, _ in points]
        ys = [y if math.isfinite(y) else math.nan for _, y in points]
        lines.append(axes.plot(xs, ys, style, marker='.', label=label)[0])
    if divergence is not None:
        axes.axvline(divergence, color='red', linestyle=':',
                     label=f'first divergence (iteration {divergence})')
    values_b = dict(curve_b)
    common = [(x, abs(y - values_b[x])) for x, y in curve_a if x in values_b]
    below.plot([x for x, _ in common], [d for _, d in common], color='black', marker='.')
    if divergence is not None:
        below.axvline(divergence, color='red', linestyle=':')
    below.set_ylabel('|A - B|')
    below.set_xlabel('iteration')
    below.xaxis.set_major_locator(MaxNLocator(integer=True))
    below.grid(True, alpha=0.3)
    axes.set_ylabel('loss')
    axes.set_title('training loss' + (f', diverging at iteration {divergence}'
                                      if divergence is not None else ''))
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, format='png')
    return lines


def run_diff(args: argparse.Namespace) -> int:
    """Compare, print, plot; return the exit status (0 same, 1 different)."""
    a, b = load_run('A', args.run_a), load_run('B', args.run_b)
    for run in (a, b):
        print(f'{run.label}: {run.source}')
        if run.stitched:
            print(f'  a resumed run: {len(run.stitched)} log dirs joined in iteration order: '
                  + ', '.join(f'{name} (iterations {first}-{last})'
                              for name, first, last in run.stitched))
    record_lines, differences = describe_records(a, b)
    divergence_lines, first, diverged, trace_diff = describe_divergence(a, b)
    verdict = verdict_lines(
        differences, diverged, first,
        trace_diff.data_iteration if trace_diff is not None else None,
        bool(trace_diff is not None and trace_diff.data_checked))
    for line in (*record_lines, *divergence_lines, *verdict):
        print(line)
    if args.plot:
        curve_a, curve_b = curve(a), curve(b)
        if not (curve_a and curve_b):
            raise RunRecordError(f'--plot: no loss values to plot in '
                                 f'{a.path if not curve_a else b.path} (no trace or '
                                 f'{SCALARS})')
        plot_losses(curve_a, curve_b, args.plot, first, f'A: {a.path}', f'B: {b.path}')
        print(f'plot: {args.plot}')
    return 1 if differences or diverged else 0


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``tools/repro_diff.py``; returns the exit status."""
    args = parse_args(argv)
    try:
        return run_diff(args)
    except (RunRecordError, TraceError, OSError) as err:  # OSError: e.g. the plot file
        print(f'{PROG}: error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
