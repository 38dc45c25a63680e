"""The trace of a real RetinaNet run through tools/train.py, by default and on a rerun."""
import glob
import os.path as osp

import pytest

from mmrepro import trace as T


@pytest.mark.slow
def test_the_hook_traces_by_default_and_reruns_trace_alike(runs):
    from mmrepro.hooks import ReproducibilityHook
    assert ReproducibilityHook().trace_interval == 50
    traces = []
    for tag in ('base', 'rerun'):
        (path,) = glob.glob(osp.join(runs.get('retinanet', tag), '*', T.TRACE_NAME))
        traces.append(T.read_trace(path))
    (header, lines), (_, again) = traces
    # 24 optimizer steps: the dense early steps below the interval of 50
    assert header['interval'] == 50 and header['points'] == 'dense'
    assert [line['iter'] for line in lines] == [1, 2, 4, 8, 16]
    assert [line['step'] for line in lines] == [1, 2, 4, 8, 16]
    assert len(lines[0]['grad']) == 81 and lines == again
    # the whole step: 2 samples, the loss of its one micro-batch, the applied gradients
    assert len(lines[0]['step_data']) == 2 and set(lines[0]['step_grad']) == set(
        lines[0]['grad'])
    assert lines[0]['step_losses']['0.loss'] == lines[0]['losses']['loss']
