"""runner.checkpoints: a ReproRunner loads local checkpoints with mmrepro's allow-list (every
other load is MMEngine's) and saves them atomically, ``last_checkpoint`` included."""
from __future__ import annotations

import glob
import os.path as osp

import pytest
import torch
from mmengine.hooks import CheckpointHook
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader
from support.checkpoints import checkpoint_like
from support.toy_runner import Regressor, runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.patches import checkpoint_scheme
from mmrepro.resume import atomic_write
from mmrepro.resume.checkpoint_io import CheckpointLoadError
from mmrepro.run.scopes import SAFE_LOADING
from mmrepro.runner import checkpoints


class _Unlisted:
    """An object no allow-list names."""

    def __init__(self) -> None:
        self.value = 3


@pytest.fixture
def original_calls(monkeypatch):
    """The files MMEngine's own local loader is asked for (it still loads them)."""
    calls = []
    original = checkpoint_scheme._original_loader

    def spy(filename, map_location=None):
        calls.append(filename)
        return original(filename, map_location)

    monkeypatch.setattr(checkpoint_scheme, '_original_loader', spy)
    return calls


def _weights(path, **extra):
    """A checkpoint of a fresh toy model's weights (seeded), plus ``extra`` entries."""
    torch.manual_seed(11)
    state = Regressor().state_dict()
    torch.save(dict(state_dict=state, meta=dict(epoch=1), **extra), path)
    return state


def _runner(tmp_path, enabled: bool) -> Runner:
    hooks = [dict(type='ReproducibilityHook', trace_interval=0)] if enabled else []
    return Runner(**runner_kwargs(tmp_path / ('on' if enabled else 'off'), hooks))


def test_the_local_scheme_is_mmrepros_loader():
    assert CheckpointLoader._schemes[''] is checkpoint_scheme.load_from_local
    assert SAFE_LOADING.get() is False


def test_outside_a_runner_mmengines_loader_runs(tmp_path, original_calls):
    path = str(tmp_path / 'w.pth')
    state = _weights(path)
    loaded = CheckpointLoader.load_checkpoint(path, map_location='cpu')
    assert original_calls == [path]
    assert torch.equal(loaded['state_dict']['fc.weight'], state['fc.weight'])


def test_inside_an_enabled_runners_load_the_allow_list_loads(tmp_path, original_calls):
    path = str(tmp_path / 'full.pth')
    state = _weights(path, message_hub=checkpoint_like()['message_hub'])
    runner = _runner(tmp_path, enabled=True)
    loaded = runner.load_checkpoint(path)
    assert original_calls == []  # mmrepro's safe_load, with its allow-list
    assert loaded['message_hub']['log_scalars']['loss'].current() == 0.25
    assert torch.equal(runner.model.fc.weight.detach(), state['fc.weight'])
    assert SAFE_LOADING.get() is False  # only during the load


def test_the_allow_list_refuses_other_objects_and_resets(tmp_path, original_calls):
    path = str(tmp_path / 'odd.pth')
    _weights(path, extra=_Unlisted())
    runner = _runner(tmp_path, enabled=True)
    with pytest.raises(CheckpointLoadError, match=r'holds an object mmrepro does not load: '
                       r'.*_Unlisted'):
        runner.load_checkpoint(path)
    assert original_calls == [] and SAFE_LOADING.get() is False


def test_a_runner_without_mmrepro_loads_with_mmengines_loader(tmp_path, original_calls):
    path = str(tmp_path / 'w.pth')
    state = _weights(path)
    runner = _runner(tmp_path, enabled=False)
    runner.load_checkpoint(path)
    assert original_calls == [path]
    assert torch.equal(runner.model.fc.weight.detach(), state['fc.weight'])


def test_a_reprorunner_saves_through_the_atomic_backend_and_hook(tmp_path, monkeypatch):
    writes = []
    original = atomic_write.atomic_write

    def spy(path, write):
        writes.append(osp.basename(path))
        return original(path, write)

    monkeypatch.setattr(atomic_write, 'atomic_write', spy)
    monkeypatch.setattr(checkpoints, 'atomic_write', spy)
    runner = _runner(tmp_path, enabled=True)
    assert [type(h).__name__ for h in runner.hooks if isinstance(h, CheckpointHook)] == [
        'ReproCheckpointHook']
    runner.train()
    names = ['epoch_1.pth', 'last_checkpoint', 'epoch_2.pth', 'last_checkpoint',
             'epoch_3.pth', 'last_checkpoint']
    assert writes == names
    work_dir = tmp_path / 'on'
    assert (work_dir / 'last_checkpoint').read_text() == str(work_dir / 'epoch_3.pth')
    assert not glob.glob(str(work_dir / '.*.tmp'))


def test_a_plain_runner_saves_as_mmengine_does(tmp_path, monkeypatch):
    writes = []
    monkeypatch.setattr(atomic_write, 'atomic_write', lambda path, write: writes.append(path))
    runner = _runner(tmp_path, enabled=False)
    assert [type(h) for h in runner.hooks if isinstance(h, CheckpointHook)] == [CheckpointHook]
    runner.train()
    assert writes == [] and (tmp_path / 'off' / 'epoch_3.pth').is_file()


def test_the_hook_keeps_at_most_max_keep_ckpts_as_mmengine_does(tmp_path):
    kept = {}
    for name, kind in (('mmengine', 'CheckpointHook'), ('mmrepro', 'ReproCheckpointHook')):
        hooks = [dict(type=kind, by_epoch=False, interval=5, max_keep_ckpts=2,
                      save_last=False)]
        runner = Runner(**runner_kwargs(tmp_path / name, hooks, default_hooks=dict(
            checkpoint=None, logger=dict(type='LoggerHook', interval=100))))
        runner.train()
        kept[name] = (sorted(p.name for p in (tmp_path / name).glob('*.pth')),
                      runner.message_hub.get_info('keep_ckpt_ids'))
    assert kept['mmrepro'] == kept['mmengine']
    assert kept['mmrepro'] == (['iter_15.pth', 'iter_20.pth'], [15, 20])
