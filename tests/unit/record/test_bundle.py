"""mmrepro.record.bundle and mmrepro-bundle: one file to share instead of a work dir."""
from __future__ import annotations

import glob
import io
import json
import os
import shutil
import tarfile

import pytest
import torch
from mmengine.runner import Runner
from support.checkpoints import flip_bit
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.cli.bundle import main as bundle_main
from mmrepro.cli.repro_diff import main as diff_main
from mmrepro.record.bundle import BundleError, unpack
from mmrepro.resume.checkpoint_io import safe_load

HOOKS = [dict(type='ReproducibilityHook', trace_interval=8)]


@pytest.fixture(scope='module')
def toy_runs(tmp_path_factory):
    """Two bit-identical toy runs (3 epochs of 8 iterations, a checkpoint each epoch)."""
    root = tmp_path_factory.mktemp('bundle')
    for name in ('a', 'b'):
        torch.manual_seed(0)  # the model is built before the Runner seeds
        Runner(**runner_kwargs(root / name, HOOKS)).train()
    return root


def _members(path):
    with tarfile.open(path, 'r:gz') as tar:
        return sorted(m.name for m in tar.getmembers())


def test_bundle_holds_records_traces_logs_and_digests_not_weights(toy_runs, tmp_path, capsys):
    out = str(tmp_path / 'a.tar.gz')
    assert bundle_main([str(toy_runs / 'a'), out]) == 0
    assert capsys.readouterr().out.startswith(f'bundle: {out} (')
    names = _members(out)
    assert not [n for n in names if n.endswith('.pth')]
    assert [n.split('/', 1)[1] for n in names if '/' in n] == [
        'run_record.json', 'trace.jsonl', 'vis_data/config.py', 'vis_data/scalars.json']
    manifest = unpack(out, str(tmp_path / 'x'))
    assert manifest['weights'] is False and sorted(manifest['checkpoints']) == [
        'epoch_1.pth', 'epoch_2.pth', 'epoch_3.pth']
    last = safe_load(str(toy_runs / 'a' / 'epoch_3.pth'))
    assert manifest['checkpoints']['epoch_3.pth'] == dict(
        iter=24, sha256=last['meta']['weights_sha256'], covers='state_dict')
    with_weights = str(tmp_path / 'w.tar.gz')
    assert bundle_main([str(toy_runs / 'a'), with_weights, '--weights']) == 0
    assert [n for n in _members(with_weights) if n.endswith('.pth')] == ['epoch_3.pth']


@pytest.mark.parametrize('name, pick, weights, part', [
    ('epoch_1.pth', lambda c: c['state_dict']['fc.weight'], False, 'weights'),
    ('epoch_3.pth', lambda c: next(iter(c['optimizer']['state'].values()))['momentum_buffer'],
     True, 'optimizer state'),  # the packed checkpoint: every part
])
def test_a_checkpoint_changed_since_it_was_saved_is_not_bundled(toy_runs, tmp_path, capsys,
                                                                 name, pick, weights, part):
    work_dir = tmp_path / 'a'
    shutil.copytree(toy_runs / 'a', work_dir)
    path = str(work_dir / name)
    flip_bit(path, pick(safe_load(path)))
    out = str(tmp_path / 'a.tar.gz')
    assert bundle_main([str(work_dir), out, *(['--weights'] if weights else [])]) == 2
    assert capsys.readouterr().err.startswith(
        f'mmrepro-bundle: error: cannot bundle {path}: it does not hold what was saved in '
        f'it: {part}: expected sha256 ')
    assert not os.path.exists(out) and not glob.glob(out + '*')


def test_diff_compares_a_bundle_like_its_work_dir(toy_runs, tmp_path, capsys):
    a, b = str(tmp_path / 'a.tar.gz'), str(tmp_path / 'b.tar.gz')
    assert bundle_main([str(toy_runs / 'a'), a]) == 0
    assert bundle_main([str(toy_runs / 'b'), b]) == 0
    capsys.readouterr()
    for other in (b, str(toy_runs / 'b')):
        assert diff_main([a, other]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f'A: {a} (bundle: ')
        assert 'compared: 24 logged iterations' not in out  # logged every 100 iterations
        assert 'final weights and 2 earlier checkpoints' in out
        assert 'bit-identical, as expected' in out


def test_an_existing_bundle_is_never_overwritten(toy_runs, tmp_path, capsys):
    out = tmp_path / 'a.tar.gz'
    out.write_bytes(b'mine')
    assert bundle_main([str(toy_runs / 'a'), str(out)]) == 2
    assert capsys.readouterr().err == (f'mmrepro-bundle: error: {out} exists; nothing was '
                                       'written (remove it or choose another name)\n')
    assert out.read_bytes() == b'mine'
    assert bundle_main([str(tmp_path), str(tmp_path / 'b.tar.gz')]) == 2
    assert capsys.readouterr().err == (
        f'mmrepro-bundle: error: {tmp_path}: no run_record.json in it or in a log dir under '
        'it; give the work dir of a run trained with mmrepro\n')
    assert not os.path.exists(tmp_path / 'b.tar.gz')


def test_a_bundle_into_a_missing_directory_is_refused_before_reading(toy_runs, tmp_path,
                                                                      capsys):
    out = tmp_path / 'nodir' / 'b.tar.gz'
    assert bundle_main([str(toy_runs / 'a'), str(out)]) == 2
    assert capsys.readouterr().err == (
        f'mmrepro-bundle: error: {out}: its directory {out.parent} does not exist; nothing '
        'was written (make it first, or choose another path)\n')
    assert not (tmp_path / 'nodir').exists()


def test_a_log_dir_bundles_as_diff_reads_it(toy_runs, tmp_path, capsys):
    log_dir = os.path.dirname(glob.glob(str(toy_runs / 'a' / '*' / 'run_record.json'))[0])
    out = str(tmp_path / 'log.tar.gz')
    assert bundle_main([log_dir, out]) == 0
    assert capsys.readouterr().out.startswith(
        f'bundle: {out} (')  # the summary line; its counts are pinned below
    stamp = os.path.basename(log_dir)
    dumps = [n for n in os.listdir(toy_runs / 'a') if n.endswith('.py')]  # the config dump
    assert len(dumps) == 1
    assert _members(out) == sorted([*dumps, 'bundle.json', f'{stamp}/run_record.json',
                                    f'{stamp}/trace.jsonl', f'{stamp}/vis_data/config.py',
                                    f'{stamp}/vis_data/scalars.json'])
    manifest = unpack(out, str(tmp_path / 'x'))
    assert manifest['work_dir'] == 'a' and len(manifest['checkpoints']) == 3
    assert diff_main([out, str(toy_runs / 'a')]) == 0
    assert 'bit-identical, as expected' in capsys.readouterr().out


def test_the_summary_counts_in_the_singular_and_plural(toy_runs, tmp_path, capsys):
    one = tmp_path / 'one'
    shutil.copytree(toy_runs / 'a', one)
    for name in ('epoch_1.pth', 'epoch_2.pth'):
        (one / name).unlink()
    out = str(tmp_path / 'one.tar.gz')
    assert bundle_main([str(one), out]) == 0
    size = os.path.getsize(out) / 1024
    assert capsys.readouterr().out == (f'bundle: {out} ({size:.0f} KiB, 5 files, 1 checkpoint '
                                       'digest, without the weights)\n')


def test_a_member_outside_the_bundle_is_refused(tmp_path):
    evil = str(tmp_path / 'evil.tar.gz')
    with tarfile.open(evil, 'w:gz') as tar:
        data = json.dumps(dict(format='mmrepro-bundle')).encode()
        info = tarfile.TarInfo('../escaped.json')
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BundleError, match=r"member '../escaped.json' is not a plain file "
                       'inside the bundle; refused'):
        unpack(evil, str(tmp_path / 'into'))
    assert not (tmp_path / 'escaped.json').exists()


def test_validations_travel_in_the_bundle(tmp_path, capsys):
    from support.toy_runner import MeanOutput
    kwargs = runner_kwargs(tmp_path / 'run', HOOKS)
    kwargs.update(val_dataloader=dict(kwargs['train_dataloader'],
                                      sampler=dict(type='DefaultSampler', shuffle=False)),
                  val_evaluator=[MeanOutput()], val_cfg=dict())
    torch.manual_seed(0)
    Runner(**kwargs).train()
    out = str(tmp_path / 'run.tar.gz')
    assert bundle_main([str(tmp_path / 'run'), out]) == 0
    assert [n for n in _members(out) if n.endswith('predictions.jsonl')]
    with tarfile.open(out, 'r:gz') as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith('run_record.json'))
        record = json.load(tar.extractfile(member))
    assert [(e['kind'], e['iter']) for e in record['evaluation']] == [
        ('val', 8), ('val', 16), ('val', 24)]
    capsys.readouterr()
    assert diff_main([out, str(tmp_path / 'run')]) == 0
    assert ('evaluations: predictions and metrics equal at every evaluation in common (3: '
            'validation after iteration 8, validation after iteration 16, validation after '
            'iteration 24)') in capsys.readouterr().out
