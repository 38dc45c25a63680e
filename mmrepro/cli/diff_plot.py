"""``mmrepro-diff --plot``: both runs' losses at every logged iteration, the traced ones
marked, the first divergence and the verdict shown.

Each run contributes two series: its logged loss at every iteration its scalars log
holds (``vis_data/scalars.json``: MMEngine's logged value, a mean over the log window),
drawn as a line, and its exact loss at every traced iteration (the trace), drawn as
markers. Both runs are drawn the same way, so identical runs draw identical curves.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..trace import loss_curve

__all__ = ['Curves', 'Drawn', 'plot_losses', 'run_curves']

Points = List[Tuple[int, float]]
_TITLE_WIDTH = 90  # characters per title line


@dataclass
class Curves:
    """One run's losses.

    Attributes:
        logged: ``(iteration, loss)`` at every logged iteration (scalars log).
        traced: ``(iteration, exact loss)`` at every traced iteration (trace).
    """

    logged: Points = field(default_factory=list)
    traced: Points = field(default_factory=list)


@dataclass
class Drawn:
    """What :func:`plot_losses` drew.

    Attributes:
        title: The plot's title (the verdict, wrapped).
        lines: The drawn series by name: ``A logged``, ``A traced``, ``B logged``,
            ``B traced``, ``|A - B| logged``, ``|A - B| traced`` and ``rounding
            envelope`` (those with points).
    """

    title: str
    lines: Dict[str, Any]


def run_curves(trace: Optional[Tuple[Dict[str, Any], List[Dict[str, Any]]]],
               scalars: Sequence[Dict[str, Any]]) -> Curves:
    """A run's logged losses (from its scalars log) and traced ones (from its trace)."""
    return Curves([(row['iter'], float(row['loss'])) for row in scalars],
                  loss_curve(trace[1]) if trace is not None else [])


def _finite(points: Points) -> Tuple[List[int], List[float]]:
    return ([x for x, _ in points],
            [y if math.isfinite(y) else math.nan for _, y in points])


def _gaps(a: Points, b: Points) -> Points:
    """``(iteration, |A - B|)`` at the iterations both hold."""
    values_b = dict(b)
    return [(x, abs(y - values_b[x])) for x, y in a if x in values_b]


def plot_losses(a: Curves, b: Curves, out: str, verdict: str,
                divergence: Optional[int] = None, label_a: str = 'A',
                label_b: str = 'B', envelope: Sequence[Tuple[int, float]] = (),
                ratios: Optional[Dict[str, Points]] = None) -> Drawn:
    """Plot both runs' losses, their difference and the first divergence into a PNG.

    Uses Matplotlib's Agg canvas directly, so it needs no display and leaves the
    global backend alone.

    Args:
        a: Run A's losses.
        b: Run B's.
        out: The PNG file to write.
        verdict: The comparison's verdict, the plot's title.
        divergence: The first diverging iteration, marked with a vertical line.
        label_a: Legend of run A.
        label_b: Legend of run B.
        envelope: ``(iteration, loss distance)`` of the rounding envelope at traced
            steps, drawn as a band under ``|A - B|``: a gap inside it is rounding.
        ratios: Per quantity (``loss``, ``grad``, ``weight``), ``(iteration, distance
            over the envelope)`` at traced steps: a third panel, log scale, with the
            1x line (beyond it: beyond rounding).

    Returns:
        Drawn: The title and the drawn series.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    figure = Figure(figsize=(9, 9 if ratios else 7), dpi=100)
    FigureCanvasAgg(figure)
    panels = figure.subplots(3 if ratios else 2, 1, sharex=True,
                             height_ratios=(3, 1, 1) if ratios else (3, 1))
    axes, below = panels[0], panels[1]
    lines: Dict[str, Any] = {}
    for name, curves, label, style, marker in (('A', a, label_a, '-', 'o'),
                                                ('B', b, label_b, '--', 'x')):
        if curves.logged:
            lines[f'{name} logged'] = axes.plot(
                *_finite(curves.logged), style, marker='.', markersize=3,
                label=f'{label}: logged loss, every logged iteration')[0]
        if curves.traced:
            joined = style if not curves.logged else 'none'  # the trace is all it has
            lines[f'{name} traced'] = axes.plot(
                *_finite(curves.traced), linestyle=joined, marker=marker, markersize=8,
                fillstyle='none', label=f'{label}: traced iterations (exact loss)')[0]
    for kind, marker in (('logged', '.'), ('traced', 'o')):
        gaps = _gaps(getattr(a, kind), getattr(b, kind))
        if gaps:
            lines[f'|A - B| {kind}'] = below.plot(
                *_finite(gaps), color='black', linestyle='-' if kind == 'logged' else 'none',
                marker=marker, fillstyle='none', label=f'{kind}')[0]
    if envelope:
        xs, ys = _finite(list(envelope))
        lines['rounding envelope'] = below.fill_between(
            xs, 0, ys, color='tab:green', alpha=0.3, step='mid',
            label='rounding envelope (this machine, one ulp per weight)')
    if divergence is not None:
        axes.axvline(divergence, color='red', linestyle=':',
                     label=f'first divergence (iteration {divergence})')
        below.axvline(divergence, color='red', linestyle=':')
    below.set_ylabel('|A - B|')
    if ratios:
        _draw_ratios(panels[2], ratios, lines)
    panels[-1].set_xlabel('iteration')
    panels[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    below.grid(True, alpha=0.3)
    if any(name.startswith('|') or name == 'rounding envelope' for name in lines):
        below.legend(fontsize=8)
    axes.set_ylabel('training loss')
    title = '\n'.join(textwrap.wrap(verdict, _TITLE_WIDTH))
    axes.set_title(title, fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, format='png')
    return Drawn(title, lines)


def _draw_ratios(axes: Any, ratios: Dict[str, Points], lines: Dict[str, Any]) -> None:
    """The distance over the rounding envelope per traced step, with the 1x line."""
    tiny = 1e-9  # zeros (equal bits) drawn at the bottom of the log scale
    for name, marker in (('loss', 's'), ('grad', 'o'), ('weight', '^')):
        points = [(x, min(max(y, tiny), 1e9)) for x, y in ratios.get(name, [])]
        if points:
            lines[f'{name} / envelope'] = axes.plot(*_finite(points), marker=marker,
                                                    label=f'{name} distance / envelope')[0]
    axes.axhline(1.0, color='red', linestyle='--', label='1x: beyond is beyond rounding')
    axes.set_yscale('log')
    axes.set_ylabel('/ envelope')
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7)
