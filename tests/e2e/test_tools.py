"""The scripts in ``tools/``: every ``--help`` documents each flag and the exit codes."""
import glob
import json
import os.path as osp
import re
import runpy
import sys

import pytest
from support.repro_utils import REPO, env_home

TOOLS = sorted(glob.glob(osp.join(REPO, 'tools', '*.py')))


def _run_tool(path, argv, monkeypatch):
    monkeypatch.setattr(sys, 'argv', [path, *argv])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(path, run_name='__main__')
    return exit_info.value.code


def _undocumented(help_text: str) -> list:
    """Option lines of an argparse help text that carry no help."""
    lines = help_text.splitlines()
    bare = []
    for i, line in enumerate(lines):
        match = re.match(r'^  (-\S.*?)(\s{2,}\S.*)?$', line)
        if match and not match.group(2):
            follows = lines[i + 1] if i + 1 < len(lines) else ''
            if not re.match(r'^ {3,}\S', follows):
                bare.append(match.group(1))
    return bare


def test_every_python_tool_is_checked():
    names = [osp.basename(path) for path in TOOLS]
    assert names == ['bundle.py', 'check_repro.py', 'make_demo_data.py', 'repro_diff.py',
                     'support_matrix.py', 'test.py', 'train.py', 'weights_digest.py']


@pytest.mark.parametrize('path', TOOLS, ids=osp.basename)
def test_help_documents_every_flag_and_the_exit_codes(path, monkeypatch, capsys):
    assert _run_tool(path, ['--help'], monkeypatch) in (0, None)
    out = capsys.readouterr().out
    words = ' '.join(out.split())  # argparse wraps at the terminal's width
    assert re.search(r'exit status: 0 \S', words), out[-500:]
    assert ' 2 bad arguments' in words
    assert _undocumented(out) == []
    assert '``' not in out  # plain text, not reStructuredText


def test_an_undocumented_flag_is_caught():
    text = 'options:\n  -h, --help  show this help\n  --num-train NUM_TRAIN\n  --seed SEED  seed\n'
    assert _undocumented(text) == ['--num-train NUM_TRAIN']


def test_demo_data_refuses_a_directory_holding_other_annotations(tmp_path, monkeypatch,
                                                                  capsys):
    ann = tmp_path / 'coco' / 'annotations' / 'train.json'
    ann.parent.mkdir(parents=True)
    ann.write_text(json.dumps(dict(images=[], annotations=[], categories=[])))
    path = osp.join(REPO, 'tools', 'make_demo_data.py')
    assert _run_tool(path, [str(tmp_path / 'coco')], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err == (f'mmrepro-demo-data: error: {tmp_path / "coco"} already holds COCO '
                   'annotations that make_tiny_coco did not write; give an empty or new '
                   'directory (nothing was changed)\n')
    assert json.loads(ann.read_text()) == dict(images=[], annotations=[], categories=[])
    assert not (tmp_path / 'coco' / 'images').exists()


def test_demo_data_counts_must_be_positive(tmp_path, monkeypatch, capsys):
    path = osp.join(REPO, 'tools', 'make_demo_data.py')
    assert _run_tool(path, [str(tmp_path / 'd'), '--num-train', '0'], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == ('mmrepro-demo-data: error: argument --num-train: '
                                    'must be >= 1, got 0')
    assert not (tmp_path / 'd').exists()


def test_demo_data_is_written_once_and_kept(tmp_path, monkeypatch, capsys):
    path = osp.join(REPO, 'tools', 'make_demo_data.py')
    argv = [str(tmp_path / 'd'), '--num-train', '2', '--num-val', '1']
    assert _run_tool(path, argv, monkeypatch) == 0
    ann = tmp_path / 'd' / 'annotations' / 'train.json'
    written = ann.stat().st_mtime_ns
    assert _run_tool(path, argv, monkeypatch) == 0
    assert ann.stat().st_mtime_ns == written
    assert capsys.readouterr().out == f'demo data ready: {tmp_path / "d"}\n' * 2
    assert len(json.loads(ann.read_text())['images']) == 2


def _console_scripts() -> list:
    """README's console scripts: the names setup.cfg's entry points give them."""
    import configparser
    parser = configparser.ConfigParser()
    parser.read(osp.join(REPO, 'setup.cfg'))
    lines = parser['options.entry_points']['console_scripts'].strip().splitlines()
    return [line.split('=')[0].strip() for line in lines]


def test_the_environments_setup_env_makes_have_the_console_scripts(tmp_path):
    import subprocess
    envs = osp.realpath(osp.join(env_home(), 'envs'))
    if not osp.realpath(sys.prefix).startswith(envs + osp.sep):
        pytest.skip(f'this Python ({sys.prefix}) is not an environment tools/setup_env.sh '
                    f'made (those are in {envs})')
    assert len(_console_scripts()) == 8
    for name in _console_scripts():  # all written alike: README's first one is run
        with open(osp.join(sys.prefix, 'bin', name)) as f:
            assert f.read().splitlines()[1] == \
                f'# {name} for the mmrepro checkout {REPO} (written by its tools/setup_env.sh).'
    proc = subprocess.run([osp.join(sys.prefix, 'bin', 'mmrepro-train'), '--help'],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith('usage: mmrepro-train ')
