"""The tools' error contract (docs/tools.md): every bad input is one ``error:`` line.

Each case runs a real CLI in a subprocess, from an empty working directory, and pins
the whole of stderr: exactly one line (no traceback, no usage block), exit status 2,
and nothing written: no work dir, and the working directory still empty. Every case
fails before training, so the table is cheap.
"""
from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import pytest
from support.doc_examples import assert_shows
from support.repro_utils import CONFIGS, REPO, pythonpath

DEMO = CONFIGS['retinanet']  # batch_size 2, no accumulation
NO_KEY_VALUE = ("--cfg-options expects KEY=VALUE pairs, got 'randomness.seed' (no value): "
                'write it as randomness.seed=VALUE')
SYNTAX = ("config '{bad}' is not valid Python: '(' was never closed ({bad}, line 2: "
          "'b = ('); fix the file (python -m py_compile {bad} shows the line)")
SYNTAX_IN_BASE = ("config '{child}' is not valid Python: '(' was never closed ({bad}, line 2: "
                  "'b = ('); fix the file (python -m py_compile {bad} shows the line)")
MISSING = ("config file not found: '{missing}'; expected the path of a config file, check "
           'its spelling and the working directory')


def _global_batch(expected: int, ranks: int, fix: int) -> str:
    return (f'randomness.global_batch={expected}, but this run trains {ranks} rank(s) x '
            f'batch_size 2 x accumulative_counts 1 = {2 * ranks} samples per optimizer '
            f'step. Set train_dataloader.batch_size x optim_wrapper.accumulative_counts to '
            f'{fix} for {ranks} rank(s).')


W = ['--work-dir', '{work_dir}']
TRAIN = [osp.join(REPO, 'tools', 'train.py')]
CHECK = [osp.join(REPO, 'tools', 'check_repro.py')]
MATRIX = [osp.join(REPO, 'tools', 'support_matrix.py')]
DEMO_DATA = [osp.join(REPO, 'tools', 'make_demo_data.py')]
DIST = ['bash', osp.join(REPO, 'tools', 'dist_train.sh')]
DIFF = [osp.join(REPO, 'tools', 'repro_diff.py')]
DIGEST = [osp.join(REPO, 'tools', 'weights_digest.py')]

#: (tool, arguments, the whole of stderr). ``{work_dir}``, ``{bad}`` (a config with a
#: syntax error), ``{child}`` (a config inheriting it), ``{plain}`` (a config without
#: ``auto_scale_lr``), ``{missing}`` and ``{no_torch}`` (a python that cannot import
#: torch) are filled in per test.
CASES = {
    'train-key-without-value': (TRAIN, [*W, DEMO, '--cfg-options', 'randomness.seed'],
                                'train.py: error: ' + NO_KEY_VALUE),
    'train-key-without-name': (TRAIN, [*W, DEMO, '--cfg-options', '=3'],
                               "train.py: error: --cfg-options expects KEY=VALUE pairs, got "
                               "'=3' (no key): write it as KEY=VALUE, e.g. randomness.seed=0"),
    'train-unparsable-value': (TRAIN, [*W, DEMO, '--cfg-options', 'randomness.seed=[1,2'],
                               "train.py: error: --cfg-options randomness.seed: cannot parse "
                               "the value '[1,2' (Imbalanced brackets exist in [1,2); expected "
                               'a number, True/False/None, a string or a bracketed list such '
                               'as [1,2]'),
    'train-syntax-error': (TRAIN, [*W, '{bad}'], 'train.py: error: ' + SYNTAX),
    'train-syntax-error-in-base': (TRAIN, [*W, '{child}'], 'train.py: error: ' + SYNTAX_IN_BASE),
    'train-missing-config': (TRAIN, [*W, '{missing}'], 'train.py: error: ' + MISSING),
    'train-global-batch': (TRAIN, [*W, DEMO, '--cfg-options', 'randomness.global_batch=4'],
                           'train.py: error: ' + _global_batch(4, 1, 4)),
    'train-auto-scale-lr-without-base': (
        TRAIN, [*W, '{plain}', '--auto-scale-lr'],
        'train.py: error: --auto-scale-lr needs auto_scale_lr.base_batch_size in the config '
        '(the batch size its learning rate is for), got auto_scale_lr=None; add e.g. '
        '`auto_scale_lr = dict(enable=False, base_batch_size=16)` to the config'),
    'train-amp-other-wrapper': (
        TRAIN, [*W, '{plain}', '--amp', '--cfg-options', 'optim_wrapper.type=Foo'],
        "train.py: error: --amp needs optim_wrapper.type OptimWrapper (or AmpOptimWrapper), "
        "got optim_wrapper.type='Foo'; remove --amp, or set optim_wrapper.type"),
    'train-bad-flag-value': (TRAIN, [*W, DEMO, '--seed', 'abc'],
                             "train.py: error: argument --seed: --seed must be an integer in "
                             "[0, 2**32 - 1], got 'abc'"),
    'check-key-without-value': (CHECK, [*W, DEMO, '--cfg-options', 'randomness.seed'],
                                'check_repro: error: ' + NO_KEY_VALUE),
    'check-syntax-error': (CHECK, [*W, '{bad}'], 'check_repro: error: ' + SYNTAX),
    'check-missing-config': (CHECK, [*W, '{missing}'], 'check_repro: error: ' + MISSING),
    'check-global-batch': (CHECK, [*W, DEMO, '--cfg-options', 'randomness.global_batch=4'],
                           'check_repro: error: ' + _global_batch(4, 1, 4)),
    'check-global-batch-2-ranks': (
        CHECK, [*W, DEMO, '--launcher', 'pytorch', '--nproc', '2', '--cfg-options',
                'randomness.global_batch=2'], 'check_repro: error: ' + _global_batch(2, 2, 1)),
    'matrix-key-without-value': (MATRIX, ['--families', 'fcos', '--cfg-options',
                                          'randomness.seed'],
                                 'support_matrix: error: ' + NO_KEY_VALUE),
    'matrix-global-batch': (MATRIX, ['--families', 'fcos', '--cfg-options',
                                     'randomness.global_batch=3'],
                            'support_matrix: error: family fcos: ' + _global_batch(3, 1, 3)),
    'matrix-bad-flag-value': (MATRIX, ['--jobs', 'x'],
                              "support_matrix: error: argument --jobs: invalid int value: "
                              "'x'"),
    'demo-data-bad-count': (DEMO_DATA, ['{work_dir}', '--num-train', '0'],
                            'make_demo_data: error: argument --num-train: must be >= 1, got 0'),
    'dist-python-without-torch': (
        DIST, [DEMO, '1', *W],
        "dist_train.sh: error: the python used (PYTHON={no_torch}) cannot import torch "
        "(ModuleNotFoundError: No module named 'torch'); set PYTHON=/path/to/python of an "
        'environment with torch and mmdet'),
    'dist-no-nproc': (DIST, [DEMO],
                      'dist_train.sh: error: expected CONFIG NPROC [tools/train.py args], got '
                      '1 argument(s); e.g. bash tools/dist_train.sh configs/my_config.py 2'),
    'dist-bad-nproc': (DIST, [DEMO, 'two', *W],
                       "dist_train.sh: error: NPROC must be a whole number >= 1 (processes per "
                       "node), got 'two'"),
    'diff-missing-run': (DIFF, ['{missing}', '{missing}'],
                         'repro_diff: error: {missing}: no such file or directory'),
    'diff-one-run': (DIFF, ['{missing}'],
                     'repro_diff: error: the following arguments are required: run_b'),
    'diff-missing-checkpoint': (DIFF, ['{missing}.pth', '{missing}.pth'],
                                'repro_diff: error: {missing}.pth: no such file; expected a '
                                'checkpoint file (.pth)'),
    'digest-missing-checkpoint': (DIGEST, ['{missing}.pth'],
                                  'mmrepro-digest: error: {missing}.pth: no such file; '
                                  'expected a checkpoint file (.pth)'),
    'digest-no-argument': (DIGEST, [], 'mmrepro-digest: error: the following arguments are '
                           'required: CHECKPOINT'),
    'dist-global-batch-2-ranks': (DIST, [DEMO, '2', *W, '--cfg-options',
                                         'randomness.global_batch=2'],
                                  'train.py: error: ' + _global_batch(2, 2, 1)),
}

#: The cases whose line docs/tools.md shows (its ``error-contract`` block), in its order.
DOCUMENTED = ('train-key-without-value', 'train-syntax-error', 'train-global-batch')


@pytest.fixture
def places(tmp_path) -> dict:
    """The files the cases name, outside the (empty) working directory."""
    files = tmp_path / 'files'
    files.mkdir()
    (files / 'bad.py').write_text('a = 1\nb = (\n')
    (files / 'child.py').write_text("_base_ = ['./bad.py']\n")
    (files / 'plain.py').write_text(
        "model = dict(type='X')\ntrain_dataloader = dict(batch_size=2)\n"
        "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))\n")
    no_torch = files / 'no_torch_python'  # this interpreter without its site-packages
    no_torch.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    no_torch.chmod(0o755)
    return dict(bad=str(files / 'bad.py'), child=str(files / 'child.py'),
                plain=str(files / 'plain.py'), missing=str(files / 'missing.py'),
                no_torch=str(no_torch), work_dir=str(tmp_path / 'work'))


def _run(case: str, places: dict, cwd: str) -> subprocess.CompletedProcess:
    tool, args, _ = CASES[case]
    command = tool if tool is DIST else [sys.executable, *tool]
    env = {**os.environ, 'PYTHONPATH': pythonpath(REPO)}
    if case == 'dist-python-without-torch':
        env['PYTHON'] = places['no_torch']
    elif tool is DIST:
        env['PYTHON'] = sys.executable
    return subprocess.run([*command, *(a.format(**places) for a in args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize('case', sorted(CASES))
def test_bad_input_is_one_error_line_exit_2_and_nothing_written(case, places, tmp_path):
    cwd = tmp_path / 'cwd'
    cwd.mkdir()
    proc = _run(case, places, str(cwd))
    assert proc.stderr.splitlines() == [CASES[case][2].format(**places)], proc.stderr
    assert proc.returncode == 2
    assert not osp.exists(places['work_dir']) and os.listdir(cwd) == []


def test_docs_show_the_lines_the_tools_print(places, tmp_path):
    lines = [_run(case, places, str(tmp_path)).stderr.strip() for case in DOCUMENTED]
    # docs/tools.md names the file with the syntax error as the user typed it: bad.py.
    assert_shows('error-contract', '\n'.join(lines).replace(places['bad'], 'bad.py'))


def test_check_config_accepts_a_good_config_and_writes_nothing(places, tmp_path):
    proc = subprocess.run([sys.executable, *TRAIN, DEMO, '--check-config',
                           '--work-dir', places['work_dir']], cwd=tmp_path / 'files',
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f'{DEMO}: arguments and config are valid\n'
    assert not osp.exists(places['work_dir'])
