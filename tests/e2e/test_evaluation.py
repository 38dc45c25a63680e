"""The score a team compares: validation on 2 ranks equals the checkpoint's test; test runs
are recorded, identical across reruns, workers and ranks, and compared image by image."""
import glob
import json
import os
import os.path as osp
import subprocess
import sys

import pytest
from support.cli import run_main
from support.dist_utils import dist_env, dist_train
from support.repro_utils import (
    REPO,
    RUN_CWD,
    TESTS,
    checkpoint,
    pythonpath,
    run_train,
    state_digest,
    write_config,
)

from mmrepro.cli.check_repro import main as check_main
from mmrepro.cli.repro_diff import main as diff_main
from mmrepro.record.evaluation import PREDICTIONS_NAME
from mmrepro.record.run_record import TEST_RECORD_NAME

pytestmark = pytest.mark.slow

# BatchNorm training (norm_eval=False, as RTMDet, YOLOX and many custom configs): each
# rank's running statistics follow its own batches. 2 ranks x batch 2: 4 iterations per
# epoch, validation after iterations 4, 8 and 12, a checkpoint every 6 iterations.
# Validation and test batches of 2 images of varied sizes: each batch pads its images.
EVAL = """
model = dict(backbone=dict(norm_eval=False))
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=6, save_last=False)]
val_dataloader = dict(batch_size={batch})
test_dataloader = dict(batch_size={batch})
"""
THREADS = {'OMP_NUM_THREADS': '1'}


class EvalRuns:
    """The 2-rank training runs of this module, each trained once."""

    def __init__(self, root, data_root):
        self.root, self.data_root, self._done = root, data_root, {}

    def config(self, tag, batch=2, num_workers=1):
        return write_config(osp.join(self.root, f'cfg-{tag}', 'cfg.py'), 'retinanet',
                            self.data_root, extra=EVAL.format(batch=batch),
                            num_workers=num_workers, validate=True, test=True)

    def get(self, tag, *args, num_workers=1):
        if tag not in self._done:
            work_dir = osp.join(self.root, tag)
            dist_train(self.config(tag, num_workers=num_workers), work_dir, *args)
            self._done[tag] = work_dir
        return self._done[tag]


@pytest.fixture(scope='module')
def eval_runs(tmp_path_factory, data_root):
    return EvalRuns(str(tmp_path_factory.mktemp('eval')), data_root)


def log_dirs(work_dir, name='run_record.json'):
    return sorted(osp.dirname(p) for p in glob.glob(osp.join(work_dir, '*', name)))


def evaluations(work_dir, name='run_record.json'):
    """``{(kind, iter): [[key, file, digest], ...]}`` of every log dir of a work dir."""
    out = {}
    for log_dir in log_dirs(work_dir, name):
        with open(osp.join(log_dir, PREDICTIONS_NAME)) as f:
            for line in f:
                row = json.loads(line)
                out[(row['kind'], row['iter'])] = row['images']
    return out


def read_test_record(work_dir):
    with open(osp.join(log_dirs(work_dir, TEST_RECORD_NAME)[-1], TEST_RECORD_NAME)) as f:
        return json.load(f)


def run_test(config, ckpt, work_dir, *args, nproc=1):
    """``tools/test.py`` (``tools/dist_test.sh`` for ``nproc`` > 1); the test's images."""
    if nproc > 1:
        cmd = ['bash', osp.join(REPO, 'tools', 'dist_test.sh'), config, ckpt, str(nproc),
               '--work-dir', work_dir, *args]
        env = dist_env()
    else:
        cmd = [sys.executable, osp.join(REPO, 'tools', 'test.py'), config, ckpt,
               '--work-dir', work_dir, *args]
        env = {**os.environ, **THREADS, 'PYTHONPATH': pythonpath(TESTS)}
    proc = subprocess.run(cmd, cwd=RUN_CWD, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    (images,) = evaluations(work_dir, TEST_RECORD_NAME).values()
    return images


def diff(capsys, a, b):
    """mmrepro-diff A B in this process (it compares records; it trains nothing)."""
    code, out, err = run_main(diff_main, capsys, a, b, '--no-envelope')
    return code, out + err


@pytest.fixture(scope='module')
def tested(eval_runs, tmp_path_factory):
    """The base run's last checkpoint tested once in 1 process and once on 2 ranks:
    ``(config, checkpoint, {nproc: (work dir, images)})``; the tests read them only."""
    base, root = eval_runs.get('base'), tmp_path_factory.mktemp('tested')
    config, ckpt = eval_runs.config('base'), checkpoint(base, 'epoch_3.pth')
    runs = {}
    for nproc in (1, 2):
        work_dir = str(root / f'r{nproc}')
        runs[nproc] = work_dir, run_test(config, ckpt, work_dir, nproc=nproc)
    return config, ckpt, runs


def test_two_rank_validation_with_batchnorm_training_equals_the_checkpoint(eval_runs,
                                                                            tested):
    base = eval_runs.get('base')
    validated = evaluations(base)
    assert sorted(validated) == [('val', 4), ('val', 8), ('val', 12)]
    # The last validation and the test of the checkpoint saved at the same point.
    (one, images), (_, on_two_ranks) = tested[2][1], tested[2][2]
    assert images == validated[('val', 12)]
    record = read_test_record(one)
    assert record['run'] == 'test' and record['checkpoint']['iter'] == 12
    assert record['evaluation'][0]['iter'] == 12
    assert on_two_ranks == images
    with open(osp.join(log_dirs(base)[-1], 'run_record.json')) as f:
        logged = json.load(f)['evaluation'][-1]
    assert logged['metrics'] == record['evaluation'][0]['metrics']
    assert logged['predictions_sha256'] == record['evaluation'][0]['predictions_sha256']


@pytest.mark.full
def test_weights_and_validations_bitwise_across_num_workers(eval_runs, capsys):
    """Full tier, a second proof: the default run proves predictions independent of
    ``num_workers`` on this checkpoint's test runs
    (``test_test_runs_identical_across_reruns_workers_and_ranks_batch_2_and_1``: 2 and 0
    workers) and weights independent of it in ``test_data_randomness.py``; a
    validation is a test of the weights it follows."""
    base, workers0 = eval_runs.get('base'), eval_runs.get('workers0', num_workers=0)
    assert state_digest(checkpoint(base)) == state_digest(checkpoint(workers0))
    assert evaluations(workers0) == evaluations(base)
    code, out = diff(capsys, base, workers0)
    assert 'evaluations: predictions and metrics equal at every evaluation in common (3: ' \
        'validation after iteration 4, validation after iteration 8, validation after ' \
        'iteration 12)' in out, out


def test_resumed_two_rank_run_validates_as_the_uninterrupted_one(eval_runs, tmp_path):
    base = eval_runs.get('base')
    work_dir = str(tmp_path / 'resumed')
    dist_train(eval_runs.config('resume'), work_dir, '--resume', checkpoint(base, 'iter_6.pth'))
    resumed, uninterrupted = evaluations(work_dir), evaluations(base)
    assert sorted(resumed) == [('val', 8), ('val', 12)]
    assert resumed == {k: v for k, v in uninterrupted.items() if k[0] == 'val' and k[1] > 6}
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))


def test_test_runs_identical_across_reruns_workers_and_ranks_batch_2_and_1(tested,
                                                                          tmp_path, capsys):
    config, ckpt, runs = tested
    (a, first), (r2, on_two_ranks) = runs[1], runs[2]
    assert len(first) == 8
    assert run_test(config, ckpt, str(tmp_path / 'w0'), '--cfg-options',
                    'test_dataloader.num_workers=0',
                    'test_dataloader.persistent_workers=False') == first
    assert on_two_ranks == first
    code, out = diff(capsys, a, r2)
    assert code == 0, out
    assert 'verdict: identical predictions (8 images, bit for bit) and metrics' in out
    one = ('--cfg-options', 'test_dataloader.batch_size=1')
    single = run_test(config, ckpt, str(tmp_path / 'b1'), *one)
    assert run_test(config, ckpt, str(tmp_path / 'b1r2'), *one, nproc=2) == single
    assert single != first  # one image per batch pads nothing: other predictions


@pytest.mark.full
def test_a_test_rerun_is_identical(tested, tmp_path):
    """Full tier: a second proof of what the test runs in other processes prove by
    predicting the same (``test_test_runs_identical_across_reruns_workers_and_ranks_batch_2_and_1``:
    no loader workers, 2 ranks)."""
    config, ckpt, runs = tested
    assert run_test(config, ckpt, str(tmp_path / 'again')) == runs[1][1]


@pytest.mark.full
def test_mmengines_test_loop_on_two_ranks_changes_predictions(eval_runs, tmp_path):
    """The control: on 2 ranks MMEngine's loop batches other images together (its
    ``DefaultSampler`` deals out images, not batches), and their padding differs.

    Full tier, a second proof of the control of MMEngine's behaviour; ours, which CI's
    default run proves in
    ``test_test_runs_identical_across_reruns_workers_and_ranks_batch_2_and_1``, and the log
    line for another loop in ``tests/unit/runner/test_evaluation.py``.
    """
    base = eval_runs.get('base')
    config, ckpt = eval_runs.config('base'), checkpoint(base, 'epoch_2.pth')
    plain = str(tmp_path / 'plain.py')  # custom_imports are read when a config file loads
    with open(plain, 'w') as f:
        f.write(f'_base_ = {config!r}\ntest_cfg = dict(type=\'PlainTestLoop\')\ncustom_imports '
                "= dict(imports=['mmrepro', 'support.plain_loops'], allow_failed_imports=False)\n")
    one = run_test(plain, ckpt, str(tmp_path / 'one'))
    assert run_test(plain, ckpt, str(tmp_path / 'two'), nproc=2) != one
    with open(glob.glob(str(tmp_path / 'two' / '*' / '*.log'))[0]) as f:
        assert ('mmrepro: the test loop is PlainTestLoop, not ReproTestLoop: with batch_size '
                "> 1 an image's padding, and so its predictions, can change with the number "
                'of ranks') in f.read()


def _first_difference(a, b):
    digests = {key: digest for key, _, digest in b}
    return next(i for i, (key, _, digest) in enumerate(a) if digests.get(key) != digest)


def test_diff_names_the_first_differing_image_of_two_test_runs(eval_runs, tested, tmp_path,
                                                               capsys):
    base = eval_runs.get('base')
    config, ckpt, runs = tested
    a_dir, a = runs[1]
    b = run_test(config, ckpt, str(tmp_path / 'b'), '--cfg-options',
                 'model.test_cfg.score_thr=0.2')
    at = _first_difference(a, b)
    key, name, _ = a[at]
    code, out = diff(capsys, a_dir, str(tmp_path / 'b'))
    assert code == 1, out
    assert (f'verdict: same weights, different predictions (first differing image: image '
            f'{at + 1} in dataset order ({name}, img_id {key})): the evaluation settings '
            'that differ: config.model.test_cfg.score_thr') in out, out
    other = run_test(config, checkpoint(base, 'epoch_2.pth'), str(tmp_path / 'c'))
    code, out = diff(capsys, a_dir, str(tmp_path / 'c'))
    at = _first_difference(a, other)
    assert code == 1, out
    assert (f'verdict: different predictions (first differing image: image {at + 1} in '
            f'dataset order ({a[at][1]}, img_id {a[at][0]})), from different weights: the '
            'checkpoints differ, so the difference is in training') in out, out


@pytest.mark.full
def test_diff_says_same_weights_different_validation(data_root, tmp_path, capsys):
    """Full tier, a second proof of the diff's evaluation verdicts, which CI's default run
    proves in ``test_diff_names_the_first_differing_image_of_two_test_runs``."""
    config = write_config(str(tmp_path / 'cfg' / 'cfg.py'), 'retinanet', data_root,
                          num_workers=0, validate=True, max_epochs=1)
    run_train(config, str(tmp_path / 'a'), env=THREADS)
    run_train(config, str(tmp_path / 'b'), '--cfg-options', 'model.test_cfg.score_thr=0.2',
              env=THREADS)
    a, b = evaluations(str(tmp_path / 'a')), evaluations(str(tmp_path / 'b'))
    at = _first_difference(a[('val', 8)], b[('val', 8)])
    key, name, _ = a[('val', 8)][at]
    code, out = diff(capsys, str(tmp_path / 'a'), str(tmp_path / 'b'))
    assert code == 1, out
    assert 'weights: identical' in out, out
    assert (f'verdict: same weights, different validation after iteration 8 (first '
            f'differing image: image {at + 1} in dataset order ({name}, img_id {key})): the '
            'difference is in evaluation') in out, out


def test_check_against_a_test_run_tests_the_same_checkpoint_here(eval_runs, tested, tmp_path,
                                                                 capsys, monkeypatch):
    base = eval_runs.get('base')
    _, ckpt, runs = tested
    baseline = runs[1][0]
    monkeypatch.chdir(RUN_CWD)  # where the baseline was tested
    monkeypatch.setenv('OMP_NUM_THREADS', THREADS['OMP_NUM_THREADS'])  # the baseline's

    def check(*args):
        return run_main(check_main, capsys, '--against', baseline, *args)

    code, out, err = check('--from', ckpt, '--work-dir', str(tmp_path / 'here'))
    assert code == 0, out + err[-3000:]
    assert 'verdict: identical predictions (8 images, bit for bit) and metrics' in out
    code, out, err = check('--from', checkpoint(base, 'epoch_2.pth'), '--work-dir',
                           str(tmp_path / 'other'))
    assert code == 1, out + err[-3000:]
    assert ('verdict: a different checkpoint (before testing): the baseline tested other '
            'weights; give the checkpoint the baseline tested, or compare the training runs'
            ) in out
    assert not (tmp_path / 'other').exists()  # refused before testing
