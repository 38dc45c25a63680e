"""mmrepro.checks.evidence: what two runs were compared on, and over which span."""
from mmrepro.checks.evidence import Evidence, compare_evidence, weights_lines
from mmrepro.record.weights_index import WeightsIndex


def _run(label, iters, losses=None, weights=None, final=None):
    losses = losses or {}
    rows = [dict(iter=i, loss=losses.get(i, 1.0 / i)) for i in iters]
    index = WeightsIndex(recorded=dict(weights or {}), final=final)
    return Evidence(label, rows, None, index)


def test_identical_over_the_whole_span_with_final_weights():
    a = _run('A', range(1, 25), weights={8: 'x', 24: 'y'}, final=24)
    b = _run('B', range(1, 25), weights={8: 'x', 16: 'z', 24: 'y'}, final=24)
    result = compare_evidence(a, b, None)
    assert not result.differs and result.final_compared and result.span() is None
    assert result.compared() == '24 logged iterations, final weights and 1 earlier checkpoint'
    assert weights_lines(result) == ['weights: identical at iterations 8, 24 (the final '
                                     'weights)']


def test_a_short_run_is_identical_only_through_its_end():
    result = compare_evidence(_run('A', range(1, 5), weights={4: 'w'}, final=4),
                              _run('B', range(1, 25), weights={24: 'y'}, final=24), None)
    assert result.compared() == '4 logged iterations'
    assert result.span() == 'through iteration 4 (A stops there)'


def test_equal_losses_without_final_weights_are_not_called_identical():
    result = compare_evidence(_run('A', range(1, 7)), _run('B', range(1, 7)), None)
    assert result.span() == ('through iteration 6 (the final weights were not compared: none '
                             'recorded or at hand in A and B)')


def test_weights_that_differ_after_equal_losses_are_the_first_difference():
    a = _run('A', range(1, 7), weights={3: 'p', 6: 'q'}, final=6)
    b = _run('B', range(1, 7), weights={3: 'p', 6: 'r'}, final=6)
    result = compare_evidence(a, b, None)
    assert result.differs and result.first == 6 and result.logged_first is None
    assert weights_lines(result) == ['weights: differ at iteration 6 (the final weights): A q '
                                     'vs B r; equal at iteration 3']


def test_the_earliest_difference_of_any_kind_is_first():
    a = _run('A', range(1, 7), losses={5: 0.5}, weights={6: 'q'}, final=6)
    b = _run('B', range(1, 7), weights={6: 'r'}, final=6)
    result = compare_evidence(a, b, None)
    assert (result.logged_first, result.logged_previous, result.first) == (5, 4, 5)


def test_nothing_in_common_compares_nothing():
    result = compare_evidence(_run('A', [1, 2]), _run('B', [5, 6]), None)
    assert not result.anything and result.compared() == 'nothing'
