"""What a run starts from, named before training: pretrained files, the code, decoding.

A team's baseline: the RetinaNet test detector whose backbone starts from a local
Pretrained file, with a config that imports a module from outside the work tree. The
teammate has the same config and data, but at the same path another pretrained file, an
edited line in that module, an edited line in the installed MMDetection, and an image
decoder that returns other pixels for the same files (a stand-in for another OpenCV).
"""
import os
import os.path as osp
import shutil

import mmcv
import pytest
import torch
from mmdet.models.backbones import ResNet
from support.cli import run_main
from support.repro_utils import pythonpath, run_train, write_config

from mmrepro.cli.check_repro import main as check_main
from mmrepro.cli.repro_diff import main as diff_main
from mmrepro.record.run_record import load_run_record

pytestmark = pytest.mark.slow

PLUGIN = 'team_plugin'
PLUGIN_TEXT = 'SCALE = 1.0\n'


def _backbone_file(path: str, seed: int) -> None:
    """A pretrained ResNet-18 (the test width), made here from ``seed``."""
    torch.manual_seed(seed)
    torch.save(ResNet(depth=18, base_channels=16).state_dict(), path)


@pytest.fixture(scope='module')
def team(tmp_path_factory, data_root):
    root = tmp_path_factory.mktemp('team')
    ext = root / 'ext'  # outside the work tree
    ext.mkdir()
    (ext / f'{PLUGIN}.py').write_text(PLUGIN_TEXT)
    pretrained = str(root / 'r18.pth')
    _backbone_file(pretrained, 0)
    _backbone_file(str(root / 'other_r18.pth'), 1)
    extra = (f"model = dict(backbone=dict(init_cfg=dict(_delete_=True, type='Pretrained', "
             f"checkpoint={pretrained!r})))\n"
             f"custom_imports = dict(imports=['mmrepro', {PLUGIN!r}], "
             'allow_failed_imports=False)\n')
    config = write_config(str(root / 'cfg' / 'retinanet.py'), 'retinanet', data_root, extra,
                          num_workers=0, max_epochs=1)
    baseline = str(root / 'baseline')
    run_train(config, baseline, env=dict(PYTHONPATH=pythonpath(str(ext))))
    with open(pretrained, 'rb') as f:
        original = f.read()
    return dict(root=root, ext=str(ext), pretrained=pretrained, original=original,
                config=config, baseline=baseline)


def _teammate_file(team) -> str:
    """Put the teammate's pretrained file at the baseline's path; return both sha256s."""
    shutil.copyfile(str(team['root'] / 'other_r18.pth'), team['pretrained'])
    record, _ = load_run_record(team['baseline'])
    return record['initial']['files']['model.backbone.init_cfg']['sha256']


def _edited_mmdet(root) -> str:
    """A copy of the installed MMDetection with one edited line; return its parent."""
    import mmdet
    parent = root / 'edited_site'
    if not parent.exists():
        shutil.copytree(osp.dirname(mmdet.__file__), str(parent / 'mmdet'),
                        ignore=shutil.ignore_patterns('__pycache__'))
        with open(parent / 'mmdet' / 'models' / 'necks' / 'fpn.py', 'a') as f:
            f.write('# a local edit\n')
    return str(parent)


def _stand_in_decoder(decode):
    def other_pixels(*args, **kwargs):
        img = decode(*args, **kwargs)
        img = img.copy()
        img[0, 0, 0] ^= 1
        return img
    return other_pixels


def test_each_difference_is_named_before_training(team, tmp_path, capsys, monkeypatch):
    sha_a = _teammate_file(team)
    plugin = osp.join(team['ext'], f'{PLUGIN}.py')
    with open(plugin, 'w') as f:
        f.write('SCALE = 1.001\n')
    monkeypatch.syspath_prepend(team['ext'])
    monkeypatch.setenv('PYTHONPATH', pythonpath(_edited_mmdet(tmp_path)))  # the probe's
    monkeypatch.setattr(mmcv, 'imfrombytes', _stand_in_decoder(mmcv.imfrombytes))
    try:
        code, out, _ = run_main(check_main, capsys, team['config'], '--against',
                                team['baseline'], '--work-dir', str(tmp_path / 'check'))
    finally:
        with open(plugin, 'w') as f:
            f.write(PLUGIN_TEXT)
    sha_b = _sha256(team['pretrained'])
    assert code == 1, out
    pretrained = team['pretrained']
    assert (f'  initial weights: model.backbone.init_cfg {pretrained}, sha256 {sha_a[:12]} '
            f'vs {sha_b[:12]}') in out.splitlines(), out
    lines = out.splitlines()
    assert lines[2] == 'before training: 4 difference(s) from the baseline, most decisive first:'
    assert lines[5].startswith('  data: the decoded images (decode canary): '
                               'decoding.canary.sha256: '), out
    assert lines[6] == ("    fix: the first training images decode to other pixels than in the "
                        "baseline's run: decode with the baseline's OpenCV and Pillow "
                        '(decoding.versions in its run record), or check that the image files '
                        'are the same')
    assert lines[7].startswith('  code: the code: code.packages.mmdet.files.models/necks/fpn.py: ')
    assert lines[8] == ("    fix: run the sources the baseline ran: mmdet: models/necks/fpn.py "
                        'differs (reinstall the package or revert the edit; the run record holds '
                        "each file's digest)")
    assert lines[9].startswith(f'  code: the code: code.imports.{PLUGIN}.files.{PLUGIN}.py: ')
    assert lines.index(
        f'verdict: initial weights differ (before training): model.backbone.init_cfg '
        f'{pretrained}, sha256 {sha_a[:12]} vs {sha_b[:12]}; pass --go-on to train and '
        'compare anyway') == 11
    assert not osp.exists(tmp_path / 'check'), 'nothing is trained or written'


def test_a_run_from_another_file_is_never_called_numerics(team, tmp_path, capsys,
                                                          monkeypatch):
    """Trained anyway, and compared afterwards: the verdict is the initial weights."""
    sha_a = _teammate_file(team)
    sha_b = _sha256(team['pretrained'])
    monkeypatch.syspath_prepend(team['ext'])
    monkeypatch.setenv('PYTHONPATH', pythonpath(team['ext']))
    work = str(tmp_path / 'check')
    code, out, _ = run_main(check_main, capsys, team['config'], '--against', team['baseline'],
                            '--go-on', '--iters', '1', '--work-dir', work)
    files = (f"model.backbone.init_cfg {team['pretrained']}, sha256 {sha_a[:12]} vs "
             f'{sha_b[:12]}')
    assert code == 1, out
    assert (f'verdict: initial weights differ (before the first step): {files}; so every '
            'step after differs (not a nondeterministic operation)') in out, out
    assert 'numerics differ' not in out
    code, out, err = run_main(diff_main, capsys, team['baseline'], osp.join(work, 'against'))
    assert code == 1, out + err
    lines = out.splitlines()
    verdict = lines.index(f'verdict: initial weights differ (before the first step): {files}')
    assert lines[verdict + 1] == ('  why: the runs start from other weights, so every step '
                                  'after differs (not a nondeterministic operation)')
    assert 'bitwise equality expected: yes' not in out
    record, _ = load_run_record(osp.join(work, 'against'))
    base, _ = load_run_record(team['baseline'])
    assert record['initial']['model_sha256'] != base['initial']['model_sha256']
    assert len(base['initial']['model_sha256']) == 64


def _sha256(path: str) -> str:
    import hashlib
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(autouse=True)
def _restore_pretrained(team):
    yield
    with open(team['pretrained'], 'wb') as f:
        f.write(team['original'])
    os.utime(team['pretrained'])
