"""Calling a tool's ``main`` in this process, as its console script would."""
from typing import Callable, List, Tuple

#: The first bytes of every PNG file (``--plot`` writes one).
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def run_main(main: Callable[[List[str]], int], capsys, *argv: str) -> Tuple[int, str, str]:
    """``main(argv)``: its exit code, and what it printed to stdout and stderr."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
