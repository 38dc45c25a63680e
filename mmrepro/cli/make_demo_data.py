"""``tools/make_demo_data.py``: write the tiny COCO-format demo dataset.

The data is a function of the arguments; an identical dataset already there is kept,
and a directory holding annotations this tool did not write is refused.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..demo.tiny_coco import make_tiny_coco
from .config_args import ArgumentParser, report

PROG = 'mmrepro-demo-data'


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be >= 1, got {value}')
    return value


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the output directory, the image counts and the seed."""
    parser = ArgumentParser(
        prog=PROG, description='Write the tiny COCO-format demo dataset (coloured boxes '
        'on noise, each with its box and polygon).',
        epilog='exit status: 0 written (or already there); 2 bad arguments, or ROOT holds '
        'annotations this tool did not write (nothing is changed)')
    parser.add_argument('root', nargs='?', default='data/demo',
                        help='output directory (default: data/demo)')
    parser.add_argument('--num-train', type=_count, default=16,
                        help='training images (default: 16)')
    parser.add_argument('--num-val', type=_count, default=8,
                        help='validation images (default: 8)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the generator (default: 0)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``tools/make_demo_data.py``; returns the exit status."""
    args = parse_args(argv)
    try:
        paths = make_tiny_coco(args.root, args.num_train, args.num_val, args.seed)
    except FileExistsError as exc:
        return report(PROG, exc)
    print(f"demo data ready: {paths['root']}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
