"""mmrepro.record.recorder: the run record written at the start, completed by every save
and by the weights training ended with (a real toy Runner, 24 iterations)."""
from __future__ import annotations

import json
import os.path as osp

from mmengine.runner import Runner
from support.toy_runner import recording_runner, runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.record.fingerprint import file_sha256
from mmrepro.record.recorder import RunRecorder
from mmrepro.resume.checkpoint_io import safe_load
from mmrepro.resume.digests import META_KEY, weights_digest
from mmrepro.run.settings import RunSettings


def _record(runner):
    with open(osp.join(runner.log_dir, 'run_record.json')) as f:
        return json.load(f)


def test_a_runs_record_holds_every_checkpoints_digest_and_the_final_one(tmp_path):
    runner = Runner(**runner_kwargs(tmp_path, [dict(type='ReproducibilityHook',
                                                    trace_interval=0)]))
    runner.train()
    record = _record(runner)
    digests = {}
    for epoch, iteration in ((1, 8), (2, 16), (3, 24)):
        checkpoint = safe_load(str(tmp_path / f'epoch_{epoch}.pth'))
        digests[str(iteration)] = checkpoint['meta'][META_KEY]
        assert weights_digest(checkpoint) == digests[str(iteration)]  # of its own weights
        assert checkpoint['meta']['run_record']['seed'] == record['seed'] == 3
    assert record['weights']['checkpoints'] == digests
    assert record['weights']['final'] == dict(iter=24, sha256=digests['24'],
                                              covers='state_dict')
    log = open(runner.logger.log_file).read()
    assert f"mmrepro: run record written to {osp.join(runner.log_dir, 'run_record.json')}" \
        in log
    assert (f"mmrepro: weights sha256 after iteration 24: {digests['24']} (state_dict; compare "
            'with mmrepro-digest CHECKPOINT)') in log


def test_without_a_checkpoint_at_the_end_the_model_is_digested(tmp_path):
    hooks = [dict(type='ReproducibilityHook', trace_interval=0)]
    kwargs = runner_kwargs(tmp_path, hooks, default_hooks=dict(
        checkpoint=dict(type='CheckpointHook', interval=2, save_last=False),
        logger=dict(type='LoggerHook', interval=100)))
    runner = Runner(**kwargs)
    runner.train()
    record = _record(runner)
    assert list(record['weights']['checkpoints']) == ['16']  # epoch 2 only
    state = {k: v.detach().cpu() for k, v in runner.model.state_dict().items()}
    expected = weights_digest(dict(meta={}, state_dict=state))
    assert record['weights']['final'] == dict(iter=24, sha256=expected, covers='state_dict')


def test_a_recorder_that_did_not_start_writes_nothing(tmp_path):
    recorder = RunRecorder('labels')
    runner = recording_runner(None, tmp_path, tmp_path, None, RunSettings(seed=0))
    checkpoint = dict(meta={}, state_dict={})
    recorder.saving(runner, checkpoint)
    recorder.finish(runner)
    assert checkpoint == dict(meta={}, state_dict={}) and recorder.record is None
    assert not osp.exists(tmp_path / 'run_record.json')


def test_the_weights_a_run_starts_from_are_recorded_and_kept_on_resume(tmp_path):
    """``load_from``: the file by content and the model's weights before step 1, which are
    the file's where it fills the whole model; a resumed run keeps the section of the run
    it continues."""
    hooks = [dict(type='ReproducibilityHook', trace_interval=0)]
    first = Runner(**runner_kwargs(tmp_path / 'a', hooks, train_cfg=dict(by_epoch=True,
                                                                         max_epochs=1)))
    first.train()
    start = str(tmp_path / 'a' / 'epoch_1.pth')
    loaded = Runner(**runner_kwargs(tmp_path / 'b', hooks, load_from=start,
                                    train_cfg=dict(by_epoch=True, max_epochs=2)))
    loaded.train()
    initial = _record(loaded)['initial']
    entry = initial['files']['load_from']
    assert (entry['name'], entry['missing'], entry['unexpected']) == (start, 0, 0)
    assert entry['sha256'] == file_sha256(start)
    assert initial['model_sha256'] == safe_load(start)['meta'][META_KEY]
    assert initial['model_sha256'] != _record(first)['initial']['model_sha256']
    resumed = Runner(**runner_kwargs(tmp_path / 'b', hooks, resume=True,
                                     load_from=str(tmp_path / 'b' / 'epoch_1.pth'),
                                     train_cfg=dict(by_epoch=True, max_epochs=2)))
    resumed.train()
    assert _record(resumed)['initial'] == initial
