"""mmrepro.cli.diff_plot: both runs' logged losses, the traced ones marked, to a PNG."""
import math

from support.cli import PNG_SIGNATURE

from mmrepro.cli.diff_plot import Curves, plot_losses, run_curves


def test_every_logged_iteration_of_both_runs_is_drawn_and_the_traced_ones_marked(tmp_path):
    out = tmp_path / 'p.png'
    logged = [(i, 2.0 - i / 10) for i in range(1, 9)]
    a = Curves(logged, [(1, 1.9), (2, 1.8), (4, 1.6), (8, 1.2)])  # traced at 1, 2, 4, 8
    b = Curves(logged, [(i, 2.0 - i / 10) for i in range(1, 9)])  # traced at every one
    drawn = plot_losses(a, b, str(out), 'bit-identical, as expected (no setting that '
                        'changes results differs)')
    assert sorted(drawn.lines) == ['A logged', 'A traced', 'B logged', 'B traced',
                                   '|A - B| logged', '|A - B| traced']
    for name in ('A logged', 'B logged'):
        assert list(drawn.lines[name].get_xdata()) == list(range(1, 9))
        assert drawn.lines[name].get_linestyle() in ('-', '--')
    assert list(drawn.lines['A traced'].get_xdata()) == [1, 2, 4, 8]
    assert list(drawn.lines['B traced'].get_xdata()) == list(range(1, 9))
    for name in ('A traced', 'B traced'):  # markers only: the logged line is the curve
        assert drawn.lines[name].get_linestyle() == 'None'
    assert list(drawn.lines['|A - B| logged'].get_ydata()) == [0.0] * 8
    assert list(drawn.lines['|A - B| traced'].get_xdata()) == [1, 2, 4, 8]
    assert drawn.title == ('bit-identical, as expected (no setting that changes results '
                           'differs)')
    assert out.read_bytes()[:8] == PNG_SIGNATURE


def test_a_run_with_a_trace_only_is_joined_and_the_title_wraps(tmp_path):
    verdict = ('the same samples in every traced iteration; identical through iteration 2 '
               '(B stops there), although settings that can change training differ')
    drawn = plot_losses(Curves([], [(1, 2.0), (2, 1.5), (3, math.inf)]),
                        Curves([(1, 2.0), (2, 1.6)], []), str(tmp_path / 'p.png'), verdict,
                        divergence=2)
    assert drawn.lines['A traced'].get_linestyle() == '-'  # the trace is all A has
    assert math.isnan(drawn.lines['A traced'].get_ydata()[2])
    assert sorted(drawn.lines) == ['A traced', 'B logged']  # nothing in common to subtract
    assert drawn.title == ('the same samples in every traced iteration; identical through '
                           'iteration 2 (B stops there),\nalthough settings that can change '
                           'training differ')


def test_run_curves_reads_the_scalars_log_and_the_trace():
    trace = ({}, [dict(iter=1, losses=dict(loss=(1.5).hex())), dict(iter=2, losses={})])
    curves = run_curves(trace, [dict(iter=1, loss=1.25), dict(iter=2, loss=1.0)])
    assert curves.logged == [(1, 1.25), (2, 1.0)]
    assert curves.traced[0] == (1, 1.5) and math.isnan(curves.traced[1][1])
    assert run_curves(None, []) == Curves([], [])


def test_the_envelope_is_a_band_under_the_gap_and_the_ratios_a_third_panel(tmp_path):
    a = Curves([], [(1, 1.9), (2, 1.8), (4, 1.6)])
    b = Curves([], [(1, 1.9), (2, 1.8 + 1e-6), (4, 1.6 + 3e-6)])
    ratios = dict(loss=[(1, 0.0), (2, 0.5), (4, 2.0)], grad=[(1, 0.0), (2, 30.0), (4, 40.0)],
                  weight=[(1, 1e-3), (2, 3.0), (4, 7.0)])
    drawn = plot_losses(a, b, str(tmp_path / 'p.png'), 'differs beyond rounding',
                        envelope=[(1, 2e-6), (2, 2e-6), (4, 4e-6)], ratios=ratios)
    assert {'rounding envelope', 'loss / envelope', 'grad / envelope',
            'weight / envelope'} <= set(drawn.lines)
    band = drawn.lines['rounding envelope'].get_paths()[0].vertices
    assert band[:, 1].max() == 4e-6 and band[:, 0].min() == 1 and band[:, 0].max() == 4
    assert list(drawn.lines['grad / envelope'].get_ydata()) == [1e-9, 30.0, 40.0]  # 0: floor
    assert (tmp_path / 'p.png').read_bytes()[:8] == PNG_SIGNATURE
