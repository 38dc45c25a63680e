"""One data stream for every process layout: 1 x 4, 2 ranks x 2, 1 x 2 x accumulate 2.

Real mmdet RetinaNet and Faster R-CNN on the tiny COCO data with MMDetection's data
config (``DefaultSampler`` + ``AspectRatioBatchSampler``) and a warmup in iterations;
1 epoch of global batch 4 (4 optimizer steps). Ranks run on CPU over gloo.
"""
import pytest
from layout_runs import LayoutRuns, stream
from repro_utils import checkpoint, state_digest

from mmrepro.cli.repro_diff import main as repro_diff

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def layout_runs(tmp_path_factory, data_root):
    return LayoutRuns(str(tmp_path_factory.mktemp('layouts')), data_root, max_epochs=1)


def test_one_process_and_two_ranks_train_on_the_same_samples(layout_runs):
    one = stream(layout_runs.get('retinanet', '1x4'))
    assert len(one) == 16 and {step for step, *_ in one} == set(range(4))
    assert [(step, n) for step, _, n, _ in one[:4]] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    two = stream(layout_runs.get('retinanet', '2x2'))
    # Same image, size, flip and pixels at every place of every global batch.
    assert [(s, rest) for s, _, _, rest in two] == [(s, rest) for s, _, _, rest in one]
    assert {v for _, v, _, _ in two} == {0, 1}


@pytest.mark.parametrize('model', ['retinanet', 'faster_rcnn'])
def test_accumulation_reproduces_two_ranks_bit_for_bit(layout_runs, model):
    ranks = layout_runs.get(model, '2x2')
    accumulated = layout_runs.get(model, '1x2acc2')
    assert stream(accumulated) == stream(ranks)
    assert state_digest(checkpoint(accumulated)) == state_digest(checkpoint(ranks))


def test_repro_diff_finds_the_same_data_and_names_the_layout(layout_runs, capsys):
    code = repro_diff([layout_runs.get('retinanet', '1x4'), layout_runs.get('retinanet', '2x2')])
    out = capsys.readouterr().out
    assert code == 1
    assert '\ndata: identical samples in every traced iteration (1..4, 4)\n' in out
    assert 'verdict: the same samples in every traced iteration; the numbers differ from ' \
        'iteration 1\n  explained by (most likely first): the process layout (ranks, ' \
        'per-rank batch, accumulation) (world_size, backend, launcher and 2 more)' in out
