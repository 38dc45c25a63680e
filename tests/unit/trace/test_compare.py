"""mmrepro.trace.compare: which sections of two traces are compared."""
from mmrepro import trace as T


def test_traces_of_other_versions_compare_losses_only():
    same = {'version': T.TRACE_VERSION}
    assert T.comparable_sections(same, dict(same)) == (('losses', 'data', *T.SECTIONS), None)
    sections, reason = T.comparable_sections(same, {'version': 1})
    assert sections == ('losses',)
    assert reason == (f'trace versions differ ({T.TRACE_VERSION} vs 1: written by different '
                      'mmrepro versions, whose digests are not comparable); comparing loss '
                      'values only')
    line = dict(iter=1, losses={'loss': '0x1.0p+0'}, grad={'w': '1'}, weight={'w': '2'})
    other = dict(line, grad={'w': 'f'})
    diff = T.compare_traces([line], [other], sections)
    assert diff.identical and diff.compared == ['losses']
    assert T.describe_diff(diff)[0] == 'bit-identical over iteration 1: every loss'
    assert not T.compare_traces([line], [other]).identical
