"""mmrepro.record.run_record: contents, config flattening, data fingerprint, reading, diffing."""
import json
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from support.toy_runner import recording_runner

from mmrepro.record.run_record import (
    MISSING,
    RunRecordError,
    collect_run_record,
    data_fingerprint,
    diff_records,
    find_log_dir,
    flatten_config,
    load_run_record,
    write_run_record,
)
from mmrepro.run.settings import RunSettings


class _Dataset:
    """The parts of an MMEngine dataset the fingerprint reads."""

    def __init__(self, root, images):
        self.data_root = root
        self.ann_file = osp.join(root, 'annotations', 'train.json')
        self._infos = [dict(img_path=osp.join(root, 'images', name)) for name in images]

    def __len__(self):
        return len(self._infos)

    def get_data_info(self, index):
        return self._infos[index]


def _data(root, boxes=((1, 2, 3, 4),), images=('a.png', 'b.png')):
    os.makedirs(osp.join(root, 'annotations'), exist_ok=True)
    with open(osp.join(root, 'annotations', 'train.json'), 'w') as f:
        json.dump(dict(annotations=[dict(bbox=list(b)) for b in boxes]), f)
    return _Dataset(str(root), images)


def _runner(tmp_path, dataset, **cfg):
    config = Config(dict(model=dict(type='RetinaNet'), work_dir=str(tmp_path / 'work'),
                         optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
                         train_pipeline=[dict(type='LoadImageFromFile'),
                                         dict(type='RandomFlip', prob=0.5)],
                         img_scale=(1333, 800), **cfg))
    return recording_runner(config, tmp_path, tmp_path, dataset,
                            RunSettings(seed=3, deterministic=True))


def test_record_has_every_section(tmp_path, monkeypatch):
    monkeypatch.setenv('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
    monkeypatch.setenv('PYTHONHASHSEED', '3')
    monkeypatch.delenv('NCCL_ALGO', raising=False)
    runner = _runner(tmp_path, _data(tmp_path / 'data'))
    record = collect_run_record(runner)
    assert record['seed'] == 3 and record['randomness']['deterministic'] is True
    assert record['world_size'] == 1 and record['backend'] is None
    assert set(record['versions']) >= {'python', 'torch', 'cuda', 'cudnn', 'mmengine', 'mmcv',
                                       'mmdet', 'numpy', 'mmrepro'}
    assert record['versions']['torch'].startswith(torch.__version__.split('+')[0])
    assert set(record['devices']) >= {'cpu', 'cuda', 'host', 'torch_threads'}
    assert record['env']['CUBLAS_WORKSPACE_CONFIG'] == ':4096:8'
    assert record['env']['PYTHONHASHSEED'] == '3'
    assert record['env']['NCCL_ALGO'] is None  # listed, and unset here
    assert len(record['config_sha256']) == 64
    assert record['config']['optim_wrapper.optimizer.lr'] == '0.01'
    assert record['data']['num_samples'] == 2
    assert len(record['code']['mmrepro_sha256']) == 64
    assert record['numerics']['cpu']['capability'] == torch.backends.cpu.get_cpu_capability()
    assert record['numerics']['amp'] == {'enabled': False, 'dtype': None}
    assert record['torch_flags']['matmul_allow_tf32'] is torch.backends.cuda.matmul.allow_tf32
    assert record['torch_flags']['deterministic_algorithms'] is \
        torch.are_deterministic_algorithms_enabled()
    path = write_run_record(runner, record)
    assert load_run_record(path)[0] == json.loads(json.dumps(record, default=str))


def test_flatten_config_names_nested_keys():
    flat = flatten_config(Config(dict(
        optim_wrapper=dict(optimizer=dict(lr=0.02)), img_scale=(1333, 800),
        pipeline=[dict(type='Resize'), dict(type='RandomFlip', prob=0.5)], empty=dict(),
        fn=print)))
    assert flat['optim_wrapper.optimizer.lr'] == '0.02'
    assert flat['img_scale'] == '(1333, 800)'  # lists of plain values stay one key
    assert flat['pipeline.1.prob'] == '0.5'
    assert flat['empty'] == '{}'
    assert flat['fn'] == 'builtins.print'  # no memory address


def test_config_hash_ignores_work_dir_only(tmp_path):
    data = _data(tmp_path / 'data')
    a = collect_run_record(_runner(tmp_path / 'a', data))
    b = collect_run_record(_runner(tmp_path / 'b', data))
    assert a['config_sha256'] == b['config_sha256']
    c = collect_run_record(_runner(tmp_path / 'c', data, seed_note=1))
    assert c['config_sha256'] != a['config_sha256']


def test_data_fingerprint(tmp_path):
    base = data_fingerprint(_data(tmp_path / 'one'))
    assert data_fingerprint(_data(tmp_path / 'two')) == base  # same data, other place
    changed = data_fingerprint(_data(tmp_path / 'three', boxes=((1, 2, 3, 5),)))
    assert changed['annotations_sha256'] != base['annotations_sha256']
    assert changed['ann_files']['annotations/train.json'] != \
        base['ann_files']['annotations/train.json']
    assert changed['images_sha256'] == base['images_sha256']
    fewer = data_fingerprint(_data(tmp_path / 'four', images=('a.png',)))
    assert fewer['images_sha256'] != base['images_sha256'] and fewer['num_samples'] == 1


def test_diff_records_names_nested_keys_and_skips_places():
    a = dict(seed=0, work_dir='/x', timestamp='1', argv=['a'],
             versions=dict(torch='2.13.0', mmcv='2.1.0'),
             config={'optim_wrapper.optimizer.lr': '0.01', 'work_dir': "'/x'"})
    b = dict(seed=0, work_dir='/y', timestamp='2', argv=['b'],
             versions=dict(torch='2.12.0', mmcv='2.1.0'),
             config={'optim_wrapper.optimizer.lr': '0.02', 'work_dir': "'/y'"}, extra=1)
    assert diff_records(a, b) == [
        ('versions.torch', '2.13.0', '2.12.0'),
        ('config.optim_wrapper.optimizer.lr', '0.01', '0.02'), ('extra', MISSING, 1)]
    assert diff_records(a, a) == []


def _record(**kw):
    return dict(dict(seed=0, world_size=1, versions={}, config_sha256='0' * 64), **kw)


def test_find_and_load_records(tmp_path):
    for stamp in ('20260101_000000', '20260102_000000'):
        os.makedirs(tmp_path / stamp)
        (tmp_path / stamp / 'run_record.json').write_text(json.dumps(_record(timestamp=stamp)))
    assert find_log_dir(str(tmp_path)) == str(tmp_path / '20260102_000000')  # newest
    record, source = load_run_record(str(tmp_path))
    assert record['timestamp'] == '20260102_000000' and source.endswith('run_record.json')
    ckpt = tmp_path / 'epoch_1.pth'
    torch.save(dict(meta=dict(run_record=_record(seed=5)), state_dict={}), ckpt)
    assert load_run_record(str(ckpt))[0]['seed'] == 5


@pytest.mark.parametrize('content, message', [
    ('{"seed": 0, "world_', r'run_record.json: not valid JSON \(.* line 1 column'),
    ('[1, 2]', r'run_record.json: a run record is a JSON object, got list'),
    ('{"seed": 0}', r'run_record.json: not a complete run record, missing key\(s\): '
                    'world_size, versions, config_sha256'),
])
def test_corrupted_records_name_the_file_and_problem(tmp_path, content, message):
    (tmp_path / 'run_record.json').write_text(content)
    with pytest.raises(RunRecordError, match=message):
        load_run_record(str(tmp_path))


def test_missing_records(tmp_path):
    with pytest.raises(RunRecordError, match='no such file or directory'):
        load_run_record(str(tmp_path / 'nope'))
    with pytest.raises(RunRecordError, match=r'no run_record.json in it or in a timestamped'):
        load_run_record(str(tmp_path))
    torch.save(dict(meta={}), tmp_path / 'old.pth')
    with pytest.raises(RunRecordError, match=r"old.pth: the checkpoint has no meta\['run_"):
        load_run_record(str(tmp_path / 'old.pth'))
