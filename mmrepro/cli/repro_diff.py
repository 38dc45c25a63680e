"""``tools/repro_diff.py``: do two training runs (or two test runs) match, and if not, why?

Compares two runs (work dirs, log dirs, ``run_record.json`` files or checkpoints):

1. their run records (:mod:`mmrepro.record.run_record`): seed, randomness, world size,
   backend, versions, devices, environment, PyTorch flags, every config key, the
   training data fingerprint (keys that cannot change training listed apart, as
   information: :mod:`mmrepro.checks.diff_verdict`);
2. everything both runs hold (:mod:`mmrepro.checks.evidence`): every logged iteration's
   losses (``vis_data/scalars.json``; not where the runs log with other
   ``log_processor`` settings, which average other windows), every traced iteration
   (:mod:`mmrepro.trace`: first differing module, whether the samples were the same),
   and the weights at every checkpoint both know, the final ones included; two
   checkpoint files compare by their weights;
3. a verdict (:mod:`mmrepro.checks.diff_verdict`): a data or a numeric difference and
   the recorded differences that explain it, ranked, each with the setting or command
   that removes it; identical only when all of it agrees, and only "through iteration k"
   when the runs cover different spans;
4. every validation both runs recorded (:mod:`mmrepro.checks.evaluations`): metrics and
   predictions, the first image whose predictions differ; "same weights, different
   validation" where training agrees (:mod:`mmrepro.checks.eval_verdict`);
5. optionally (``--plot out.png``) both runs' logged losses at every logged iteration,
   the traced ones marked, the verdict in the title (:mod:`.diff_plot`).

Two test runs (``mmrepro-test``: their ``test_record.json`` or log dirs) compare by their
settings, their checkpoints' weights digests and their predictions, image by image.

Exit status (:data:`mmrepro.cli.exit_codes.EXIT_CODES`): :data:`IDENTICAL`,
:data:`DIFFERENT`, :data:`BAD_INPUT`, :data:`INCONCLUSIVE` or :data:`SETTINGS_DIFFER`.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..checks.against.verdict import say_rounding
from ..checks.diff.rounding import diff_rounding, envelope_band
from ..checks.causes import sort_settings, unkeyed_generators
from ..checks.diff.verdict import settings_verdict, verdict_lines
from ..checks.envelope import Rounding
from ..checks.eval_verdict import checkpoint_lines, compare_test_runs, validation_verdict
from ..checks.evaluations import compare_evaluations, evaluation_lines
from ..checks.evidence import Comparison, compare_evidence, weights_lines
from ..checks.run_data import SCALARS, RunData, load_run, read_scalars
from ..record.bundle import BundleError
from ..record.initial_weights import initial_differences
from ..record.run_record import MISSING, RunRecordError, diff_records
from ..record.weights_index import WeightsReadError
from ..trace import TraceDiff, TraceError, comparable_sections, compare_traces, describe_diff
from .config_args import ArgumentParser
from .diff_plot import plot_losses, run_curves
from .exit_codes import epilog

__all__ = ['BAD_INPUT', 'DIFFERENT', 'IDENTICAL', 'INCONCLUSIVE', 'SCALARS',
           'SETTINGS_DIFFER', 'load_run', 'main', 'read_scalars']

PROG = 'repro_diff'
#: Identical in everything compared; no setting that can change training differs.
IDENTICAL = 0
#: The outcomes differ, or nothing compared and settings that change training differ.
DIFFERENT = 1
#: Bad arguments, or a run that cannot be read (one ``error:`` line).
BAD_INPUT = 2
#: Nothing both runs hold could be compared.
INCONCLUSIVE = 3
#: Identical in everything compared, although settings that can change training differ.
SETTINGS_DIFFER = 4
_SHORT = 100  # longest value shown in full
_VALUED = 4  # settings that cannot change training shown with their values
Diff = Tuple[str, Any, Any]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line (argparse exits with status 2 on a malformed one)."""
    parser = ArgumentParser(
        prog=PROG, description='Compare two training runs: run records, logged losses, '
        'traces, weights digests; the first diverging iteration and module, the recorded '
        'causes and what removes each; loss curves.', epilog=epilog(PROG))
    parser.add_argument('run_a', help='work dir, log dir, run_record.json, checkpoint or '
                        'bundle (.tar.gz)')
    parser.add_argument('run_b', help='work dir, log dir, run_record.json, checkpoint or '
                        'bundle (.tar.gz)')
    parser.add_argument('--bitwise', action='store_true',
                        help='require bit for bit: runs that are only equivalent within '
                        'rounding then exit 1 (default: 0)')
    parser.add_argument('--no-envelope', action='store_true',
                        help="where the traces differ, do not measure this machine's "
                        "rounding envelope (two short runs of A's config) to say whether "
                        'the difference is rounding or real')
    parser.add_argument('--plot', metavar='OUT.png', help='write both runs\' losses here: '
                        'every logged iteration, the traced ones marked, the verdict in the '
                        'title')
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


def judge(a: RunData, b: RunData, differences: List[Diff],
          result: Comparison) -> Tuple[List[str], int]:
    """The verdict lines and the exit status (:data:`IDENTICAL`, :data:`DIFFERENT`,
    :data:`INCONCLUSIVE` or :data:`SETTINGS_DIFFER`)."""
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


def _curves(a: RunData, b: RunData, out: str) -> Tuple[Any, Any]:
    """Both runs' loss curves for ``--plot``.

    Raises:
        RunRecordError: A run holds no loss values (no trace and no scalars log).
    """
    curves = [run_curves(run.trace, run.scalars) for run in (a, b)]
    for run, curve in zip((a, b), curves, strict=True):
        if not (curve.logged or curve.traced):
            raise RunRecordError(f'--plot {out}: {run.path} holds no loss values (no trace '
                                 f'and no {SCALARS}); plot runs that log or trace their '
                                 'losses, or leave --plot out')
    return curves[0], curves[1]


def test_diff(a: RunData, b: RunData) -> int:
    """Compare two test runs (``mmrepro-test``); print; return the exit status."""
    settings = describe_records(a, b, places=('config.load_from',))
    checkpoints, same_weights = checkpoint_lines(a.record or {}, b.record or {})
    diff, verdict, identical = compare_test_runs(a.evaluations, b.evaluations, same_weights,
                                                settings.kept)
    for line in (*settings.lines, *checkpoints, *evaluation_lines(diff), *verdict):
        print(line)
    if not diff.common:
        return INCONCLUSIVE
    return IDENTICAL if identical else DIFFERENT


def _kinds(a: RunData, b: RunData) -> None:
    """Both runs trained, or both only tested.

    Raises:
        RunRecordError: One is a test run and the other a training run.
    """
    if a.kind == b.kind:
        return
    test, train = (a, b) if a.kind == 'test' else (b, a)
    raise RunRecordError(f'{test.path} is a test run (test_record.json) and {train.path} a '
                         'training run; give two test runs, or two training runs (their '
                         'validations are compared)')


def run_diff(args: argparse.Namespace) -> int:
    """Compare, print, plot; return the exit status (:func:`judge`)."""
    a, b = load_run('A', args.run_a), load_run('B', args.run_b)
    _kinds(a, b)
    curves = _curves(a, b, args.plot) if args.plot else None
    for run in (a, b):
        print(f'{run.label}: {run.source}')
        if run.stitched:
            print(f'  a resumed run: {len(run.stitched)} log dirs joined in iteration order: '
                  + ', '.join(f'{name} (iterations {first}-{last})'
                              for name, first, last in run.stitched))
    if a.kind == 'test':
        return test_diff(a, b)
    settings = describe_records(a, b)
    traced, trace_diff = trace_lines(a, b)
    logged = not any(key.startswith(LOG_SETTINGS) for key, _, _ in settings.inert)
    result = compare_evidence(a.evidence, b.evidence, trace_diff, logged=logged)
    notes = a.evidence.weights.notes + b.evidence.weights.notes
    verdict, status = judge(a, b, settings.kept, result)
    evaluations = compare_evaluations(a.evaluations, b.evaluations)
    for line in (*settings.lines, *traced, *logged_lines(a, b, result),
                 *weights_lines(result, notes), *evaluation_lines(evaluations)):
        print(line)
    if status != DIFFERENT and evaluations.first is not None:
        same = bool(result.weights) and result.weights_first is None
        sizes = tuple((run.record or {}).get('world_size') for run in (a, b))
        verdict = [*verdict[:1], *validation_verdict(evaluations, same, sizes)]
        status = DIFFERENT
    rounding = None
    if status == DIFFERENT and numeric(a, b, trace_diff) and not args.no_envelope:
        rounding = diff_rounding(a, b)
        say_rounding(rounding, print, 'of A and B')
        verdict, status = _with_rounding(verdict, rounding, args.bitwise)
    for line in verdict:
        print(line)
    if curves is not None:
        title = next(line for line in verdict if line.startswith('verdict: '))
        band, ratios = envelope_band(a, rounding)
        plot_losses(curves[0], curves[1], args.plot, title.removeprefix('verdict: '),
                    result.first, f'A: {a.path}', f'B: {b.path}', band, ratios)
        print(f'plot: {args.plot}')
    return status


def numeric(a: RunData, b: RunData, diff: Optional[TraceDiff]) -> bool:
    """Whether the traces differ in their numbers alone: a traced step differs, the
    samples and the initial weights do not."""
    return (diff is not None and bool(diff.common) and not diff.identical
            and diff.data_iteration is None and not initial_differences(a.record, b.record))


def _with_rounding(verdict: List[str], rounding: Rounding,
                   bitwise: bool) -> Tuple[List[str], int]:
    """The verdict lines with the rounding-or-real verdict, and the exit status."""
    at = next(i for i, line in enumerate(verdict) if line.startswith('verdict: '))
    lines = list(verdict)
    lines[at] += f'; {rounding.clause(bitwise)}'
    return lines, IDENTICAL if rounding.passes(bitwise) else DIFFERENT


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``tools/repro_diff.py``; returns the exit status."""
    args = parse_args(argv)
    try:
        return run_diff(args)
    except (RunRecordError, TraceError, WeightsReadError, BundleError, OSError) as err:
        print(f'{PROG}: error: {err}', file=sys.stderr)
        return BAD_INPUT


if __name__ == '__main__':
    sys.exit(main())
