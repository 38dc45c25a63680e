"""The record of what a model starts from: pretrained files by content, names resolved as
MMEngine resolves them."""
import hashlib
import importlib.util
import json
import os
import os.path as osp

import pytest
import torch
from mmdet.models.backbones import ResNet

from mmrepro.record.initial_weights import (
    changed_files,
    initial_differences,
    initial_files,
    resolve_checkpoint,
)
from mmrepro.resume.digests import weights_digest

SOURCE = 'model.backbone.init_cfg'


class Detector(torch.nn.Module):
    """A model whose backbone starts from a Pretrained file, as detector configs do."""

    def __init__(self, init_cfg):
        super().__init__()
        self.backbone = ResNet(depth=18, base_channels=16, init_cfg=init_cfg)


def _weights(seed):
    torch.manual_seed(seed)
    return {k: torch.randn(v.shape) if v.is_floating_point() else v
            for k, v in Detector(None).backbone.state_dict().items()}


def _sha256(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_a_pretrained_file_is_recorded_by_what_it_gives_the_module(tmp_path):
    weights = _weights(0)
    dropped = 'layer4.1.bn2.running_var'
    saved = {k: v for k, v in weights.items() if k != dropped}
    saved['fc.weight'] = torch.zeros(10, 128)  # the classifier a backbone has no place for
    saved['conv1.weight'] = torch.zeros(3, 3)  # another shape
    del saved['bn1.num_batches_tracked']  # torchvision files lack them: MMEngine counts none
    path = str(tmp_path / 'r18.pth')
    torch.save(saved, path)
    model = Detector(dict(type='Pretrained', checkpoint=path))
    [(source, entry)] = initial_files(model, None, resuming=False).items()
    assert source == SOURCE
    fits = {k: v for k, v in saved.items() if k in weights and k != 'conv1.weight'}
    assert entry == dict(name=path, resolved=path, how='local file', size=os.stat(path).st_size,
                         sha256=_sha256(path),
                         tensors_sha256=weights_digest(dict(state_dict=fits)),
                         loaded=len(weights) - 3, missing=1, unexpected=1, mismatched=1)


def test_one_changed_tensor_is_a_changed_file_and_named(tmp_path):
    path = str(tmp_path / 'r18.pth')
    torch.save(_weights(0), path)
    model = Detector(dict(type='Pretrained', checkpoint=path))
    before = dict(files=initial_files(model, None, resuming=False))
    weights = _weights(0)
    weights['conv1.weight'][0, 0, 0, 0] = torch.nextafter(weights['conv1.weight'][0, 0, 0, 0],
                                                          torch.tensor(1.0))
    torch.save(weights, path)
    after = dict(files=initial_files(model, None, resuming=False))
    old, new = before['files'][SOURCE], after['files'][SOURCE]
    assert old['tensors_sha256'] != new['tensors_sha256']
    assert changed_files(before, after) == [
        f"{SOURCE} {path}, sha256 {old['sha256'][:12]} vs {new['sha256'][:12]}"]
    assert changed_files(before, before) == []
    assert initial_differences(dict(initial=before), dict(initial=after)) == \
        changed_files(before, after)


def test_a_prefix_takes_the_backbone_out_of_a_detector_checkpoint(tmp_path):
    path = str(tmp_path / 'detector.pth')
    weights = _weights(1)
    torch.save(dict(meta={}, state_dict={**{f'backbone.{k}': v for k, v in weights.items()},
                                         'neck.conv.weight': torch.zeros(2)}), path)
    model = Detector(dict(type='Pretrained', checkpoint=path, prefix='backbone.'))
    entry = initial_files(model, None, resuming=False)[SOURCE]
    assert (entry['loaded'], entry['missing'], entry['unexpected']) == (len(weights), 0, 0)
    assert entry['tensors_sha256'] == weights_digest(dict(state_dict=weights))


def test_load_from_counts_unless_the_run_resumes(tmp_path):
    path = str(tmp_path / 'epoch_1.pth')
    torch.save(dict(state_dict={f'backbone.{k}': v for k, v in _weights(2).items()}), path)
    model = Detector(None)
    entry = initial_files(model, path, resuming=False)['load_from']
    assert (entry['name'], entry['missing'], entry['unexpected']) == (path, 0, 0)
    assert initial_files(model, path, resuming=True) == {}


def test_names_resolve_to_the_file_mmengine_reads(tmp_path, monkeypatch):
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))
    monkeypatch.setenv('MMENGINE_HOME', str(tmp_path / 'mmengine'))
    hub = tmp_path / 'torch' / 'hub' / 'checkpoints'
    if importlib.util.find_spec('torchvision') is None:  # MMEngine cannot load it either
        assert resolve_checkpoint('torchvision://resnet18') == (
            None, 'torchvision is not installed (MMEngine reads its model list)')
    else:
        assert resolve_checkpoint('torchvision://resnet18')[0] == str(
            hub / 'resnet18-f37072fd.pth')
    vgg = ('https://download.openmmlab.com/mmclassification/v0/vgg/'
           'vgg11_batch256_imagenet_20210208-4271cd6c.pth')
    assert resolve_checkpoint('mmcls://vgg11') == (
        str(hub / 'vgg11_batch256_imagenet_20210208-4271cd6c.pth'), f'mmcls model vgg11: {vgg}')
    assert resolve_checkpoint('open-mmlab://detectron2/resnet50_caffe') == (
        str(hub / 'resnet50_msra-5891d200.pth'), 'OpenMMLab model detectron2/resnet50_caffe: '
        'https://download.openmmlab.com/pretrain/third_party/resnet50_msra-5891d200.pth')
    url = 'https://example.org/models/r50_coco-1234.pth?raw=1'
    assert resolve_checkpoint(url) == (str(hub / 'r50_coco-1234.pth'),
                                       f'download cache of {url}')
    # $MMENGINE_HOME/open_mmlab.json redirects an open-mmlab:// name to a file of its own
    os.makedirs(tmp_path / 'mmengine', exist_ok=True)
    with open(tmp_path / 'mmengine' / 'open_mmlab.json', 'w') as f:
        json.dump({'detectron/resnet50_caffe': 'mine/r50_caffe.pth'}, f)
    assert resolve_checkpoint('open-mmlab://resnet50_caffe') == (  # a deprecated name too
        osp.join(str(tmp_path / 'mmengine'), 'mine/r50_caffe.pth'),
        'OpenMMLab model detectron/resnet50_caffe: mine/r50_caffe.pth in MMENGINE_HOME')
    assert resolve_checkpoint('mmcls://resnet_nine') == (None, "no mmcls model named "
                                                            "'resnet_nine'")
    assert resolve_checkpoint('s3://bucket/r50.pth') == (
        None, 's3:// storage is not read for the record')
    # the cached download is the file read, and recorded by its content
    os.makedirs(hub, exist_ok=True)
    torch.save(_weights(3), str(hub / 'r50_coco-1234.pth'))
    model = Detector(dict(type='Pretrained', checkpoint=url))
    entry = initial_files(model, None, resuming=False)[SOURCE]
    assert entry['resolved'] == str(hub / 'r50_coco-1234.pth')
    assert entry['sha256'] == _sha256(entry['resolved'])
    missing = Detector(dict(type='Pretrained', checkpoint='open-mmlab://resnet50_caffe'))
    assert initial_files(missing, None, resuming=False)[SOURCE]['error'] == 'no such file'


def test_a_file_one_side_could_not_read_is_a_difference_that_says_what_is_expected():
    base = dict(files={SOURCE: dict(name='torchvision://resnet18', sha256='a' * 64,
                                    resolved='/a/hub/r18.pth')})
    here = dict(files={SOURCE: dict(name='torchvision://resnet18', error='no such file',
                                    resolved='/b/hub/r18.pth')})
    assert changed_files(base, here, ('the baseline', 'here')) == [
        f'{SOURCE} torchvision://resnet18: read (the baseline) vs no such file (here); '
        'expected sha256 aaaaaaaaaaaa at /b/hub/r18.pth']
    legacy = dict(files={SOURCE: dict(name='x.pth', sha256='a' * 64, error='E')})
    other = dict(files={SOURCE: dict(name='x.pth', sha256='b' * 64, error='E')})
    assert changed_files(legacy, other) == [  # the bytes decide, whatever the load said
        f'{SOURCE} x.pth, sha256 aaaaaaaaaaaa vs bbbbbbbbbbbb']


@pytest.mark.parametrize('a,b,expected', [
    (dict(files={}, model_sha256='a' * 64), dict(files={}, model_sha256='b' * 64),
     ["the model's weights before the first step: sha256 aaaaaaaaaaaa vs bbbbbbbbbbbb (the "
      'same files: the random initialisation differs)']),
    (dict(files={}, model_sha256='a' * 64), dict(files={}, model_sha256='a' * 64), []),
    (dict(files={'load_from': dict(name='x.pth', sha256='1' * 64)}), dict(files={}),
     ['load_from x.pth: only in run A']),
    (None, dict(files={}, model_sha256='a' * 64), []),  # a record from before the section
])
def test_initial_differences(a, b, expected):
    records = [dict(initial=s) if s is not None else {} for s in (a, b)]
    assert initial_differences(*records) == expected
