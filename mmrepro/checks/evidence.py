"""What two runs can be compared on, and what the comparison shows.

Three kinds of evidence, each compared wherever both runs hold it:

- **logged iterations**: the losses MMEngine logs into ``vis_data/scalars.json``
  (full float precision, averaged over the logging window);
- **traced iterations**: the trace's losses, sample, gradient and weight digests
  (:mod:`mmrepro.trace`);
- **weights**: digests of the weights at every checkpoint both runs know
  (:mod:`mmrepro.record.weights_index`), the final weights among them.

:class:`Comparison` says what was compared and the first iteration where anything
differs. Runs are called identical only when every piece agrees, and only over the span
both cover: :meth:`Comparison.span` names where the shorter run stops, or why the end
of training was not compared.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ..record.weights_index import WeightsIndex, compare_weights
from ..trace import TraceDiff

Rows = Sequence[Mapping[str, Any]]


@dataclass
class Evidence:
    """What one run holds.

    Attributes:
        label: ``A`` or ``B``.
        scalars: Its logged training rows (``iter`` and ``loss*`` keys).
        trace_lines: Its traced iterations (None without a trace).
        weights: Its weights by iteration.
        checkpoint: The iteration of the checkpoint file given instead of a run.
    """

    label: str
    scalars: Rows = ()
    trace_lines: Optional[Rows] = None
    weights: WeightsIndex = field(default_factory=WeightsIndex)
    checkpoint: Optional[int] = None

    def last(self) -> Optional[int]:
        """The last iteration the run holds evidence of (where it stops)."""
        seen = [row['iter'] for row in self.scalars]
        seen += [line['iter'] for line in self.trace_lines or ()]
        seen += self.weights.iterations()
        if self.weights.final is not None:
            seen.append(self.weights.final)
        return max(seen) if seen else None


def logged_divergence(rows_a: Rows, rows_b: Rows) -> Tuple[List[int], Optional[int],
                                                           Optional[int]]:
    """First logged iteration whose loss values differ.

    Returns:
        tuple: ``(common iterations, first differing iteration or None, the last equal
        logged iteration before it or None)``.
    """
    by_iter_b = {row['iter']: row for row in rows_b}
    common: List[int] = []
    first = previous = None
    for row in sorted(rows_a, key=lambda r: r['iter']):
        other = by_iter_b.get(row['iter'])
        if other is None:
            continue
        common.append(row['iter'])
        if first is not None:
            continue
        keys = sorted(k for k in set(row) | set(other) if k.startswith('loss'))
        if any(row.get(k) != other.get(k) for k in keys):
            first = row['iter']
        else:
            previous = row['iter']
    return common, first, previous


def _count(n: int, what: str) -> str:
    return f'{n} {what}' + ('' if n == 1 else 's')


@dataclass
class Comparison:
    """Everything two runs were compared on.

    Attributes:
        last: ``(A's last iteration, B's)``, None where unknown.
        logged: Logged iterations compared, in order.
        logged_first: The first logged iteration whose losses differ.
        logged_previous: The last equal logged iteration before it.
        trace: The trace comparison (None unless both runs have traces).
        weights: Iterations whose weights were compared.
        weights_first: ``(iteration, digest A, digest B)`` of the first that differs.
        checkpoints: ``(A's iteration, B's)`` when two checkpoint files were given;
            their weights are compared whatever iterations they hold.
        logged_skipped: The logged losses were left out (the runs log with other
            settings, so their values average other windows).
    """

    last: Tuple[Optional[int], Optional[int]] = (None, None)
    logged: List[int] = field(default_factory=list)
    logged_first: Optional[int] = None
    logged_previous: Optional[int] = None
    trace: Optional[TraceDiff] = None
    weights: List[int] = field(default_factory=list)
    weights_first: Optional[Tuple[int, str, str]] = None
    checkpoints: Optional[Tuple[Optional[int], Optional[int]]] = None
    logged_skipped: bool = False

    @property
    def traced(self) -> List[int]:
        """Traced iterations compared."""
        return list(self.trace.common) if self.trace is not None else []

    @property
    def differs(self) -> bool:
        """Whether any piece of evidence differs."""
        return (self.logged_first is not None or self.weights_first is not None
                or bool(self.trace is not None and self.trace.iteration is not None))

    @property
    def first(self) -> Optional[int]:
        """The first iteration where anything differs (None if nothing does)."""
        found = [self.logged_first, self.trace.iteration if self.trace else None,
                 self.weights_first[0] if self.weights_first else None]
        found = [i for i in found if i is not None]
        return min(found) if found else None

    @property
    def anything(self) -> bool:
        """Whether anything at all was compared."""
        return bool(self.logged or self.traced or self.weights)

    @property
    def final_compared(self) -> bool:
        """Whether both runs' last weights were compared (two files: always)."""
        if self.checkpoints is not None:
            return bool(self.weights)
        end_a, end_b = self.last
        return end_a is not None and end_a == end_b and end_a in self.weights

    def compared(self) -> str:
        """What was compared, e.g. ``24 logged iterations, 1 traced iteration, final
        weights``."""
        parts = []
        if self.logged:
            parts.append(_count(len(self.logged), 'logged iteration'))
        if self.traced:
            parts.append(_count(len(self.traced), 'traced iteration'))
        if self.checkpoints is not None and self.weights:
            parts.append('the weights of both checkpoints')
        elif self.weights:
            earlier = self.weights[:-1] if self.final_compared else self.weights
            pieces = ['final weights'] if self.final_compared else []
            if earlier:
                pieces.append(_count(len(earlier), 'earlier checkpoint' if pieces
                                     else 'checkpoint'))
            parts.append(' and '.join(pieces))
        return ', '.join(parts) if parts else 'nothing'

    def span(self) -> Optional[str]:
        """Why the runs are equal only up to an iteration: ``through iteration k (B stops
        there)``; None when both end at the same iteration with their weights compared."""
        if self.final_compared:
            return None
        end_a, end_b = self.last
        if end_a is not None and end_b is not None and end_a != end_b:
            shorter = 'A' if end_a < end_b else 'B'
            return f'through iteration {min(end_a, end_b)} ({shorter} stops there)'
        seen = self.logged + self.traced + self.weights
        through = f'through iteration {max(seen)}' if seen else 'over nothing'
        missing = [label for label, end in zip('AB', self.last, strict=True)
                   if end is None or
                   end not in self.weights]
        return (f'{through} (the final weights were not compared: none recorded or at hand '
                f'in {" and ".join(missing) or "either"})')


def compare_evidence(a: Evidence, b: Evidence, trace: Optional[TraceDiff],
                     logged: bool = True) -> Comparison:
    """Compare two runs' logged iterations, weights and (given) trace comparison.

    Args:
        a: Run A's evidence.
        b: Run B's.
        trace: The comparison of their traces (None unless both have one).
        logged: Whether their logged losses are comparable (False where the runs log
            with other ``log_processor`` settings).
    """
    result = Comparison(last=(a.last(), b.last()), trace=trace, logged_skipped=not logged)
    if logged:
        result.logged, result.logged_first, result.logged_previous = logged_divergence(
            a.scalars, b.scalars)
    if a.checkpoint is not None and b.checkpoint is not None:
        result.checkpoints = (a.checkpoint, b.checkpoint)
        digest_a, digest_b = (run.weights.digest(run.checkpoint) for run in (a, b))
        result.weights = [a.checkpoint]
        if digest_a != digest_b:
            result.weights_first = (a.checkpoint, digest_a, digest_b)
        return result
    result.weights, result.weights_first = compare_weights(a.weights, b.weights)
    return result


def weights_lines(result: Comparison, notes: Sequence[str] = ()) -> List[str]:
    """Lines on the weights comparison (and notes on files that could not be used)."""
    lines = [f'  note: {note}' for note in notes]
    if result.checkpoints is not None:
        at_a, at_b = result.checkpoints
        where = (f'at iteration {at_a}' if at_a == at_b else
                 f'A at iteration {at_a}, B at iteration {at_b}: different points of '
                 'training')
        if result.weights_first is None:
            return [f'weights: identical ({where})'] + lines
        _, digest_a, digest_b = result.weights_first
        return [f'weights: differ ({where}): A {digest_a[:12]} vs B {digest_b[:12]}'] + lines
    if not result.weights:
        return ['weights: no iteration whose weights both runs know (no common checkpoint '
                'or recorded digest)'] + lines
    if result.weights_first is None:
        its = result.weights
        final = ' (the final weights)' if result.final_compared else ''
        return [f"weights: identical at iteration{'s' if len(its) > 1 else ''} "
                f"{', '.join(map(str, its))}{final}"] + lines
    iteration, digest_a, digest_b = result.weights_first
    final = ' (the final weights)' if result.last == (iteration, iteration) else ''
    equal = [i for i in result.weights if i < iteration]
    since = f'; equal at iteration {equal[-1]}' if equal else ''
    return [f'weights: differ at iteration {iteration}{final}: A {digest_a[:12]} vs B '
            f'{digest_b[:12]}{since}'] + lines
