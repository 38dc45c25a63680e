"""mmrepro-check's launch, config and work-dir arguments: each bad one is a single error:
line, exit 2, before anything is written."""
from __future__ import annotations

import os

import pytest
from support.cli import run_main
from support.repro_utils import write_config

from mmrepro.cli.check_repro import main, parse_args, processes


@pytest.mark.parametrize('argv, message', [
    (['{cfg}', '--nproc', '4'],
     '--nproc 4 needs --launcher pytorch: without a launcher every run is one process; pass '
     '--launcher pytorch --nproc 4, or leave out --nproc'),
    (['{cfg}', '--launcher', 'none', '--nproc', '2'],
     '--nproc 2 needs --launcher pytorch: without a launcher every run is one process; pass '
     '--launcher pytorch --nproc 2, or leave out --nproc'),
    (['{cfg}', '--launcher', 'pytorch', '--nproc', '0'], '--nproc must be >= 1, got 0'),
    (['--iters', '2'],
     'CONFIG is missing: give the train config to check (mmrepro-check CONFIG), or a baseline '
     'to check against (mmrepro-check --against BASELINE trains its own config)'),
    (['--against', '{tmp}', '--keep-checkpoints'],
     '--keep-checkpoints keeps the checkpoints of a check on its own; with --against the '
     'check writes none: leave it out'),
    (['{cfg}', '--work-dir', '{foreign}'],
     "--work-dir '{foreign}' holds files no check wrote (e.g. 'epoch_1.pth') and a check "
     'replaces its work dir; name a new or empty directory'),
])
def test_bad_launch_config_or_work_dir_is_one_error_line(argv, message, tmp_path, capsys,
                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(str(tmp_path / 'cfg' / 'c.py'), 'retinanet', str(tmp_path / 'data'))
    foreign = tmp_path / 'mine'
    foreign.mkdir()
    (foreign / 'epoch_1.pth').write_bytes(b'weights')
    names = dict(cfg=cfg, tmp=str(tmp_path), foreign=str(foreign))
    before = sorted(os.listdir(tmp_path))
    code, out, err = run_main(main, capsys, *[a.format(**names) for a in argv])
    assert (code, out) == (2, '')
    assert err == f'mmrepro-check: error: {message.format(**names)}\n'
    assert sorted(os.listdir(tmp_path)) == before  # no work_dirs/, nothing written
    assert os.listdir(foreign) == ['epoch_1.pth']


def test_processes_are_two_by_default_with_the_launcher_and_none_without():
    assert processes(parse_args(['c.py'])) == 0
    assert processes(parse_args(['c.py', '--launcher', 'pytorch'])) == 2
    assert processes(parse_args(['c.py', '--launcher', 'pytorch', '--nproc', '4'])) == 4
    assert parse_args(['--against', 'b.tar.gz']).config is None
