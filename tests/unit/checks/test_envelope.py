"""mmrepro.checks.envelope: rounding or real, judged against a measured envelope."""
import math

import pytest

from mmrepro.checks.envelope import (
    LOSS_ULPS,
    judge_rounding,
    ratio,
    ratios,
    step_distances,
    times,
)
from mmrepro.trace.fileformat import FORWARD_SKETCH

MODULES = {'backbone.conv': 'Conv2d', 'neck': 'FPN', 'head.fc': 'Linear'}


def _line(step, shift=0.0, loss=1.5, head=0.0, forward=None, tag='x'):
    """A whole-step trace line: two parameters, their sketches moved by ``shift`` (and
    the head's by ``head`` more); digests equal where nothing moved."""
    def sketch(base, moved):
        return [base + moved] + [0.0] * 7
    line = dict(iter=step, step=step, step_losses={'loss': loss.hex()},
                step_grad={'backbone.conv.weight': f'g{shift}',
                           'head.fc.weight': f'g{shift + head}'},
                weight={'backbone.conv.weight': f'w{shift}',
                        'head.fc.weight': f'w{shift + head}'},
                sketch=dict(grad={'backbone.conv.weight': sketch(1.0, shift),
                                  'head.fc.weight': sketch(2.0, shift + head)},
                            weight={'backbone.conv.weight': sketch(3.0, shift),
                                    'head.fc.weight': sketch(4.0, shift + head)}))
    if forward is not None:
        line[FORWARD_SKETCH] = {name: [value] + [0.0] * 7 for name, value in forward.items()}
        line['data'] = {'0': tag}
    return line


def _run(shifts, **kw):
    return [_line(step, shift, **kw) for step, shift in enumerate(shifts, 1)]


def test_equal_digests_are_distance_zero_whatever_the_sketches_say():
    a, b = _line(1), _line(1)
    b['sketch']['grad']['head.fc.weight'][1] = 1e-16  # a sum rounded otherwise
    assert step_distances([a], [b])[1].grad == 0.0
    c = _line(1, shift=1e-6)
    d = step_distances([a], [c])[1]
    assert d.grad == pytest.approx(math.sqrt(2) * 1e-6, rel=1e-3)
    assert d.modules == {'backbone.conv': pytest.approx(1e-6, rel=1e-3),
                         'head.fc': pytest.approx(1e-6, rel=1e-3)}


def test_a_ratio_is_zero_for_equal_values_and_infinite_over_a_zero_envelope():
    assert ratio(0.0, 0.0) == 0.0 and ratio(0.0, 1.0) == 0.0
    assert ratio(1.0, 0.0) == math.inf and ratio(2.0, 4.0) == 0.5


def test_a_loss_moved_by_a_few_ulps_stays_within_its_least_envelope():
    base = [_line(1, loss=1.5)]
    other = [_line(1, loss=1.5 + 2 * 2.0 ** -23)]  # two float32 ulps of 1.5
    (row,) = ratios(step_distances(base, other), step_distances(base, base))
    assert row.loss == pytest.approx(2 / LOSS_ULPS)


def test_a_loss_alone_beyond_its_envelope_is_shown_but_not_judged():
    base, here, nudged = _run([0]), _run([0]), _run([1e-6])
    other = [_line(1, loss=1.5 + 1000 * 2.0 ** -23)]  # 1000 ulps, equal gradients
    result = judge_rounding(base, other, here, nudged)
    assert result.rows[0].loss == pytest.approx(1000 / LOSS_ULPS)
    assert result.equivalent is True and result.table[1].split()[1] == '62x'


def test_within_the_envelope_at_every_step_is_equivalent():
    base, other = _run([0, 0]), _run([1e-9, 2e-9])
    here, nudged = _run([0, 0]), _run([1e-6, 4e-6])
    result = judge_rounding(base, other, here, nudged, MODULES)
    assert result.equivalent is True
    assert result.text == ('equivalent within rounding (distance 0.001x the envelope at '
                           'step 1)')
    assert result.table == ['  step          loss   gradients     weights',
                            '     1            0x      0.001x      0.001x',
                            '     2            0x     0.0005x     0.0005x']


def test_beyond_the_envelope_names_the_step_and_the_module_furthest_beyond():
    base, other = _run([0, 0]), _run([1e-9, 1e-9], head=1e-3)
    here, nudged = _run([0, 0]), _run([1e-6, 1e-6])
    result = judge_rounding(base, other, here, nudged, MODULES)
    assert result.equivalent is False
    assert result.text == ('differs beyond rounding from step 1 (distance 707x the '
                           'envelope), largest gradient difference in head.fc (Linear) '
                           '(1e3x the envelope)')


def test_where_only_the_weights_differ_the_module_furthest_beyond_in_weights_is_named():
    base, here, nudged = _run([0]), _run([0]), _run([1e-6])
    other = _run([0])
    other[0]['weight']['head.fc.weight'] = 'moved'  # an lr change: equal gradients
    other[0]['sketch']['weight']['head.fc.weight'][0] += 1e-3
    result = judge_rounding(base, other, here, nudged, MODULES)
    assert result.text == ('differs beyond rounding from step 1 (distance 707x the '
                           'envelope), largest weight difference in head.fc (Linear) (1e3x '
                           'the envelope)')


def test_the_first_forward_output_beyond_the_envelope_names_the_first_module():
    forward = {'backbone.conv': 1.0, 'neck': 2.0, 'head.fc': 3.0}
    base = [_line(1, forward=forward)]
    other = [_line(1, shift=1.0, forward={'backbone.conv': 1.0 + 1e-7, 'neck': 2.002,
                                          'head.fc': 3.003})]
    here = [_line(1, forward=forward)]
    nudged = [_line(1, shift=1e-4, forward={name: v + 1e-6 for name, v in forward.items()})]
    result = judge_rounding(base, other, here, nudged, MODULES)
    assert result.text == ('differs beyond rounding from step 1 (distance 524x the envelope), '
                           'first module neck (FPN): its forward output at the first iteration')
    assert result.table[-1] == ('  first iteration, forward outputs: at most 786x the envelope '
                                '(head.fc (Linear); beyond 100x the computation differs)')
    same_steps = [_line(1, forward={n: v[0] for n, v in other[0][FORWARD_SKETCH].items()})]
    result = judge_rounding(base, same_steps, here, nudged, MODULES)  # steps within
    assert result.equivalent is False and 'first module neck (FPN)' in result.text
    other[0]['data'] = {'0': 'another sample'}  # other inputs: no module is named by them
    assert 'largest gradient difference in' in judge_rounding(base, other, here, nudged,
                                                              MODULES).text


def test_too_little_to_judge_says_why():
    base = _run([0])
    old = [dict(line, sketch=None) for line in base]
    assert judge_rounding(old, old, base, base).text == (
        'too little to judge rounding or real: their traces hold no sketches (written by '
        'an earlier mmrepro release)')
    assert judge_rounding(base, _run([1e-9]), base, _run([0])).text == (
        'too little to judge rounding or real: the envelope run did not differ from this '
        'run (the model has no floating weights)')
    assert judge_rounding(base, _run([1e-9]), base, [_line(2)]).equivalent is None


def test_equal_forward_outputs_say_so():
    forward = {'neck': 2.0}
    result = judge_rounding([_line(1, forward=forward)], [_line(1, 1e-9, forward=forward)],
                            [_line(1, forward=forward)],
                            [_line(1, 1e-6, forward={'neck': 2.0 + 1e-6})])
    assert result.table[-1] == ('  first iteration, forward outputs: all equal (the same '
                                'computation)')


@pytest.mark.parametrize('value,text', [(0.00092, '0.00092x'), (0.8, '0.8x'), (29.4, '29x'),
                                        (553.2, '553x'), (4025.9, '4e3x'), (2.5e12, '2e12x'),
                                        (math.inf, 'infinitely (the envelope is 0)')])
def test_ratios_read_as_the_verdict_shows_them(value, text):
    assert times(value) == text


def test_both_tools_say_the_verdict_and_pass_alike():
    from mmrepro.checks.envelope import Rounding
    same = Rounding(True, 'equivalent within rounding (distance 0.5x the envelope at step 2)')
    assert same.passes(False) and not same.passes(True)
    assert same.clause(False) == ('not bitwise, but equivalent within rounding (distance 0.5x '
                                  'the envelope at step 2)')
    assert same.clause(True) == same.clause(False) + '; --bitwise requires bit for bit'
    for other in (Rounding(False, 'differs beyond rounding from step 1'),
                  Rounding(None, 'too little to judge rounding or real: no sketches')):
        assert not other.passes(False) and other.clause(False) == other.text
