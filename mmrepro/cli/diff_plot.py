"""``repro_diff --plot``: both runs' loss curves, the first divergence marked."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..trace import loss_curve


def loss_points(trace: Optional[Tuple[Dict[str, Any], List[Dict[str, Any]]]],
                scalars: Sequence[Dict[str, Any]]) -> List[Tuple[int, float]]:
    """``(iteration, loss)`` of a run, from its trace if it has one, else its scalars."""
    if trace is not None:
        return loss_curve(trace[1])
    return [(row['iter'], float(row['loss'])) for row in scalars]


def plot_losses(curve_a: Sequence[Tuple[int, float]], curve_b: Sequence[Tuple[int, float]],
                out: str, divergence: Optional[int] = None, label_a: str = 'A',
                label_b: str = 'B') -> List[Any]:
    """Plot both loss curves (and the first diverging iteration) into a PNG file.

    Uses Matplotlib's Agg canvas directly, so it needs no display and leaves the
    global backend alone.

    Args:
        curve_a: ``(iteration, loss)`` pairs of run A.
        curve_b: ``(iteration, loss)`` pairs of run B.
        out: The PNG file to write.
        divergence: The first diverging iteration, marked with a vertical line.
        label_a: Legend of run A.
        label_b: Legend of run B.

    Returns:
        list: The two curves' ``Line2D`` objects.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    figure = Figure(figsize=(8, 6), dpi=100)
    FigureCanvasAgg(figure)
    axes, below = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    lines = []
    for points, label, style in ((curve_a, label_a, '-'), (curve_b, label_b, '--')):
        xs = [x for x, _ in points]
        ys = [y if math.isfinite(y) else math.nan for _, y in points]
        lines.append(axes.plot(xs, ys, style, marker='.', label=label)[0])
    if divergence is not None:
        axes.axvline(divergence, color='red', linestyle=':',
                     label=f'first divergence (iteration {divergence})')
    values_b = dict(curve_b)
    common = [(x, abs(y - values_b[x])) for x, y in curve_a if x in values_b]
    below.plot([x for x, _ in common], [d for _, d in common], color='black', marker='.')
    if divergence is not None:
        below.axvline(divergence, color='red', linestyle=':')
    below.set_ylabel('|A - B|')
    below.set_xlabel('iteration')
    below.xaxis.set_major_locator(MaxNLocator(integer=True))
    below.grid(True, alpha=0.3)
    axes.set_ylabel('loss')
    axes.set_title('training loss' + (f', diverging at iteration {divergence}'
                                      if divergence is not None else ''))
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, format='png')
    return lines
