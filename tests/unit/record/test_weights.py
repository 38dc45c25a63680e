"""mmrepro.record.weights: a digest of the weights alone, and the ledger of a run."""
import hashlib

import pytest
import torch

from mmrepro.record.weights import (
    META_KEY,
    WeightsError,
    WeightsLedger,
    section_names,
    weights_digest,
)


def _state():
    return {'conv.weight': torch.arange(6, dtype=torch.float32).reshape(2, 3),
            'bn.num_batches_tracked': torch.tensor(7), 'half': torch.ones(2, dtype=torch.bfloat16),
            'empty': torch.zeros(0)}


def test_digest_ignores_metadata_and_order_but_not_any_byte():
    state = _state()
    reordered = dict(reversed(list(state.items())))
    digest = weights_digest({'state_dict': state, 'meta': {'time': 1}})
    assert weights_digest({'state_dict': reordered, 'meta': {'time': 2}, 'optimizer': {}}) \
        == digest
    assert weights_digest(state) == digest  # a bare state dict: the same weights
    nudged = dict(state, **{'conv.weight': state['conv.weight'].clone()})
    nudged['conv.weight'][1, 2] = torch.nextafter(torch.tensor(5.0), torch.tensor(6.0))
    assert weights_digest(nudged) != digest
    assert weights_digest(dict(state, half=torch.ones(2, dtype=torch.float16))) != digest
    assert weights_digest(dict(state, empty=torch.zeros(0, 1))) != digest  # shape counts
    assert len(digest) == 64 and int(digest, 16) >= 0


def test_ema_state_is_part_of_the_digest():
    state = _state()
    plain = {'state_dict': state}
    with_ema = {'state_dict': state, 'ema_state_dict': {'module.conv.weight': torch.ones(1)}}
    assert weights_digest(with_ema) != weights_digest(plain)
    assert section_names(with_ema) == 'state_dict + ema_state_dict'
    assert section_names(plain) == 'state_dict' and section_names(state) == 'state dict'


@pytest.mark.parametrize('obj, match', [
    ([1, 2], 'holds a list, not a checkpoint or a state dict'),
    ({'meta': {}, 'epoch': 3}, r'has no state_dict \(keys: meta, epoch\)'),
    ({}, r'has no state_dict \(keys: none\)'),
])
def test_what_holds_no_weights_is_refused(obj, match):
    with pytest.raises(WeightsError, match=match):
        weights_digest(obj)


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
