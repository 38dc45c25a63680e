"""Evaluation digests: every prediction value counts, dataset order, each image once."""
import json

import numpy as np
import pytest
import torch
from mmdet.structures import DetDataSample
from mmengine.structures import InstanceData, PixelData

from mmrepro.record.evaluation import (
    EvaluationLedger,
    dataset_order,
    image_key,
    ordered,
    overall_digest,
    predictions_digest,
    read_predictions,
    write_predictions,
)


def sample(img_id=1, score=0.5, path='data/images/val_000.png'):
    out = DetDataSample(metainfo=dict(img_id=img_id, img_path=path))
    out.pred_instances = InstanceData(bboxes=torch.tensor([[1.0, 2.0, 3.0, 4.0]]),
                                      scores=torch.tensor([score]),
                                      labels=torch.tensor([2]))
    out.gt_instances = InstanceData(bboxes=torch.zeros(0, 4))
    return out


def test_one_ulp_of_one_score_changes_the_digest():
    nudged = float(np.nextafter(np.float32(0.5), np.float32(1)))
    assert predictions_digest(sample()) == predictions_digest(sample())
    assert predictions_digest(sample(score=nudged)) != predictions_digest(sample())


def test_only_predictions_count_not_ground_truth_or_paths():
    other = sample(path='elsewhere/val_000.png')
    other.gt_instances = InstanceData(bboxes=torch.ones(3, 4))
    assert predictions_digest(other) == predictions_digest(sample())


def test_segmentation_predictions_count():
    a, b = sample(), sample()
    a.pred_sem_seg = PixelData(sem_seg=torch.zeros(1, 2, 2, dtype=torch.long))
    b.pred_sem_seg = PixelData(sem_seg=torch.ones(1, 2, 2, dtype=torch.long))
    assert predictions_digest(a) != predictions_digest(b)


def test_image_key_is_the_img_id_else_the_file_name():
    assert image_key(sample(img_id=7)) == ('7', 'val_000.png')
    no_id = DetDataSample(metainfo=dict(img_path='x/y/val_003.png'))
    assert image_key(no_id) == ('val_003.png', 'val_003.png')


class TinyDataset:
    def __init__(self, ids):
        self.ids = ids

    def __len__(self):
        return len(self.ids)

    def get_data_info(self, index):
        return dict(img_id=self.ids[index], img_path=f'val_{index:03d}.png')


def test_ranks_parts_in_dataset_order_padding_counted_once():
    order = dataset_order(TinyDataset([10, 11, 12, 13, 14]))
    # DefaultSampler on 2 ranks: 0, 2, 4 and 1, 3, 0 (padded by wrapping)
    rank0 = [('10', 'a', 'd10'), ('12', 'c', 'd12'), ('14', 'e', 'd14')]
    rank1 = [('11', 'b', 'd11'), ('13', 'd', 'd13'), ('10', 'a', 'd10')]
    assert [i[0] for i in ordered([rank0, rank1], order)] == ['10', '11', '12', '13', '14']
    assert overall_digest(ordered([rank0, rank1], order)) == overall_digest(
        ordered([rank1 + rank0], order))


def test_ledger_entry_and_predictions_file(tmp_path):
    ledger = EvaluationLedger()
    ledger.begin()
    ledger.add([sample(img_id=2, path='val_001.png'), sample(img_id=1)])
    entry, images = ledger.finish('val', TinyDataset([1, 2]),
                                  {'coco/bbox_mAP': np.float64(0.25)}, 8, 1)
    assert [key for key, _, _ in images] == ['1', '2']
    assert entry == dict(kind='val', iter=8, epoch=1, metrics={'coco/bbox_mAP': 0.25},
                         images=2, predictions_sha256=overall_digest(images))
    json.dumps(entry)  # JSON holds it as it is
    write_predictions(str(tmp_path), entry, images)
    write_predictions(str(tmp_path), {**entry, 'iter': 16}, images)
    rows = read_predictions(str(tmp_path / 'predictions.jsonl'))
    assert [row['iter'] for row in rows] == [8, 16]
    assert rows[0]['images'] == [list(image) for image in images]


@pytest.mark.parametrize('outputs', [None, [], [{'not': 'a sample'}], torch.ones(2, 3)])
def test_batches_without_data_samples_add_nothing(outputs):
    ledger = EvaluationLedger()
    ledger.begin()
    ledger.add(outputs)
    entry, images = ledger.finish('test', None, None, None, None)
    assert images == [] and entry['images'] == 0 and entry['metrics'] == {}
