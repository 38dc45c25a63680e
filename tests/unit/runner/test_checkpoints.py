"""runner.checkpoints: a ReproRunner verifies a local checkpoint against its digests and
loads it with mmrepro's allow-list (every other load is MMEngine's), and saves checkpoints
atomically, ``last_checkpoint`` included; a save the disk refuses is one line."""
from __future__ import annotations

import builtins
import glob
import json
import os.path as osp
import re
import shutil

import pytest
import support.disk_full  # noqa: F401  (registers DiskFullHook)
import torch
from mmengine.hooks import CheckpointHook
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader
from support.checkpoints import checkpoint_like, flip_bit
from support.repro_utils import state_digest
from support.toy_runner import Regressor, runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.patches import checkpoint_scheme
from mmrepro.resume import atomic_write
from mmrepro.resume.checkpoint_io import CheckpointLoadError, safe_load
from mmrepro.resume.verification import IntegrityError
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

    def spy(path, write, **kwargs):
        writes.append(osp.basename(path))
        return original(path, write, **kwargs)

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
    monkeypatch.setattr(atomic_write, 'atomic_write',
                        lambda path, write, **kw: writes.append(path))
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


HOOK = [dict(type='ReproducibilityHook', trace_interval=0)]


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A toy run's work dir: checkpoints after epochs 1, 2 and 3."""
    work_dir = tmp_path_factory.mktemp('trained')
    torch.manual_seed(11)  # the toy model's initial weights
    Runner(**runner_kwargs(work_dir, HOOK)).train()
    return work_dir


def _flipped(trained, tmp_path, pick) -> str:
    """A copy of epoch 1's checkpoint with one bit flipped in the tensor ``pick`` names."""
    path = str(tmp_path / 'flipped.pth')
    shutil.copy(trained / 'epoch_1.pth', path)
    flip_bit(path, pick(safe_load(path)))
    return path


def test_a_resume_that_differs_from_its_digests_is_refused_before_anything_is_written(
        trained, tmp_path):
    path = _flipped(trained, tmp_path, lambda c: c['mmrepro']['rng'][0]['torch'])
    refused = tmp_path / 'refused'
    with pytest.raises(IntegrityError, match=rf"^Checkpoint {path!r} does not hold what was "
                       r'saved in it: mmrepro section \(RNG states, data position\): expected '
                       r"sha256 \w{64}, found \w{64}, the first entry that differs is "
                       r"mmrepro\['rng'\]\[0\]\['torch'\]\. "):
        Runner(**runner_kwargs(refused, HOOK, resume=True, load_from=path))
    assert list(refused.iterdir()) == []  # MMEngine made the work dir: nothing in it
    anyway = tmp_path / 'anyway'
    Runner(**runner_kwargs(anyway, HOOK, resume=True, load_from=path, randomness=dict(
        seed=3, deterministic=True, verify_checkpoints=False))).train()
    with open(glob.glob(str(anyway / '*' / 'run_record.json'))[0]) as f:
        entry = json.load(f)['checkpoint_verification']
    assert entry.pop('problem').startswith('mmrepro section (RNG states, data position): ')
    assert entry == dict(file=path, verified=False, loaded_anyway=(
        'randomness.verify_checkpoints=False'), parts=dict(
        weights='matches', optimizer='matches', mmrepro='differs', meta='matches'))
    log = open(glob.glob(str(anyway / '*' / '*.log'))[0]).read()
    assert log.count(f'mmrepro: loading {path} although it does not hold what was saved in '
                     'it (mmrepro section (RNG states, data position): expected sha256 ') == 1


def test_load_from_checks_the_weights_before_they_are_loaded(trained, tmp_path):
    path = _flipped(trained, tmp_path, lambda c: c['state_dict']['fc.weight'])
    runner = Runner(**runner_kwargs(tmp_path / 'loaded', HOOK, load_from=path))
    before = runner.model.fc.weight.detach().clone()
    with pytest.raises(IntegrityError, match=r"weights: expected sha256 \w{64}, found \w{64}, "
                       r"the first tensor that differs is state_dict\['fc\.weight'\]\. "):
        runner.train()
    assert torch.equal(runner.model.fc.weight.detach(), before)
    intact = str(trained / 'epoch_2.pth')
    runner = Runner(**runner_kwargs(tmp_path / 'intact', HOOK, load_from=intact))
    runner.load_checkpoint(intact)
    log = open(glob.glob(str(tmp_path / 'intact' / '*' / '*.log'))[0]).read()
    assert f'mmrepro: verified {intact}: weights match the digests saved with it (' in log


def test_a_full_disk_during_a_save_is_one_line_and_the_run_resumes_exactly(trained, tmp_path,
                                                                          monkeypatch):
    """With ``max_keep_ckpts=1`` too, the checkpoint to resume from is kept until the next
    one is complete."""
    monkeypatch.setattr(builtins, 'open', builtins.open)  # whatever the hook leaves
    work_dir = tmp_path / 'full'
    torch.manual_seed(11)  # the initial weights of the run the fixture trained
    kwargs = runner_kwargs(work_dir, [*HOOK, dict(type='DiskFullHook', name='epoch_2.pth',
                                                  after_bytes=100)])
    kwargs['default_hooks']['checkpoint'].update(max_keep_ckpts=1)
    with pytest.raises(atomic_write.SaveError) as info:
        Runner(**kwargs).train()
    last = str(work_dir / 'epoch_1.pth')
    assert re.fullmatch(
        rf'cannot write {work_dir / "epoch_2.pth"}: no space left on the device \(it needs '
        rf'[\d.]+ KiB, [\d.]+ [KMG]iB free in {work_dir}\); nothing was replaced and no partial '
        f'file is left; the last complete checkpoint is {re.escape(last)}: free space, then '
        f'continue with --resume {re.escape(last)}', str(info.value)), str(info.value)
    assert sorted(p.name for p in work_dir.glob('*.pth')) == ['epoch_1.pth']
    assert not list(work_dir.glob('.*.tmp'))
    assert (work_dir / 'last_checkpoint').read_text() == last
    kwargs = runner_kwargs(work_dir, HOOK, resume=True, load_from=last)
    kwargs['default_hooks']['checkpoint'].update(max_keep_ckpts=1)
    Runner(**kwargs).train()
    assert sorted(p.name for p in work_dir.glob('*.pth')) == ['epoch_3.pth']
    assert state_digest(str(work_dir / 'epoch_3.pth')) == \
        state_digest(str(trained / 'epoch_3.pth'))
