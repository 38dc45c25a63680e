"""runner.evaluating: a run that only tests is recorded as one, without building training."""
from __future__ import annotations

import glob
import json
import os.path as osp

from mmengine.runner import Runner
from support.toy_runner import evaluating_kwargs, runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.record.weights import weights_digest
from mmrepro.resume.checkpoint_io import safe_load


def test_a_test_run_writes_test_record_with_checkpoint_and_metrics(tmp_path):
    Runner(**runner_kwargs(tmp_path / 'train', [dict(type='ReproducibilityHook')])).train()
    ckpt = str(tmp_path / 'train' / 'epoch_3.pth')
    runner = Runner(**evaluating_kwargs(tmp_path / 'test', ckpt))
    metrics = runner.test()
    assert not hasattr(runner._train_loop, 'run')  # the train loop was never built
    (path,) = glob.glob(str(tmp_path / 'test' / '*' / 'test_record.json'))
    assert not glob.glob(str(tmp_path / 'test' / '*' / 'run_record.json'))
    with open(path) as f:
        record = json.load(f)
    assert record['run'] == 'test' and 'weights' not in record
    assert record['checkpoint']['weights_sha256'] == weights_digest(safe_load(ckpt))
    assert record['checkpoint']['iter'] == 24 and record['checkpoint']['file'] == ckpt
    (entry,) = record['evaluation']
    assert entry['kind'] == 'test' and entry['iter'] == 24 and entry['epoch'] == 3
    assert entry['metrics'] == {'mean_output': metrics['mean_output']}
    assert record['data']['dataset'] == 'NoisyData'  # the tested data's fingerprint
    assert osp.isfile(osp.join(osp.dirname(path), 'predictions.jsonl'))


def test_training_keeps_its_run_record(tmp_path):
    Runner(**runner_kwargs(tmp_path, [dict(type='ReproducibilityHook')],
                           train_cfg=dict(by_epoch=True, max_epochs=1))).train()
    (path,) = glob.glob(str(tmp_path / '*' / 'run_record.json'))
    with open(path) as f:
        record = json.load(f)
    assert 'run' not in record and 'checkpoint' not in record
