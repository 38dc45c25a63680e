"""patches.checkpoint_loader: mmrepro's allow-list loads a local checkpoint only inside the
load of a Runner that enables mmrepro; every other load is MMEngine's."""
from __future__ import annotations

import pytest
import torch
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader
from support.checkpoints import checkpoint_like
from support.toy_runner import Regressor, runner_kwargs

import mmrepro  # noqa: F401  (installs the patches, as custom_imports would)
from mmrepro.patches import checkpoint_loader
from mmrepro.resume.checkpoint_io import CheckpointLoadError


class _Unlisted:
    """An object no allow-list names."""

    def __init__(self) -> None:
        self.value = 3


@pytest.fixture
def original_calls(monkeypatch):
    """The files MMEngine's own local loader is asked for (it still loads them)."""
    calls = []
    original = checkpoint_loader._original_loader

    def spy(filename, map_location=None):
        calls.append(filename)
        return original(filename, map_location)

    monkeypatch.setattr(checkpoint_loader, '_original_loader', spy)
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
    assert CheckpointLoader._schemes[''] is checkpoint_loader.load_from_local
    assert checkpoint_loader.SAFE_LOADING.get() is False


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
    assert checkpoint_loader.SAFE_LOADING.get() is False  # only during the load


def test_the_allow_list_refuses_other_objects_and_resets(tmp_path, original_calls):
    path = str(tmp_path / 'odd.pth')
    _weights(path, extra=_Unlisted())
    runner = _runner(tmp_path, enabled=True)
    with pytest.raises(CheckpointLoadError, match=r'holds an object mmrepro does not load: '
                       r'.*_Unlisted'):
        runner.load_checkpoint(path)
    assert original_calls == [] and checkpoint_loader.SAFE_LOADING.get() is False


def test_a_runner_without_mmrepro_loads_with_mmengines_loader(tmp_path, original_calls):
    path = str(tmp_path / 'w.pth')
    state = _weights(path)
    runner = _runner(tmp_path, enabled=False)
    runner.load_checkpoint(path)
    assert original_calls == [path]
    assert torch.equal(runner.model.fc.weight.detach(), state['fc.weight'])


def test_with_safe_loading_sets_the_flag_for_enabled_runners_only(tmp_path):
    seen = []

    @checkpoint_loader.with_safe_loading
    def load(runner):
        seen.append(checkpoint_loader.SAFE_LOADING.get())
        return 'loaded'

    assert load(_runner(tmp_path, enabled=True)) == 'loaded'
    assert load(_runner(tmp_path, enabled=False)) == 'loaded'
    assert seen == [True, False]
    assert load.__name__ == 'load'  # functools.wraps
