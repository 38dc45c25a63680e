"""mmrepro.trace.samples and the data verdict: which samples the model was given."""
import torch

from mmrepro import trace as T
from mmrepro.trace.samples import sample_digests


def _batch(box=(1., 2., 3., 4.), path='/a/2.png', img_id=7):
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    samples = []
    for i, meta in enumerate([dict(img_path='/a/1.png'), dict(img_path=path, img_id=img_id)]):
        data = DetDataSample(metainfo=meta)
        data.gt_instances = InstanceData(bboxes=torch.tensor([box if i else [0., 0., 1., 1.]]),
                                         labels=torch.tensor([1]))
        samples.append(data)
    images = [torch.full((3, 4, 4), i, dtype=torch.uint8) for i in range(2)]
    return dict(inputs=images, data_samples=samples)


def test_one_digest_per_sample_named_by_image_id_or_file():
    base = sample_digests(_batch())
    assert list(base) == ['0', '1']
    assert base['0'].split()[0] == '1.png' and base['1'].split()[0] == 'img_id=7'
    assert all(len(entry.split()[1]) == 16 for entry in base.values())
    moved = sample_digests(_batch(box=(1., 2., 3., 5.)))
    assert moved['0'] == base['0'] and moved['1'] != base['1']
    # the same numbers from another directory: the same data
    assert sample_digests(_batch(path='/elsewhere/2.png')) == base


def test_other_batches_get_one_digest():
    digests = sample_digests(torch.ones(2, 3))
    assert list(digests) == ['batch'] and len(digests['batch']) == 16
    assert sample_digests(None) == {}


def _line(iteration, loss, data):
    return dict(iter=iteration, epoch=0, losses=dict(loss=loss), data=data, grad={},
                weight={}, buffer={})


def test_data_verdict_names_the_first_differing_sample_past_a_numeric_difference():
    a = [_line(1, '0x1p+0', {'0': 'img_id=1 aa', '1': 'img_id=2 bb'}),
         _line(2, '0x1p+1', {'0': 'img_id=3 cc', '1': 'img_id=4 dd'})]
    b = [_line(1, '0x1.8p+0', {'0': 'img_id=1 aa', '1': 'img_id=2 bb'}),
         _line(2, '0x1p+1', {'0': 'img_id=3 cc', '1': 'img_id=5 ee'})]
    diff = T.compare_traces(a, b)
    assert diff.iteration == 1 and diff.culprit() == ('losses', 'loss')
    assert diff.data_iteration == 2 and diff.data_checked == [1, 2]
    assert T.data_verdict(diff) == ('data: differ from iteration 2, sample 1 of the batch: '
                                    'A img_id=4 dd vs B img_id=5 ee')
    same = T.compare_traces(a[:1], b[:1])
    assert T.data_verdict(same) == 'data: identical samples in iteration 1'
    assert T.describe_diff(same)[-1] == 'data: identical samples in iteration 1'


def test_a_data_difference_is_blamed_first():
    a = [_line(1, '0x1p+0', {'0': 'img_id=1 aa'})]
    b = [_line(1, '0x1.8p+0', {'0': 'img_id=1 ab'})]
    lines = T.describe_diff(T.compare_traces(a, b))
    assert lines[1] == '  first difference: data of sample 0 of the batch'
    assert lines[2] == '    the batch itself differs: data order, augmentation or loading'
    assert lines[-1] == ('data: differ from iteration 1, sample 0 of the batch: '
                         'A img_id=1 aa vs B img_id=1 ab')


def test_traces_without_data_give_no_verdict():
    old = [dict(iter=1, losses=dict(loss='0x1p+0'), grad={}, weight={}, buffer={})]
    diff = T.compare_traces(old, old)
    assert diff.identical and diff.data_checked == [] and T.data_verdict(diff) is None
