"""Time mmrepro's own work inside one training run, component by component.

:class:`Probe` wraps mmrepro's functions and methods (``bench_overhead.py`` lists which)
with timers that add each call's time to the label of its component, in the bucket of
the training iteration running (two hooks open and close it, at the highest and lowest
priority), or, outside an iteration, to the run's totals. A batch sampler's ``next`` runs
before its iteration opens: it is added to the next one. Each row is a median over the
iterations of its kind, so a slow moment of the machine moves no row: what is measured
is mmrepro's work itself, not two runs' difference.
"""
from __future__ import annotations

import statistics
import time
from collections import defaultdict
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

#: A row of the per-iteration table: (label, depth) where depth 1 is "of which".
Row = Tuple[str, int]


class Iteration(NamedTuple):
    """One training iteration's timings: seconds and calls per label, traced or not."""

    index: int
    traced: bool
    seconds: Dict[str, float]
    calls: Dict[str, int]


class Probe:
    """Timers around mmrepro's code, collected per training iteration (see the module)."""

    def __init__(self) -> None:
        self.iterations: List[Iteration] = []
        self.outside: Dict[str, float] = defaultdict(float)
        self.outside_calls: Dict[str, int] = defaultdict(int)
        self._current: Optional[Iteration] = None
        self._pending: Tuple[Dict[str, float], Dict[str, int]] = (defaultdict(float),
                                                                  defaultdict(int))
        self._restore: List[Tuple[Any, str, Any]] = []

    # ---------------------------------------------------------------- collecting
    def add(self, label: str, seconds: float, pending: bool = False) -> None:
        """Add one call of ``label``: to the open iteration, the next one
        (``pending``), or the run's totals."""
        if self._current is not None and not pending:
            seconds_of, calls_of = self._current.seconds, self._current.calls
        elif pending:
            seconds_of, calls_of = self._pending
        else:
            seconds_of, calls_of = self.outside, self.outside_calls
        seconds_of[label] += seconds
        calls_of[label] += 1

    def open(self, index: int, traced: bool) -> None:
        """Iteration ``index`` starts (with what its batch sampler took before it)."""
        seconds, calls = self._pending
        self._current = Iteration(index, traced, defaultdict(float, seconds),
                                  defaultdict(int, calls))
        self._pending = (defaultdict(float), defaultdict(int))

    def close(self) -> None:
        """The open iteration ends."""
        if self._current is not None:
            self.iterations.append(self._current)
        self._current = None

    def wrap(self, owner: Any, name: str, label: str, pending: bool = False) -> None:
        """Time every call of ``owner.name`` (a function, method or instance attribute);
        ``pending``: it runs before the iteration it serves opens (fetching its batch)."""
        original = getattr(owner, name)
        probe = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                probe.add(label, time.perf_counter() - start, pending)

        self._restore.append((owner, name, owner.__dict__.get(name, _ABSENT)
                              if hasattr(owner, '__dict__') else original))
        setattr(owner, name, timed)

    def wrap_batches(self, owner: Any, name: str, label: str) -> None:
        """Time every ``next`` of the iterator ``owner.name`` returns (a batch sampler's
        ``__iter__``), each for the iteration it feeds."""
        original = getattr(owner, name)
        probe = self

        def batches(*args: Any, **kwargs: Any) -> Iterator[Any]:
            found = original(*args, **kwargs)
            while True:
                start = time.perf_counter()
                try:
                    batch = next(found)
                except StopIteration:
                    return
                finally:
                    probe.add(label, time.perf_counter() - start, pending=True)
                yield batch

        self._restore.append((owner, name, owner.__dict__.get(name, _ABSENT)))
        setattr(owner, name, batches)

    def restore(self) -> None:
        """Put every wrapped attribute back."""
        for owner, name, original in reversed(self._restore):
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._restore = []

    # ---------------------------------------------------------------- reporting
    def kinds(self, after: int) -> Dict[str, List[Iteration]]:
        """The iterations from index ``after`` on, by kind: ``untraced``, ``traced``
        (the first iteration apart: ``first``)."""
        out: Dict[str, List[Iteration]] = dict(untraced=[], traced=[], first=[])
        for it in self.iterations:
            if it.index == 0:
                out['first'].append(it)
            elif it.index >= after or it.traced:
                out['traced' if it.traced else 'untraced'].append(it)
        return out


_ABSENT = object()


def resolution(repeat: int = 20000) -> float:
    """What a timer records around a call that does nothing (seconds per call)."""
    probe = Probe()

    class Owner:
        @staticmethod
        def nothing() -> None:
            return None

    probe.wrap(Owner, 'nothing', 'nothing')
    for _ in range(repeat):
        Owner.nothing()
    return probe.outside['nothing'] / repeat


def ms(seconds: float) -> str:
    return f'{seconds * 1e3:.3f}'


def median_of(iterations: Sequence[Iteration], label: str,
              derive: Optional[Callable[[Iteration], float]] = None) -> float:
    """The median seconds of ``label`` (or of ``derive(iteration)``) over iterations."""
    if not iterations:
        return float('nan')
    return statistics.median(derive(it) if derive else it.seconds.get(label, 0.0)
                             for it in iterations)


def calls_of(iterations: Sequence[Iteration], label: str) -> str:
    """Calls per iteration (median)."""
    if not iterations:
        return '-'
    return f'{statistics.median(it.calls.get(label, 0) for it in iterations):g}'
