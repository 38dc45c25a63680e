"""The verdicts on evaluations: two test runs; same weights, different validation."""
from mmrepro.checks.eval_verdict import (
    checkpoint_lines,
    compare_test_runs,
    validation_verdict,
)
from mmrepro.checks.evaluations import EvaluationDiff

IMAGES = [['1', 'val_000.png', 'a'], ['2', 'val_001.png', 'b']]
OTHER = [['1', 'val_000.png', 'a'], ['2', 'val_001.png', 'x']]


def a_test(digest, images, iteration=12):
    return {('test', iteration): {'kind': 'test', 'iter': iteration, 'metrics': {'m': 1},
                                  'images': 2, 'predictions_sha256': digest,
                                  'per_image': images}}


def test_checkpoint_lines():
    a = {'checkpoint': {'weights_sha256': 'a' * 64, 'iter': 12}}
    b = {'checkpoint': {'weights_sha256': 'b' * 64, 'iter': 8}}
    assert checkpoint_lines(a, dict(a)) == (
        ['checkpoints: the same weights (aaaaaaaaaaaa, iteration 12)'], True)
    assert checkpoint_lines(a, b) == (
        ['checkpoints: different weights (A aaaaaaaaaaaa at iteration 12, B bbbbbbbbbbbb at '
         'iteration 8)'], False)
    assert checkpoint_lines(a, {}) == (['checkpoints: no weights digest in both test records'],
                                       None)


def test_test_runs_pair_whatever_the_checkpoint_iteration():
    _, lines, same = compare_test_runs(a_test('p', IMAGES), a_test('p', IMAGES, 8), True, [])
    assert same and lines == ['verdict: identical predictions (2 images, bit for bit) and '
                              'metrics']


def test_same_weights_names_the_settings_or_nondeterminism():
    _, lines, same = compare_test_runs(a_test('p', IMAGES), a_test('q', OTHER), True,
                                      [('world_size', 1, 2)])
    assert not same and lines == [
        'verdict: same weights, different predictions (first differing image: image 2 in '
        'dataset order (val_001.png, img_id 2)): the evaluation settings that differ: '
        'world_size']
    _, lines, _ = compare_test_runs(a_test('p', IMAGES), a_test('q', OTHER), True, [])
    assert lines[0].endswith('no recorded setting differs: an operation of evaluation is '
                             'nondeterministic here')


def test_different_weights_points_at_training():
    _, lines, _ = compare_test_runs(a_test('p', IMAGES), a_test('q', OTHER), False, [])
    assert lines == [
        'verdict: different predictions (first differing image: image 2 in dataset order '
        '(val_001.png, img_id 2)), from different weights: the checkpoints differ, so the '
        'difference is in training',
        '  next: compare the two training runs (mmrepro-diff WORK_DIR_A WORK_DIR_B)']


def test_no_test_is_inconclusive():
    diff, lines, same = compare_test_runs({}, a_test('p', IMAGES), True, [])
    assert not diff.common and not same
    assert lines[0] == ('verdict: inconclusive: a test record holds no test (was the test '
                        'interrupted?)')


def test_same_weights_different_validation():
    diff = EvaluationDiff(common=[('val', 8)], first=('val', 8), image=(1, '2', 'val_001.png'))
    lines = validation_verdict(diff, True, (2, 1))
    assert lines[0] == (
        'verdict: same weights, different validation after iteration 8 (first differing '
        'image: image 2 in dataset order (val_001.png, img_id 2)): the difference is in '
        "evaluation: BatchNorm buffers (each rank's own running statistics where rank 0's "
        'are not broadcast before validation, as mmrepro does), the validation batches or '
        'the evaluation settings; the runs validate on other numbers of ranks (2 vs 1)')
    assert validation_verdict(diff, False, (1, 1))[0].startswith(
        'verdict: training agrees where compared, different validation after iteration 8')
