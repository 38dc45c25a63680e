"""The tools' argument parser, error line and ``work_dir``.

Every error is one line, ``<name>: error: <message>``, with exit status 2. ``<name>`` is
the tool's console script (setup.cfg's ``console_scripts``: ``mmrepro-train``,
``mmrepro-test``, ``mmrepro-matrix``...) however it was started (the console script,
``tools/train.py``, ``python -m mmrepro.cli.train``): one name per tool, the one its
``--help`` and the documentation use. Configs and ``--cfg-options`` are loaded by
:mod:`mmrepro.run.config`, whose :class:`~mmrepro.run.config.ConfigError` messages the
tools print with :func:`report`.
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from typing import Any, List, NoReturn, Optional

from ..run.config import ConfigError


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one ``error:`` line (no usage block).

    Args:
        prog: The tool's console script name, which begins its usage and error lines
            (not ``sys.argv[0]``, which differs with the way the tool was started).
        **kwargs: ``argparse.ArgumentParser``'s other arguments.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        super().__init__(prog=prog, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message>`` and exit with status 2."""
        sys.exit(report(self.prog, ConfigError(message)))


def report(prog: str, err: BaseException, status: int = 2) -> int:
    """Print ``err`` as ``<prog>: error: <err>`` on stderr; return ``status``.

    Args:
        prog: The tool's console script name (``mmrepro-train``...).
        err: What was wrong, in one line.
        status: The exit status. Defaults to 2 (bad input).
    """
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


def set_work_dir(cfg: Any, work_dir: Optional[str], config: str) -> None:
    """Set ``cfg.work_dir`` as MMDetection's ``tools/train.py`` and ``tools/test.py`` do:
    ``--work-dir`` where given, else the config's ``work_dir``, else
    ``./work_dirs/<config file name without .py>``.

    Args:
        cfg: The loaded config.
        work_dir: ``--work-dir`` (None: not given).
        config: The config file's path, as given.
    """
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config))[0])
