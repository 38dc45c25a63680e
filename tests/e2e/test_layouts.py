"""One data stream for every process layout: 1 x 4, 2 ranks x 2, 1 x 2 x accumulate 2.

Real mmdet RetinaNet and Faster R-CNN on the tiny COCO data with MMDetection's data
config (``DefaultSampler`` + ``AspectRatioBatchSampler``) and a warmup in iterations;
1 epoch of global batch 4 (4 optimizer steps; the session's ``layout_runs``, which
test_check_against.py shares). Ranks run on CPU over gloo.
"""
import glob
import os.path as osp

import pytest
from support.layout_runs import PROBES, LayoutRuns, stream
from support.repro_utils import REPO, checkpoint, pythonpath, run_train, state_digest, write_config

from mmrepro.cli.repro_diff import main as repro_diff
from mmrepro.record.run_record import find_log_dir
from mmrepro.trace import TRACE_NAME, read_trace

pytestmark = pytest.mark.slow


@pytest.mark.full
def test_one_process_and_two_ranks_train_on_the_same_samples(layout_runs):
    """Full tier, a second proof: the default run proves 1 process and 2 ranks see the
    same samples, and more, in ``test_accumulation_reproduces_two_ranks_bit_for_bit`` (1
    process accumulating 2 batches: the same sample stream and the same weights)."""
    one = stream(layout_runs.get('retinanet', '1x4'))
    assert len(one) == 16 and {step for step, *_ in one} == set(range(4))
    assert [(step, n) for step, _, n, _ in one[:4]] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    two = stream(layout_runs.get('retinanet', '2x2'))
    # Same image, size, flip and pixels at every place of every global batch.
    assert [(s, rest) for s, _, _, rest in two] == [(s, rest) for s, _, _, rest in one]
    assert {v for _, v, _, _ in two} == {0, 1}


@pytest.mark.parametrize('model', [
    'retinanet', pytest.param('faster_rcnn', marks=pytest.mark.full)])
def test_accumulation_reproduces_two_ranks_bit_for_bit(layout_runs, model):
    """Faster R-CNN's case is the full tier, a second proof of what RetinaNet's proves (its
    main-process draws, keyed per sample, are proven independent of the loader's layout in
    ``test_data_randomness.py``)."""
    ranks = layout_runs.get(model, '2x2')
    accumulated = layout_runs.get(model, '1x2acc2')
    assert stream(accumulated) == stream(ranks)
    assert state_digest(checkpoint(accumulated)) == state_digest(checkpoint(ranks))


@pytest.mark.full
def test_repro_diff_finds_the_same_data_and_names_the_layout(layout_runs, capsys):
    """Full tier (it shares the 1 x 4 run above): the default run proves the verdict on
    the same data in another layout in ``tests/unit/checks/diff/test_verdict.py``
    (``test_same_data_on_another_layout_blames_the_layout_first``)."""
    code = repro_diff([layout_runs.get('retinanet', '1x4'), layout_runs.get('retinanet', '2x2'),
                       '--no-envelope'])  # the layout, not rounding, is the subject here
    out = capsys.readouterr().out
    assert code == 1
    assert '\ndata: identical samples in every traced iteration (1..4, 4)\n' in out
    assert 'verdict: the same samples in every traced iteration; the numbers differ from ' \
        'iteration 1\n  explained by (most likely first): the process layout (ranks, ' \
        'per-rank batch, accumulation) (world_size, backend, launcher and 9 more)' in out


#: A checkpoint in the middle of the second epoch (iteration 6 of 8 at global batch 4).
MID_EPOCH = "default_hooks = dict(checkpoint=dict(by_epoch=False, interval=6, save_last=True))\n"


@pytest.fixture(scope='module')
def two_epochs(tmp_path_factory, data_root):
    return LayoutRuns(str(tmp_path_factory.mktemp('layouts2')), data_root, max_epochs=2)


def _steps(work_dir, after):
    """{optimizer step: the step's per-sample digests} of a run's trace, after ``after``."""
    lines = read_trace(osp.join(find_log_dir(work_dir), TRACE_NAME))[1]
    return {line['step']: line['step_data'] for line in lines if line.get('step', 0) > after}


def test_two_ranks_resumed_mid_epoch_as_one_process_accumulating_ends_bit_for_bit(two_epochs):
    """2 ranks x 2 stopped in the middle of epoch 2, continued as 1 process x 2 x 2."""
    ranks = two_epochs.get('retinanet', '2x2', MID_EPOCH, '-mid')
    resumed = two_epochs.get('retinanet', '1x2acc2', MID_EPOCH, '-from-2x2',
                             args=('--resume', checkpoint(ranks, 'iter_6.pth')))
    log = open(glob.glob(osp.join(resumed, '*', '*.log'))[0]).read()
    assert ('mmrepro: resuming on another layout (world size 2 -> 1, accumulative_counts '
            '1 -> 2) with the same global batch: the data stream continues exactly; '
            'iteration 6 of the checkpoint is iteration 12 here (2 micro-batch(es) per '
            'optimizer step).') in log
    assert 'mmrepro: resumed data position (sampler epoch 1, 4 batches done).' in log
    assert [row for row in stream(resumed)] == [row for row in stream(ranks) if row[0] >= 6]
    assert state_digest(checkpoint(resumed)) == state_digest(checkpoint(ranks))


@pytest.mark.full
def test_two_ranks_resumed_as_four_ranks_train_on_the_same_samples(two_epochs):
    """Full tier, a second proof of a resume into another process layout, which CI's
    default run proves bit for bit in
    ``test_two_ranks_resumed_mid_epoch_as_one_process_accumulating_ends_bit_for_bit``."""
    """2 x 2 resumed as 4 x 1: the same sample digests at every step after the resume."""
    ranks = two_epochs.get('retinanet', '2x2', MID_EPOCH, '-mid')
    four = two_epochs.get('retinanet', '4x1', MID_EPOCH, '-from-2x2',
                          args=('--resume', checkpoint(ranks, 'iter_6.pth')))
    expected = _steps(ranks, 6)
    assert sorted(expected) == [7, 8] and all(len(d) == 4 for d in expected.values())
    assert _steps(four, 6) == expected


def test_another_global_batch_is_refused_with_what_to_set(two_epochs, tmp_path):
    ranks = two_epochs.get('retinanet', '2x2', MID_EPOCH, '-mid')
    config = write_config(str(tmp_path / 'cfg.py'), 'retinanet', two_epochs.data_root,
                          extra=PROBES + 'train_dataloader = dict(batch_size=2)\n'
                          'randomness = dict(threads=1, global_batch=None)\n'
                          + MID_EPOCH, num_workers=0, max_epochs=2)
    proc = run_train(config, str(tmp_path / 'w'), '--resume', checkpoint(ranks, 'iter_6.pth'),
                     check=False, env={'PYTHONPATH': pythonpath(osp.join(REPO, 'tests'))})
    assert proc.returncode != 0
    assert ('mmrepro: cannot resume exactly: world size 2 -> 1 between the checkpoint (2 '
            'rank(s) x batch_size 2 x accumulative_counts 1 = 4) and this run (1 rank(s) x '
            'batch_size 2 x accumulative_counts 1 = 2): the global batch differs. Set '
            'train_dataloader.batch_size x optim_wrapper.accumulative_counts to 4 for 1 '
            'rank(s). Or set auto_scale_lr=dict(enable=True, ...) to continue without '
            'bitwise reproducibility.') in proc.stderr
