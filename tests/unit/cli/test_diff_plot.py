"""mmrepro.cli.diff_plot: the loss curves of two runs, drawn to a PNG."""
from support.cli import PNG_SIGNATURE

from mmrepro.cli.diff_plot import plot_losses


def test_plot_losses_draws_two_curves(tmp_path):
    out = tmp_path / 'p.png'
    lines = plot_losses([(1, 2.0), (2, 1.5), (3, 1.2)], [(1, 2.0), (2, 1.6), (3, 1.3)],
                        str(out), divergence=2)
    assert len(lines) == 2
    assert list(lines[1].get_xdata()) == [1, 2, 3] and lines[1].get_ydata()[2] == 1.3
    assert out.read_bytes()[:8] == PNG_SIGNATURE
