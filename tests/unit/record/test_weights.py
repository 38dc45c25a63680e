"""mmrepro.record.weights: the ledger of a run's weights digests."""
import hashlib

import torch

from mmrepro.record.weights import WeightsLedger
from mmrepro.resume.digests import META_KEY, weights_digest


def _state():
    return {'conv.weight': torch.arange(6, dtype=torch.float32).reshape(2, 3)}


def test_ledger_writes_each_checkpoint_digest_into_its_meta():
    ledger = WeightsLedger()
    checkpoint = {'meta': {'iter': 8}, 'state_dict': _state()}
    digest = ledger.saving(checkpoint)
    assert checkpoint['meta'][META_KEY] == digest == weights_digest(_state())
    assert ledger.section() == {'checkpoints': {'8': digest}, 'final': None}
    assert digest != hashlib.sha256(b'').hexdigest()


def test_digest_command_names_a_missing_file_in_one_line(tmp_path, capsys):
    from mmrepro.cli.weights_digest import main
    assert main([str(tmp_path / 'nope.pth')]) == 2
    err = capsys.readouterr().err
    assert err == (f"mmrepro-digest: error: {tmp_path / 'nope.pth'}: no such file; expected a "
                   'checkpoint file (.pth)\n')
    torch.save({'epoch': 3}, str(tmp_path / 'meta.pth'))
    assert main([str(tmp_path / 'meta.pth')]) == 2
    assert capsys.readouterr().err == (f"mmrepro-digest: error: {tmp_path / 'meta.pth'}: has "
                                       'no state_dict (keys: epoch); not a model checkpoint\n')


def test_final_digest_without_a_last_checkpoint_is_what_a_checkpoint_would_hold(tmp_path):
    """No checkpoint at the last iteration: the final weights, EMA swapped in as a save
    swaps them, are digested; a checkpoint saved then holds exactly those weights."""
    import glob
    import json
    import os.path as osp

    from mmengine.runner import Runner
    from support.toy_runner import runner_kwargs

    import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
    from mmrepro.resume.checkpoint_io import safe_load
    kwargs = runner_kwargs(tmp_path, [dict(type='ReproducibilityHook'),
                                      dict(type='EMAHook', momentum=0.1)])
    kwargs['default_hooks']['checkpoint'] = dict(type='CheckpointHook', interval=2,
                                                 save_last=False)
    runner = Runner(**kwargs)
    runner.train()
    (record,) = glob.glob(osp.join(str(tmp_path), '*', 'run_record.json'))
    with open(record) as f:
        weights = json.load(f)['weights']
    final = weights['final']
    assert final['iter'] == 24 and final['covers'] == 'state_dict + ema_state_dict'
    assert list(weights['checkpoints']) == ['16']  # epoch 2 only
    assert weights['checkpoints']['16'] != final['sha256']
    runner.save_checkpoint(str(tmp_path), 'after.pth')
    saved = safe_load(str(tmp_path / 'after.pth'))
    assert weights_digest(saved) == saved['meta'][META_KEY] == final['sha256']
    log = open(glob.glob(osp.join(str(tmp_path), '*', '*.log'))[0]).read()
    assert (f"mmrepro: weights sha256 after iteration 24: {final['sha256']} (state_dict + "
            'ema_state_dict; compare with mmrepro-digest CHECKPOINT)') in log
