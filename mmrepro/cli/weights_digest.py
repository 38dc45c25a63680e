"""``mmrepro-digest``: the weights digest of checkpoints, one line each.

Prints ``<sha256>  <checkpoint>  (iteration N; what it covers)`` like ``sha256sum``,
but over the weights alone (:func:`mmrepro.resume.digests.weights_digest`): two
bit-identical runs print the same line whatever else their files hold, and a
checkpoint written without mmrepro (MMEngine's, or a bare ``state_dict``) gets one
too. Files load through mmrepro's allow-list, never arbitrary unpickling.
"""
from __future__ import annotations

import argparse
import os.path as osp
import sys
from typing import List, Optional

from ..record.weights_index import WeightsReadError, checkpoint_weights
from ..resume.preflight import checkpoints_in
from .config_args import ArgumentParser

PROG = 'mmrepro-digest'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the checkpoint paths."""
    parser = ArgumentParser(
        prog=PROG, description='Print the digest of each checkpoint\'s weights (state_dict '
        'and EMA state): equal digests mean equal weights, byte for byte.',
        epilog='exit status: 0 every digest printed; 2 bad arguments, or a file is '
        'missing, unreadable or holds no weights (named; the files before it are printed)')
    parser.add_argument('checkpoints', nargs='+', metavar='CHECKPOINT',
                        help='.pth files (MMEngine/mmrepro checkpoints or state dicts)')
    return parser.parse_args(argv)


def digest_line(path: str) -> str:
    """``<sha256>  <path>  (iteration N; covers)`` of one checkpoint.

    Raises:
        WeightsReadError: The file cannot be read or holds no weights, or ``path`` is a
            directory.
    """
    if osp.isdir(path):
        found = checkpoints_in(path)
        raise WeightsReadError(f'{path}: a directory, expected a checkpoint file (.pth) in '
                               f'it, e.g. {found[-1]}' if found else
                               f'{path}: a directory holding no checkpoint, expected a '
                               'checkpoint file (.pth)')
    weights = checkpoint_weights(path)
    notes = [f'iteration {weights.iteration}' if weights.iteration is not None
             else 'iteration unknown', weights.covers]
    if weights.recorded is not None and weights.recorded != weights.digest:
        notes.append('differs from the digest recorded when it was saved, '
                     f'{weights.recorded[:12]}: the file was changed since')
    return f"{weights.digest}  {path}  ({'; '.join(notes)})"


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``mmrepro-digest``; returns the exit status."""
    args = parse_args(argv)
    for path in args.checkpoints:
        try:
            print(digest_line(path), flush=True)
        except WeightsReadError as err:
            print(f'{PROG}: error: {err}', file=sys.stderr)
            return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
