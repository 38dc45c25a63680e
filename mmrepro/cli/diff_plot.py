"""``repro_diff --plot``: both runs' losses at every logged iteration, the traced ones
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
            ``B traced``, ``|A - B| logged``, ``|A - B| traced`` (those with points).
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
                label_b: str = 'B') -> Drawn:
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

    Returns:
        Drawn: The title and the drawn series.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    figure = Figure(figsize=(9, 7), dpi=100)
    FigureCanvasAgg(figure)
    axes, below = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1))
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
    if divergence is not None:
        axes.axvline(divergence, color='red', linestyle=':',
                     label=f'first divergence (iteration {divergence})')
        below.axvline(divergence, color='red', linestyle=':')
    below.set_ylabel('|A - B|')
    below.set_xlabel('iteration')
    below.xaxis.set_major_locator(MaxNLocator(integer=True))
    below.grid(True, alpha=0.3)
    if any(name.startswith('|') for name in lines):
        below.legend(fontsize=8)
    axes.set_ylabel('training loss')
    title = '\n'.join(textwrap.wrap(verdict, _TITLE_WIDTH))
    axes.set_title(title, fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, format='png')
    return Drawn(title, lines)
