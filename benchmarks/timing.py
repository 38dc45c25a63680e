"""Shared by the benchmarks: time spent inside a function, accumulated in a cell."""
from __future__ import annotations

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
