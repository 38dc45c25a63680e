"""``mmrepro-diff`` (``tools/repro_diff.py``): do two training runs (or two test runs) match,
and if not, why?

The arguments, the output and the exit status; the comparison and its verdict are
:mod:`mmrepro.checks.diff` (:func:`~mmrepro.checks.diff.run.diff_runs`,
:func:`~mmrepro.checks.diff.run.diff_test_runs`). Optionally (``--plot out.png``) both
runs' logged losses at every logged iteration, the traced ones marked, the verdict in the
title (:mod:`.diff_plot`).

Exit status (:data:`mmrepro.cli.exit_codes.EXIT_CODES`): :data:`IDENTICAL`,
:data:`DIFFERENT`, :data:`BAD_INPUT`, :data:`INCONCLUSIVE` or :data:`SETTINGS_DIFFER`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, List, Optional, Tuple

from ..checks.diff.report import source_lines
from ..checks.diff.rounding import envelope_band
from ..checks.diff.run import diff_runs, diff_test_runs, load_pair
from ..checks.diff.verdict import DIFFERENT, IDENTICAL, INCONCLUSIVE, SETTINGS_DIFFER
from ..checks.run_data import SCALARS, RunData
from ..record.bundle import BundleError
from ..record.run_record import RunRecordError
from ..record.weights_index import WeightsReadError
from ..trace import TraceError
from .config_args import ArgumentParser
from .diff_plot import plot_losses, run_curves
from .exit_codes import epilog

__all__ = ['BAD_INPUT', 'DIFFERENT', 'IDENTICAL', 'INCONCLUSIVE', 'SETTINGS_DIFFER', 'main']

#: The console script users type, in its errors.
PROG = 'mmrepro-diff'
#: Bad arguments, or a run that cannot be read (one ``error:`` line).
BAD_INPUT = 2


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line (argparse exits with status 2 on a malformed one)."""
    parser = ArgumentParser(
        prog=PROG, description='Compare two training runs: run records, logged losses, '
        'traces, weights digests; the first diverging iteration and module, the recorded '
        'causes and what removes each; loss curves.', epilog=epilog('repro_diff'))
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


def run_diff(args: argparse.Namespace) -> int:
    """Compare, print, plot; return the exit status."""
    a, b = load_pair(args.run_a, args.run_b)
    curves = _curves(a, b, args.plot) if args.plot else None
    for line in source_lines(a, b):
        print(line)
    if a.kind == 'test':
        return diff_test_runs(a, b, print)
    result = diff_runs(a, b, print, bitwise=args.bitwise, envelope=not args.no_envelope)
    if curves is not None:
        title = next(line for line in result.verdict if line.startswith('verdict: '))
        band, ratios = envelope_band(a, result.rounding)
        plot_losses(curves[0], curves[1], args.plot, title.removeprefix('verdict: '),
                    result.first, f'A: {a.path}', f'B: {b.path}', band, ratios)
        print(f'plot: {args.plot}')
    return result.status


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
