"""The tools' argument parser and error line: one ``error:`` line, exit status 2.

Configs and ``--cfg-options`` are loaded by :mod:`mmrepro.run.config`, whose
:class:`~mmrepro.run.config.ConfigError` messages the tools print with :func:`report`.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, NoReturn, Optional

from ..run.config import ConfigError


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one ``error:`` line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message>`` and exit with status 2."""
        sys.exit(report(self.prog, ConfigError(message)))


def report(prog: str, err: BaseException, status: int = 2) -> int:
    """Print ``err`` as the tool's ``error:`` line on stderr; return ``status`` (2: bad
    input)."""
    print(f'{prog}: error: {err}', file=sys.stderr)
    return status


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``tools/train.py`` and ``tools/test.py`` share: MMDetection's
    ``--cfg-options`` (kept a list of ``KEY=VALUE`` strings, parsed by
    :func:`mmrepro.run.config.load_config`), ``--launcher`` and ``--local_rank``, and
    mmrepro's ``--deterministic``/``--no-deterministic`` and
    ``--verify-checkpoints``/``--no-verify-checkpoints``."""
    parser.add_argument(
        '--cfg-options', nargs='+', action='extend', default=[], metavar='KEY=VALUE',
        help='override some settings in the used config, the key-value pair in xxx=yyy '
        'format will be merged into config file.')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    # With PyTorch >= 2.0, `torch.distributed.launch` passes `--local-rank`, not
    # `--local_rank`.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help='set by torch.distributed.launch (sets LOCAL_RANK)')
    parser.add_argument('--deterministic', action=argparse.BooleanOptionalAction,
                        default=None, help='deterministic algorithms on or off (overrides '
                        'randomness.deterministic)')
    parser.add_argument('--verify-checkpoints', action=argparse.BooleanOptionalAction,
                        default=None, help='refuse a checkpoint that does not match the '
                        'digests saved in it (the default); --no-verify-checkpoints loads it '
                        'anyway and the run record says so (overrides '
                        'randomness.verify_checkpoints)')


def parse_run_args(parser: argparse.ArgumentParser,
                   argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse ``argv``; set ``LOCAL_RANK`` from ``--local_rank`` where the launcher did not,
    as MMDetection's tools do."""
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args
