"""``tools/support_matrix.py``: which MMDetection families train bit-exactly, measured.

For every family config in ``configs/zoo/`` (and the other codebases' families named in
``--families``: a model of mmpretrain's, mmpose's, mmrotate's or MMYOLO's zoo) this runs
the checks of
:mod:`mmrepro.checks.matrix.run` (rerun, another ``num_workers``, resume
mid-epoch, resume from every epoch) and prints a Markdown table, also written to
``--out`` (default ``benchmarks/results/support_matrix_<device>.md``). The device is the
one training uses: CUDA when visible, else CPU.
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import platform
import sys
import tempfile
import time
from typing import List, Optional

import torch

from ..checks.matrix.run import (
    CHECKS,
    CODEBASE_FAMILIES,
    FAMILIES,
    RESULTS_DIR,
    device_name,
    family_config,
    format_table,
    run_family_checks,
)
from ..checks.runs import load_config
from ..run.config import parse_cfg_options
from .config_args import ArgumentParser, report

PROG = 'mmrepro-matrix'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Command-line arguments of ``tools/support_matrix.py``."""
    parser = ArgumentParser(
        prog=PROG, description=__doc__.split('\n\n')[0].replace('``', ''),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='exit status: 0 every family bit-exact; 1 some family is not (named in the '
        'table); 2 bad arguments or --cfg-options (one error: line, before anything is '
        'written)')
    parser.add_argument('--families', nargs='+', default=list(FAMILIES), metavar='NAME',
                        help=f'families to check (default: the zoo\'s, {" ".join(FAMILIES)}; '
                        f'the other codebases\' when named: {" ".join(CODEBASE_FAMILIES)})')
    parser.add_argument('--iters', type=int, default=4,
                        help='iterations per run (default: 4)')
    parser.add_argument('--checks', nargs='*', default=list(CHECKS), choices=CHECKS,
                        metavar='CHECK', help='columns to measure besides the rerun: '
                        f'{" ".join(CHECKS)} (default: all; none: reruns only)')
    parser.add_argument('--epochs', type=int, default=4,
                        help='schedule length of the "epochs" check, switch hooks in its '
                        'middle (default: 4)')
    parser.add_argument('--work-dir', default=osp.join('work_dirs', 'support_matrix'),
                        help='where the runs go (default: work_dirs/support_matrix)')
    parser.add_argument('--data-root', default=osp.join('data', 'demo'),
                        help='tiny COCO data; generated there if missing (default: '
                        'data/demo)')
    parser.add_argument('--jobs', type=int, default=1,
                        help='families checked at a time (default: 1; the throughput '
                        'column needs 1)')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='overrides for every run, as in tools/train.py')
    parser.add_argument('--discard-checkpoints', action='store_true',
                        help="delete each family's checkpoints once compared")
    parser.add_argument('--out', default=None,
                        help='Markdown file to write (default: benchmarks/results/'
                        'support_matrix_<device>.md)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Check every family, print and write the table; 0 if all are bit-exact, else 1."""
    args = parse_args(argv)
    try:
        if args.iters < 2:
            raise ValueError(f'--iters must be >= 2 (the first iteration is not timed), got '
                             f'{args.iters}')
        if args.epochs < 2:
            raise ValueError(f'--epochs must be >= 2 (resumed from each but the last), '
                             f'got {args.epochs}')
        if args.jobs < 1:
            raise ValueError(f'--jobs must be >= 1, got {args.jobs}')
        parse_cfg_options(args.cfg_options)
        # Every family's config with the options, before any run (another codebase's
        # config written into a scratch directory).
        with tempfile.TemporaryDirectory() as scratch:
            for family in args.families:
                config = family_config(family, scratch, osp.abspath(args.data_root))
                try:
                    load_config(config, args.cfg_options)
                except ValueError as err:
                    raise ValueError(f'family {family}: {err}') from None
    except ValueError as err:
        return report(PROG, err)
    from ..demo import make_tiny_coco
    make_tiny_coco(args.data_root)
    device = device_name()
    results = run_family_checks(args.families, args.iters, args.work_dir, args.data_root,
                                args.jobs, args.cfg_options,
                                keep_checkpoints=not args.discard_checkpoints,
                                checks=args.checks, epochs=args.epochs)
    table = format_table(results)
    families = ('' if args.families == list(FAMILIES) else
                f'--families {" ".join(args.families)} ')
    header = (f'# Support matrix on {device}\n\nMeasured by `python tools/support_matrix.py '
              f'{families}--iters {args.iters} --jobs {args.jobs} --checks {" ".join(args.checks)} '
              f'--epochs {args.epochs}` on {time.strftime("%Y-%m-%d")}, '
              f'{os.cpu_count()} CPU cores: torch {torch.__version__}, CUDA '
              f'{torch.version.cuda or "n/a"}, Python {platform.python_version()}.\n\n')
    name = f"support_matrix_{device.replace(' ', '_').lower()}.md"
    out = args.out or (osp.join(RESULTS_DIR, name) if osp.isdir(RESULTS_DIR) else name)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        f.write(header + table + '\n')
    print('\n' + table + f'\n\nwritten to {out}')
    return 0 if all(r.bit_exact for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
