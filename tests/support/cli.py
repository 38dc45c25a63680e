"""Calling a tool's ``main`` in this process, as its console script would."""
import sys
from typing import Any, Callable, List, Tuple

#: The first bytes of every PNG file (``--plot`` writes one).
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def run_main(main: Callable[[List[str]], int], capsys, *argv: str) -> Tuple[int, str, str]:
    """``main(argv)``: its exit code, and what it printed to stdout and stderr."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_console(main: Callable[[List[str]], Any], capsys, *argv: str) -> Tuple[int, str, str]:
    """``sys.exit(main(argv))``, as a tool's console script runs it, in this process: the
    exit status the interpreter would end with, and what was printed to stdout and stderr.

    ``main`` (or its argument parser) may exit by ``sys.exit``: ``SystemExit`` is caught.
    As the interpreter does, None is status 0, and any other non-integer is printed to
    stderr, status 1.
    """
    try:
        code = main(list(argv))
    except SystemExit as stop:
        code = stop.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    captured = capsys.readouterr()
    return 0 if code is None else code, captured.out, captured.err
