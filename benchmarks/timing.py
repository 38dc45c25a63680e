"""Shared by the benchmarks: time spent inside a function, accumulated in a cell; the
loader benchmarks' command line."""
from __future__ import annotations

import argparse
import time
from functools import wraps
from typing import Any, Callable, List


def timed(function: Callable, total: List[float]) -> Callable:
    """``function`` wrapped to add the seconds each call takes to ``total[0]``."""
    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - start
    return wrapper


def loader_arguments(description: str) -> argparse.Namespace:
    """``--passes``, ``--data`` and ``--scale`` of the data-loading benchmarks."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--passes', type=int, default=10)
    parser.add_argument('--data', default='data/demo')
    parser.add_argument('--scale', type=int, nargs=2, default=(160, 128))
    return parser.parse_args()
