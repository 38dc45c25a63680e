"""Evaluation at batch size 2 gives every image the same predictions, bit for bit, and the
same metrics on 1 rank and on 2 (torchrun, gloo), with num_workers 0 and 2.

One RetinaNet checkpoint (the narrowed test model, 1 epoch) is evaluated by
``tests/support/eval_ranks.py``, which dumps every image's ``bboxes``/``scores``/
``labels`` bytes and the metrics. MMEngine's loop on 2 ranks is the control: it batches
other images together, and some images' predictions change.
"""
import json
import os.path as osp
import sys

import pytest
from support.dist_utils import dist_env, run_bounded
from support.repro_utils import REPO, checkpoint, write_config

pytestmark = pytest.mark.slow

DRIVER = osp.join(REPO, 'tests', 'support', 'eval_ranks.py')
#: 8 val images in global batches of 2: on 2 ranks, rank 0 runs the 1st and 3rd.
BATCHES_2 = [[[1, 2], [5, 6]], [[3, 4], [7, 8]]]


class Evaluations:
    """Evaluations of one checkpoint, each run once per module."""

    def __init__(self, root, config, ckpt):
        self.root, self.config, self.ckpt, self._done = root, config, ckpt, {}

    def get(self, tag, ranks, *args):
        if tag not in self._done:
            out, log = osp.join(self.root, f'{tag}.json'), osp.join(self.root, f'{tag}.log')
            env = dist_env()
            launch = [sys.executable]
            if ranks > 1:
                launch += ['-m', 'torch.distributed.run', f'--nproc_per_node={ranks}',
                           '--master_addr=127.0.0.1', f'--master_port={env["PORT"]}']
            cmd = [*launch, DRIVER, self.config, self.ckpt, out, '--batch-size', '2',
                   '--work-dir', osp.join(self.root, tag), *args,
                   *(['--launcher', 'pytorch'] if ranks > 1 else [])]
            code = run_bounded(cmd, env, timeout=300, log=log)
            assert code == 0, open(log).read()[-6000:]
            with open(out) as f:
                self._done[tag] = (json.load(f), open(log).read())
        return self._done[tag]


@pytest.fixture(scope='module')
def evaluations(tmp_path_factory, runs, data_root):
    trained = runs.get('retinanet', 'eval-1ep', num_workers=0, max_epochs=1)
    root = str(tmp_path_factory.mktemp('eval_ranks'))
    config = write_config(osp.join(root, 'cfg', 'eval.py'), 'retinanet', data_root,
                          num_workers=0, validate=True, max_epochs=1)
    return Evaluations(root, config, checkpoint(trained))


def _differing(one, other):
    assert sorted(one['predictions']) == [str(i) for i in range(1, 9)]
    assert sorted(other['predictions']) == sorted(one['predictions'])
    return [k for k in one['predictions'] if one['predictions'][k] != other['predictions'][k]]


def test_val_on_two_ranks_with_workers_is_one_ranks_bit_for_bit(evaluations):
    one, _ = evaluations.get('val-1rank-w0', 1, '--num-workers', '0')
    two, log = evaluations.get('val-2ranks-w2', 2, '--num-workers', '2')
    assert one['batches'] == [[[1, 2], [3, 4], [5, 6], [7, 8]]]  # MMEngine's batches
    assert two['batches'] == BATCHES_2  # the same batches, dealt out whole
    assert _differing(one, two) == []
    assert one['metrics'] == two['metrics'] and 'coco/bbox_mAP' in one['metrics']
    assert 'mmrepro: the val loop' not in log


def test_test_loop_on_two_ranks_is_one_ranks_bit_for_bit(evaluations):
    one, _ = evaluations.get('val-1rank-w0', 1, '--num-workers', '0')
    two, _ = evaluations.get('test-2ranks-w0', 2, '--mode', 'test', '--num-workers', '0')
    assert two['batches'] == BATCHES_2
    assert _differing(one, two) == [] and one['metrics'] == two['metrics']


def test_mmengines_loop_on_two_ranks_changes_predictions(evaluations):
    """The control: the comparison above can fail."""
    one, _ = evaluations.get('val-1rank-w0', 1, '--num-workers', '0')
    two, log = evaluations.get('plain-2ranks-w0', 2, '--loop', 'PlainValLoop',
                               '--num-workers', '0')
    assert two['batches'] == [[[1, 3], [5, 7]], [[2, 4], [6, 8]]]  # DefaultSampler's
    assert _differing(one, two) != [] and one['metrics'] != two['metrics']
    assert ('mmrepro: the val loop is PlainValLoop, not ReproValLoop: with batch_size > 1 an '
            "image's padding, and so its predictions, can change with the number of ranks"
            ) in log
