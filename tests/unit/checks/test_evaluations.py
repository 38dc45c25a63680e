"""Evaluations compared: paired by kind and iteration, the first differing image named."""
import json

from mmrepro.checks.evaluations import (
    compare_evaluations,
    evaluation_lines,
    first_image,
    read_evaluations,
)

IMAGES = [['1', 'val_000.png', 'a'], ['2', 'val_001.png', 'b'], ['3', 'val_002.png', 'c']]


def entry(iteration, digest, per_image=None, mAP=0.5, kind='val'):
    return {'kind': kind, 'iter': iteration, 'metrics': {'coco/bbox_mAP': mAP},
            'images': 3, 'predictions_sha256': digest, 'per_image': per_image}


def test_first_image_in_dataset_order_then_one_b_lacks():
    changed = [IMAGES[0], ['2', 'val_001.png', 'x'], IMAGES[2]]
    assert first_image(IMAGES, changed) == (1, '2', 'val_001.png')
    assert first_image(IMAGES, IMAGES[:2]) == (2, '3', 'val_002.png')
    assert first_image(IMAGES[:2], IMAGES) == (2, '3', 'val_002.png')
    assert first_image(IMAGES, list(IMAGES)) is None


def test_pairs_by_iteration_and_names_the_first_difference():
    changed = [IMAGES[0], ['2', 'val_001.png', 'x'], IMAGES[2]]
    a = {('val', 4): entry(4, 'p'), ('val', 8): entry(8, 'q', IMAGES)}
    b = {('val', 4): entry(4, 'p'), ('val', 8): entry(8, 'r', changed, mAP=0.4),
         ('val', 12): entry(12, 's')}
    diff = compare_evaluations(a, b)
    assert diff.common == [('val', 4), ('val', 8)] and diff.only == [('val', 12)]
    assert diff.first == ('val', 8) and diff.image == (1, '2', 'val_001.png')
    assert evaluation_lines(diff) == [
        'evaluations: predictions differ at the validation after iteration 8',
        '  first differing image: image 2 in dataset order (val_001.png, img_id 2)',
        '  metrics: coco/bbox_mAP 0.5 vs 0.4']


def test_equal_and_missing_lines():
    a = {('val', 4): entry(4, 'p')}
    assert evaluation_lines(compare_evaluations(a, dict(a))) == [
        'evaluations: predictions and metrics equal at every evaluation in common (1: '
        'validation after iteration 4)']
    assert evaluation_lines(compare_evaluations(a, {})) == [
        'evaluations: none in common (1 in one run only)']
    assert evaluation_lines(compare_evaluations({}, {})) == []
    without = compare_evaluations({('val', 4): entry(4, 'p')}, {('val', 4): entry(4, 'q')})
    assert evaluation_lines(without)[1:] == [
        '  per-image digests: not in both runs (predictions.jsonl), so the first '
        'differing image is not named',
        '  metrics: equal (the predictions differ below what they show)']


def test_read_evaluations_joins_log_dirs_and_matches_per_image_lines(tmp_path):
    first, second = tmp_path / 'one', tmp_path / 'two'
    for log_dir, iteration in ((first, 4), (second, 8)):
        log_dir.mkdir()
        line = {'kind': 'val', 'iter': iteration, 'predictions_sha256': f'd{iteration}',
                'images': IMAGES}
        (log_dir / 'predictions.jsonl').write_text(json.dumps(line) + '\n{"cut sh')
    records = [({'evaluation': [entry(4, 'd4')]}, str(first)),
               ({'evaluation': [entry(8, 'd8'), entry(12, 'd12')]}, str(second))]
    found = read_evaluations(records)
    assert sorted(found) == [('val', 4), ('val', 8), ('val', 12)]
    assert found[('val', 4)]['per_image'] == IMAGES
    assert found[('val', 12)]['per_image'] is None
