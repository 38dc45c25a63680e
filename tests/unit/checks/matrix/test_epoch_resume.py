"""mmrepro.checks.matrix.epoch_resume: the child configs (switch hooks moved into the schedule),
and the checkpoint digests compared."""
from __future__ import annotations

import pytest
import torch
from mmengine.config import Config

from mmrepro.checks.matrix import run as sm
from mmrepro.checks.matrix.epoch_resume import checkpoint_digests, child_config


def _config(family, data_root, monkeypatch):
    monkeypatch.setenv(sm.DATA_ENV, data_root + '/')
    return Config.fromfile(sm.config_path(family))


@pytest.mark.parametrize('family, hook, value', [
    ('rtmdet', 'PipelineSwitchHook', ('switch_epoch', 2)),
    ('yolox', 'YOLOXModeSwitchHook', ('num_last_epochs', 2)),
])
def test_switch_hooks_move_into_the_schedule(family, hook, value, data_root, monkeypatch):
    cfg = _config(family, data_root, monkeypatch)
    text, switches, by_epoch = child_config(cfg, sm.config_path(family), 4, 8)
    assert switches == [f'{hook} at epoch 2'] and by_epoch
    child = Config.fromstring(text.split('\n', 3)[3], '.py')  # without _base_
    moved = [h for h in child.custom_hooks if h['type'] == hook]
    assert moved[0][value[0]] == value[1]
    assert child.train_cfg == dict(max_epochs=4)
    assert child.default_hooks.checkpoint.interval == 1


def test_an_iteration_based_config_is_cut_into_segments(data_root, monkeypatch):
    cfg = _config('mask2former', data_root, monkeypatch)
    text, switches, by_epoch = child_config(cfg, sm.config_path('mask2former'), 3, 8)
    assert not by_epoch and switches == []
    assert 'train_cfg = {\'max_iters\': 24, \'val_interval\': 1000000000}' in text
    assert 'by_epoch=False, interval=8' in text


def test_checkpoint_digests_see_every_byte(tmp_path):
    state = {'w': torch.zeros(3)}
    optim = {'state': {0: {'exp_avg': torch.zeros(3)}}, 'param_groups': [{'lr': 0.1}]}
    torch.save({'state_dict': state, 'optimizer': optim}, tmp_path / 'a.pth')
    optim['param_groups'][0]['lr'] = 0.2
    torch.save({'state_dict': state, 'optimizer': optim}, tmp_path / 'b.pth')
    a, b = (checkpoint_digests(str(tmp_path / n)) for n in ('a.pth', 'b.pth'))
    assert list(a) == ['weights', 'optimizer']  # no EMA in these
    assert a['weights'] == b['weights'] and a['optimizer'] != b['optimizer']
