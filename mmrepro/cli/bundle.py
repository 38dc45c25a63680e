"""``mmrepro-bundle``: pack a run into the one file a team shares (a baseline bundle).

See :mod:`mmrepro.record.bundle` for what goes in. ``mmrepro-diff`` compares a bundle
like a work dir.
"""
from __future__ import annotations

import argparse
import os.path as osp
import sys
from typing import List, Optional, Sized

from ..record.bundle import BundleError, pack
from ..record.weights_index import WeightsReadError
from .config_args import ArgumentParser

PROG = 'mmrepro-bundle'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the work dir, the output file and ``--weights``."""
    parser = ArgumentParser(
        prog=PROG, description='Pack a run (config dump, run record with the data '
        'fingerprint, trace, logged losses, every checkpoint\'s weights digest) into one '
        '.tar.gz to share instead of the work dir.',
        epilog='exit status: 0 bundle written; 2 bad arguments, WORK_DIR holds no run '
        'record, OUT exists (never overwritten) or its directory does not, or a checkpoint '
        'is unreadable')
    parser.add_argument('work_dir', metavar='WORK_DIR',
                        help='the run\'s work dir (or one of its log dirs)')
    parser.add_argument('out', metavar='OUT', help='the bundle to write (.tar.gz)')
    parser.add_argument('--weights', action='store_true',
                        help='also pack the last checkpoint (left out by default)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``mmrepro-bundle``; returns the exit status."""
    args = parse_args(argv)
    try:
        manifest = pack(args.work_dir, args.out, weights=args.weights)
    except (BundleError, WeightsReadError) as err:
        print(f'{PROG}: error: {err}', file=sys.stderr)
        return 2
    size = osp.getsize(args.out)
    weights = 'with the last checkpoint' if args.weights else 'without the weights'
    print(f"bundle: {args.out} ({size / 1024:.0f} KiB, {_count(manifest['files'], 'file')}, "
          f"{_count(manifest['checkpoints'], 'checkpoint digest')}, {weights})")
    return 0


def _count(items: Sized, noun: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


if __name__ == '__main__':
    sys.exit(main())
