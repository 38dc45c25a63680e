"""The tools' argument parser and error line: one ``error:`` line, exit status 2.

Configs and ``--cfg-options`` are loaded by :mod:`mmrepro.run.config`, whose
:class:`~mmrepro.run.config.ConfigError` messages the tools print with :func:`report`.
"""
from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from ..run.config import ConfigError


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one ``error:`` line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message>`` and exit with status 2."""
        sys.exit(report(self.prog, ConfigError(message)))


def report(prog: str, err: BaseException) -> int:
    """Print ``err`` as the tool's ``error:`` line on stderr; return exit status 2."""
    print(f'{prog}: error: {err}', file=sys.stderr)
    return 2
