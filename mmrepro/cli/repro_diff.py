"""``tools/repro_diff.py``: do two training runs match, and if not, why?

Compares two runs (work dirs, log dirs, ``run_record.json`` files or checkpoints):

1. their run records (:mod:`mmrepro.run_record`): seed, randomness, world size,
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
3 inconclusive: nothing both runs hold could be compared.
"""
from __future__ import annotations

import argparse
import glob
import json
import os.path as osp
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..checks.evidence import Comparison, Evidence, compare_evidence, weights_lines
from ..checks.weights_index import WeightsReadError, read_checkpoint
from ..run_record import (
    MISSING,
    RECORD_NAME,
    REQUIRED_KEYS,
    RunRecordError,
    diff_records,
    load_run_record,
)
from ..trace import (
    TRACE_NAME,
    TraceDiff,
    TraceError,
    comparable_sections,
    compare_traces,
    describe_diff,
    read_trace,
)
from .config_args import ArgumentParser
from .diff_plot import loss_points, plot_losses
from .diff_verdict import sort_settings, verdict_lines

PROG = 'repro_diff'
#: Exit status when nothing both runs hold could be compared.
INCONCLUSIVE = 3
CHECKPOINT_SUFFIXES = ('.pth', '.pt', '.ckpt')
SCALARS = osp.join('vis_data', 'scalars.json')
_SHORT = 100  # longest value shown in full


@dataclass
class RunData:
    """What could be read of one run.

    Attributes:
        label: ``A`` or ``B``.
        path: The path given on the command line.
        record: The run record (None for a checkpoint written without one).
        source: The file the record was read from.
        log_dir: The log dir (None for a checkpoint).
        trace: ``(header, lines)`` of its trace, if any.
        scalars: Its logged training rows (with a ``loss``), if any.
        stitched: ``(log dir, first iteration, last iteration)`` of each log dir whose
            rows were joined (a work dir trained, stopped and resumed), else empty.
        evidence: What it can be compared on (:class:`Evidence`).
    """

    label: str
    path: str
    record: Optional[Dict[str, Any]]
    source: str
    log_dir: Optional[str] = None
    trace: Optional[Tuple[Dict[str, Any], List[Dict[str, Any]]]] = None
    scalars: List[Dict[str, Any]] = field(default_factory=list)
    stitched: List[Tuple[str, int, int]] = field(default_factory=list)
    evidence: Evidence = field(default_factory=lambda: Evidence('?'))


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line (argparse exits with status 2 on a malformed one)."""
    parser = ArgumentParser(
        prog=PROG, description='Compare two training runs: run records, logged losses, '
        'traces, weights digests; the first diverging iteration and module; loss curves.',
        epilog='exit status: 0 identical in all compared; 1 something differs; 2 bad '
        'arguments, or a run record, trace, log or checkpoint is missing or corrupted '
        '(the file and problem are named); 3 inconclusive: nothing both runs hold could be '
        'compared')
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


def load_checkpoint_run(label: str, path: str) -> RunData:
    """A checkpoint file as a run: its weights, and its ``meta['run_record']`` if any.

    Raises:
        RunRecordError: The checkpoint cannot be read, or its record is incomplete.
    """
    try:
        checkpoint, iteration = read_checkpoint(path)
    except WeightsReadError as err:
        raise RunRecordError(str(err)) from None
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    record = meta.get('run_record') if isinstance(meta, dict) else None
    if record is not None and not (isinstance(record, dict)
                                   and all(k in record for k in REQUIRED_KEYS)):
        raise RunRecordError(f"{path}: meta['run_record'] is not a complete run record")
    at = iteration if iteration is not None else 0
    run = RunData(label, path, record, path)
    run.evidence = Evidence(label, checkpoint=at)
    run.evidence.weights.files[at] = path
    return run


def load_run(label: str, path: str) -> RunData:
    """Read the record, trace, scalars log and weights of one run.

    Given a work dir with several log dirs (a run stopped and resumed, each start
    writing its own ``<timestamp>/``), the traces and scalars logs of all of them are
    joined in iteration order, a later log dir's row replacing an earlier one's for the
    same iteration; the record is the newest one. The weights are those recorded in
    every log dir's record and those of the checkpoints in the work dir.

    Raises:
        RunRecordError: The record (or the scalars log) is missing or corrupted.
        TraceError: The trace exists but is corrupted.
    """
    if path.endswith(CHECKPOINT_SUFFIXES) and not osp.isdir(path):
        return load_checkpoint_run(label, path)
    record, source = load_run_record(path)
    run = RunData(label, path, record, source)
    run.log_dir = osp.dirname(source)
    log_dirs = [run.log_dir]
    work_dir = osp.dirname(run.log_dir) or '.'
    if osp.samefile(work_dir, path):
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
    run.evidence = Evidence(label, run.scalars, run.trace[1] if run.trace else None)
    run.evidence.weights.add_records([load_run_record(d)[0] for d in log_dirs[:-1]]
                                     + [record])
    run.evidence.weights.add_work_dir(work_dir)
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
    except (RunRecordError, TraceError, WeightsReadError, OSError) as err:  # OSError: plot
        print(f'{PROG}: error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
