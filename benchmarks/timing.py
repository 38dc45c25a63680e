"""Shared by the benchmarks: time spent inside a function, accumulated in a cell; the
median time of a call; the loader benchmarks' command line; a measured table printed and
written."""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from functools import wraps
from typing import Any, Callable, List, Optional


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


def median_seconds(run: Callable[[], Any], repeats: int) -> float:
    """The median of ``repeats`` timings of ``run()``, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def loader_arguments(description: str) -> argparse.Namespace:
    """``--passes``, ``--data`` and ``--scale`` of the data-loading benchmarks."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--passes', type=int, default=10)
    parser.add_argument('--data', default='data/demo')
    parser.add_argument('--scale', type=int, nargs=2, default=(160, 128))
    return parser.parse_args()


def report(title: str, threads: int, measured: str, rows: List[str],
           out: Optional[str]) -> None:
    """Print a measured table under a line saying when, where and how; also write it as a
    Markdown page titled ``title`` to ``out`` (None: print only).

    Args:
        title: The page's title.
        threads: The intra-op thread count the numbers were taken with.
        measured: How they were taken, e.g. ``median of 5``.
        rows: The table's Markdown rows, header first.
        out: The Markdown file to write, or None.
    """
    import torch
    head = (f'Measured {datetime.date.today()} on {platform.processor() or platform.machine()}'
            f' ({os.cpu_count()} cores, torch {torch.__version__}, {threads} threads), '
            f'{measured}.')
    text = '\n'.join([head, '', *rows])
    print(text)
    if out:
        with open(out, 'w') as f:
            f.write(f'# {title}\n\n{text}\n')
