"""The tools' error contract (docs/tools.md): every bad input is one ``error:`` line.

Each case runs a CLI from an empty working directory, and pins the whole of stderr:
exactly one line (no traceback, no usage block), exit status 2, and nothing written: no
work dir, the working directory still empty and the directory of the files the cases
name unchanged. Every case fails before training, so the table is cheap; the cases that
resume a real checkpoint take it from the session's cached RetinaNet run.

Most cases call the tool's ``main`` in this process (:func:`support.error_contract.run_tool`):
a new interpreter importing torch and MMDetection costs 3-4 s a case, the table has over
50, and what the contract pins is what ``main`` prints and exits with. The call gets what
a new interpreter would (``sys.argv``, no launcher variables, the working directory,
Python's default warning filters with the warnings on stderr, stdout and stderr captured
at the file descriptors) and fails where it leaves process state behind. Real
subprocesses still run :data:`IN_SUBPROCESS`: ``tools/dist_train.sh`` (a shell script,
which runs ``tools/train.py --check-config`` in its own interpreter), and one Python
tool of each way a script exits (``tools/train.py`` by ``sys.exit`` inside ``main``,
``tools/weights_digest.py`` by ``sys.exit(main())``), which prove the console level:
the status the interpreter exits with, and a stderr without anything an interpreter
start or an import prints.
"""
from __future__ import annotations

import os
import os.path as osp
import shutil
import subprocess
import sys
from typing import Tuple

import pytest
import torch
from support.checkpoints import flip_bit
from support.doc_examples import assert_shows
from support.error_contract import LAUNCHER_VARIABLES, Tool, run_tool
from support.repro_utils import CONFIGS, REPO, checkpoint, pythonpath, write_config

from mmrepro.resume.checkpoint_io import safe_load
from mmrepro.resume.digests import PARTS_KEY, part_digests
from mmrepro.resume.verification import PART_NAMES

DEMO = CONFIGS['retinanet']  # batch_size 2, no accumulation
NO_KEY_VALUE = ("--cfg-options expects KEY=VALUE pairs, got 'randomness.seed' (no value): "
                'write it as randomness.seed=VALUE')
SYNTAX = ("config '{bad}' is not valid Python: '(' was never closed ({bad}, line 2: "
          "'b = ('); fix the file (python -m py_compile {bad} shows the line)")
SYNTAX_IN_BASE = ("config '{child}' is not valid Python: '(' was never closed ({bad}, line 2: "
                  "'b = ('); fix the file (python -m py_compile {bad} shows the line)")
MISSING = ("config file not found: '{missing}'; expected the path of a config file, check "
           'its spelling and the working directory')


CANNOT_PARSE = ("--cfg-options {key}: cannot parse the value '{value}' (its brackets do not "
                'balance: {opened} opened, {closed} closed); expected a number, True/False/None, '
                'a string or a bracketed list such as [1,2]')
RESUME_FIX = ('give the checkpoint to resume, e.g. --resume WORK_DIR/epoch_N.pth, or --resume '
              'alone to resume the latest one of --work-dir')
NOT_TORCH = ("is not a PyTorch checkpoint: it begins with b'mode', expected a file torch.save "
             "wrote (a zip archive, beginning with b'PK'). Check the path.")
LAUNCHER = ('--launcher pytorch needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the '
            'environment (the launcher sets them for each process), but none is set; launch it '
            'with bash tools/dist_train.sh CONFIG NPROC or torchrun --nproc_per_node NPROC '
            'tools/train.py CONFIG --launcher pytorch, or leave out --launcher pytorch to train '
            'in one process')
#: The RetinaNet test detector's checkpoint against the Faster R-CNN test detector.
OTHER_MODEL = (
    "--resume '{retina_ckpt}' does not fit this config's model (FasterRCNN; the checkpoint's "
    "is RetinaNet): 16 of the model's 150 weights are not in it (e.g. "
    "'neck.lateral_convs.3.conv.weight'); 22 of its 156 are not in the model (e.g. "
    "'neck.fpn_convs.4.conv.weight'); 4 have another shape (e.g. "
    "'neck.lateral_convs.0.conv.weight': [64, 32, 1, 1] in it, [64, 16, 1, 1] in the "
    'model); expected a checkpoint of this config: resume with the config that wrote it, or '
    'pass --cfg-options load_from={retina_ckpt} without --resume to start a new run from its '
    'weights')


#: A checkpoint with one bit flipped (:data:`FLIPPED`), after the argument that names it.
FLIPPED_LINE = (
    "'{flipped}' does not hold what was saved in it: {part}: expected sha256 {expected}, "
    'found {found}, the first {unit} that differs is {first}. It was changed or damaged after '
    'it was saved (a copy, a transfer, the storage): copy it again from where it was '
    'written, or resume from another checkpoint; nothing was written. To load it anyway: '
    '--no-verify-checkpoints (randomness.verify_checkpoints=False); the run record then says '
    'it was not verified.')


def _global_batch(expected: int, ranks: int, fix: int) -> str:
    return (f'randomness.global_batch={expected}, but this run trains {ranks} rank(s) x '
            f'batch_size 2 x accumulative_counts 1 = {2 * ranks} samples per optimizer '
            f'step. Set train_dataloader.batch_size x optim_wrapper.accumulative_counts to '
            f'{fix} for {ranks} rank(s).')


W = ['--work-dir', '{work_dir}']


def _tool(name: str, **kw) -> Tool:
    return Tool(osp.join(REPO, 'tools', f'{name}.py'), f'mmrepro.cli.{name}', **kw)


TRAIN = _tool('train', exits_with_main=False)  # main(), then exit 0; errors: sys.exit(2)
CHECK = _tool('check_repro')
MATRIX = _tool('support_matrix')
DEMO_DATA = _tool('make_demo_data')
DIST = Tool(osp.join(REPO, 'tools', 'dist_train.sh'))
DIFF = _tool('repro_diff')
DIGEST = _tool('weights_digest')
BUNDLE = _tool('bundle')
TEST = _tool('test', exits_with_main=False)  # main(), then exit 0; errors: sys.exit(2)
DIST_TEST = Tool(osp.join(REPO, 'tools', 'dist_test.sh'))

#: (tool, arguments, the whole of stderr). ``{work_dir}``, ``{bad}`` (a config with a
#: syntax error), ``{child}`` (a config inheriting it), ``{plain}`` (a config without
#: ``auto_scale_lr``), ``{missing}``, ``{no_torch}`` (a python that cannot import
#: torch), ``{files}`` (the directory of these files, no checkpoint in it) and ``{bare}``
#: (a bare state dict saved by torch, in a directory under it) are filled in per test;
#: for :data:`NEEDS_RUNS`, ``{retina_dir}`` (the cached RetinaNet run), ``{retina_ckpt}``
#: (its first checkpoint), ``{retina_last}`` (its last) and ``{faster}`` (a Faster R-CNN
#: config).
CASES = {
    'train-key-without-value': (TRAIN, [*W, DEMO, '--cfg-options', 'randomness.seed'],
                                'mmrepro-train: error: ' + NO_KEY_VALUE),
    'train-key-without-name': (TRAIN, [*W, DEMO, '--cfg-options', '=3'],
                               "mmrepro-train: error: --cfg-options expects KEY=VALUE pairs, got "
                               "'=3' (no key): write it as KEY=VALUE, e.g. randomness.seed=0"),
    'train-unparsable-value': (TRAIN, [*W, DEMO, '--cfg-options', 'randomness.seed=[1,2'],
                               'mmrepro-train: error: ' + CANNOT_PARSE.format(
                                   key='randomness.seed', value='[1,2', opened=1, closed=0)),
    'train-syntax-error': (TRAIN, [*W, '{bad}'], 'mmrepro-train: error: ' + SYNTAX),
    'train-syntax-error-in-base': (TRAIN, [*W, '{child}'],
                                   'mmrepro-train: error: ' + SYNTAX_IN_BASE),
    'train-missing-config': (TRAIN, [*W, '{missing}'], 'mmrepro-train: error: ' + MISSING),
    'train-global-batch': (TRAIN, [*W, DEMO, '--cfg-options', 'randomness.global_batch=4'],
                           'mmrepro-train: error: ' + _global_batch(4, 1, 4)),
    'train-auto-scale-lr-without-base': (
        TRAIN, [*W, '{plain}', '--auto-scale-lr'],
        'mmrepro-train: error: --auto-scale-lr needs auto_scale_lr.base_batch_size in the config '
        '(the batch size its learning rate is for), got auto_scale_lr=None; add e.g. '
        '`auto_scale_lr = dict(enable=False, base_batch_size=16)` to the config'),
    'train-amp-other-wrapper': (
        TRAIN, [*W, '{plain}', '--amp', '--cfg-options', 'optim_wrapper.type=Foo'],
        "mmrepro-train: error: --amp needs optim_wrapper.type OptimWrapper (or AmpOptimWrapper), "
        "got optim_wrapper.type='Foo'; remove --amp, or set optim_wrapper.type"),
    'train-runner-type-without-mmrepros-methods': (
        TRAIN, [*W, DEMO, '--cfg-options', 'runner_type=FlexibleRunner'],
        "mmrepro-train: error: runner_type='FlexibleRunner': the config enables mmrepro, but "
        "FlexibleRunner lacks mmrepro's Runner methods; use runner_type='ReproRunner', or "
        'define it as class FlexibleRunner(ReproRunnerMixin, Runner) (from mmrepro import '
        'ReproRunnerMixin)'),
    'train-bad-flag-value': (TRAIN, [*W, DEMO, '--seed', 'abc'],
                             "mmrepro-train: error: argument --seed: --seed must be an integer in "
                             "[0, 2**32 - 1], got 'abc'"),
    'check-key-without-value': (CHECK, [*W, DEMO, '--cfg-options', 'randomness.seed'],
                                'mmrepro-check: error: ' + NO_KEY_VALUE),
    'check-syntax-error': (CHECK, [*W, '{bad}'], 'mmrepro-check: error: ' + SYNTAX),
    'check-missing-config': (CHECK, [*W, '{missing}'], 'mmrepro-check: error: ' + MISSING),
    'check-global-batch': (CHECK, [*W, DEMO, '--cfg-options', 'randomness.global_batch=4'],
                           'mmrepro-check: error: ' + _global_batch(4, 1, 4)),
    'check-global-batch-2-ranks': (
        CHECK, [*W, DEMO, '--launcher', 'pytorch', '--nproc', '2', '--cfg-options',
                'randomness.global_batch=2'], 'mmrepro-check: error: ' + _global_batch(2, 2, 1)),
    'matrix-key-without-value': (MATRIX, ['--families', 'fcos', '--cfg-options',
                                          'randomness.seed'],
                                 'mmrepro-matrix: error: ' + NO_KEY_VALUE),
    'matrix-global-batch': (MATRIX, ['--families', 'fcos', '--cfg-options',
                                     'randomness.global_batch=3'],
                            'mmrepro-matrix: error: family fcos: ' + _global_batch(3, 1, 3)),
    'matrix-bad-flag-value': (MATRIX, ['--jobs', 'x'],
                              "mmrepro-matrix: error: argument --jobs: invalid int value: "
                              "'x'"),
    'demo-data-bad-count': (DEMO_DATA, ['{work_dir}', '--num-train', '0'],
                            'mmrepro-demo-data: error: argument --num-train: must be >= 1, got 0'),
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
    'test-missing-checkpoint': (
        TEST, [*W, DEMO, '{missing}.pth'],
        "mmrepro-test: error: CHECKPOINT '{missing}.pth': no such file, expected a checkpoint "
        'file (.pth); give the .pth file to test, e.g. work_dirs/NAME/epoch_12.pth'),
    'test-out-not-a-pickle': (
        TEST, [*W, DEMO, '{missing}.pth', '--out', 'results.json'],
        "mmrepro-test: error: --out 'results.json': expected a pickle file name ending in "
        '.pkl or .pickle (MMDetection dumps the predictions with pickle); e.g. --out '
        'results.pkl'),
    'dist-test-no-checkpoint': (
        DIST_TEST, [DEMO, '2'],
        'dist_test.sh: error: expected CONFIG CHECKPOINT NPROC [tools/test.py args], got 2 '
        'argument(s); e.g. bash tools/dist_test.sh configs/my_config.py epoch_12.pth 2'),
    'diff-missing-run': (DIFF, ['{missing}', '{missing}'],
                         'mmrepro-diff: error: {missing}: no such file or directory'),
    'diff-one-run': (DIFF, ['{missing}'],
                     'mmrepro-diff: error: the following arguments are required: run_b'),
    'diff-missing-checkpoint': (DIFF, ['{missing}.pth', '{missing}.pth'],
                                'mmrepro-diff: error: {missing}.pth: no such file; expected a '
                                'checkpoint file (.pth)'),
    'digest-missing-checkpoint': (DIGEST, ['{missing}.pth'],
                                  'mmrepro-digest: error: {missing}.pth: no such file; '
                                  'expected a checkpoint file (.pth)'),
    'digest-no-argument': (DIGEST, [], 'mmrepro-digest: error: the following arguments are '
                           'required: CHECKPOINT'),
    'dist-global-batch-2-ranks': (DIST, [DEMO, '2', *W, '--cfg-options',
                                         'randomness.global_batch=2'],
                                  'mmrepro-train: error: ' + _global_batch(2, 2, 1)),
    'train-unbalanced-brackets': (
        TRAIN, [*W, DEMO, '--cfg-options', 'train_cfg.max_epochs=[1'],
        'mmrepro-train: error: ' + CANNOT_PARSE.format(key='train_cfg.max_epochs', value='[1',
                                                  opened=1, closed=0)),
    'train-string-for-a-number': (
        TRAIN, [*W, DEMO, '--cfg-options', 'train_cfg.max_epochs=three'],
        "mmrepro-train: error: --cfg-options train_cfg.max_epochs='three': expected a number (the "
        'config has train_cfg.max_epochs=3), got a string; write e.g. train_cfg.max_epochs=3'),
    'train-randomness-not-a-dict': (
        TRAIN, [*W, DEMO, '--cfg-options', 'randomness=5'],
        'mmrepro-train: error: randomness must be a dict such as dict(seed=0, deterministic=True), '
        'got 5 (int). Set its keys, e.g. `--cfg-options randomness.seed=5` or `randomness = '
        'dict(seed=5)` in the config.'),
    'train-compile-not-a-dict': (
        TRAIN, [*W, DEMO, '--cfg-options', 'compile=inductor'],
        "mmrepro-train: error: compile='inductor': expected True, False or a dict of torch.compile "
        "arguments, e.g. compile=dict(backend='inductor', mode='default')"),
    'train-negative-seed': (TRAIN, [*W, DEMO, '--seed', '-1'],
                            'mmrepro-train: error: argument --seed: --seed must be in [0, '
                            '4294967295] (2**32 - 1), got -1. Pick a seed in that range, e.g. '
                            '`1`.'),
    'train-work-dir-is-a-file': (
        TRAIN, ['--work-dir', '{plain}', DEMO],
        "mmrepro-train: error: --work-dir '{plain}' is a file, expected a directory (made if "
        'missing) for the checkpoints and logs; choose another path'),
    'train-work-dir-under-a-file': (
        TRAIN, ['--work-dir', '{plain}/work', DEMO],
        "mmrepro-train: error: --work-dir '{plain}/work' cannot be made: '{plain}' is a file, "
        'expected a directory; choose another path'),
    'train-launcher-without-environment': (TRAIN, [*W, DEMO, '--launcher', 'pytorch'],
                                           'mmrepro-train: error: ' + LAUNCHER),
    'train-resume-missing-file': (
        TRAIN, [*W, DEMO, '--resume', '{missing}.pth'],
        "mmrepro-train: error: --resume '{missing}.pth': no such file, expected a checkpoint file "
        '(.pth); ' + RESUME_FIX),
    'train-resume-directory': (
        TRAIN, [*W, DEMO, '--resume', '{files}'],
        "mmrepro-train: error: --resume '{files}' is a directory holding no checkpoint, expected a "
        'checkpoint file (.pth); ' + RESUME_FIX),
    'train-resume-work-dir': (
        TRAIN, [*W, DEMO, '--resume', '{retina_dir}'],
        "mmrepro-train: error: --resume '{retina_dir}' is a directory, expected a checkpoint file "
        '(.pth); give one of its checkpoints (--resume {retina_last}), or --resume alone with '
        '--work-dir {retina_dir} to resume its latest'),
    'train-resume-not-a-checkpoint': (TRAIN, [*W, DEMO, '--resume', '{plain}'],
                                      "mmrepro-train: error: --resume '{plain}' " + NOT_TORCH),
    'train-resume-weights-only': (
        TRAIN, [*W, DEMO, '--resume', '{bare}'],
        "mmrepro-train: error: --resume '{bare}' lacks state_dict, message_hub, meta['epoch'] and "
        "meta['iter'], so it is not a training checkpoint that can be resumed; expected one "
        "that MMEngine's CheckpointHook saved: to start a new run from its weights, pass "
        '--cfg-options load_from={bare} without --resume'),
    'train-resume-another-model': (TRAIN, [*W, '{faster}', '--resume', '{retina_ckpt}'],
                                   'mmrepro-train: error: ' + OTHER_MODEL),
    'train-resume-flipped-weight': (TRAIN, [*W, DEMO, '--resume', '{flipped}'],
                                    'mmrepro-train: error: --resume ' + FLIPPED_LINE),
    'train-resume-flipped-moment': (TRAIN, [*W, DEMO, '--resume', '{flipped}'],
                                    'mmrepro-train: error: --resume ' + FLIPPED_LINE),
    'train-resume-flipped-rng-state': (TRAIN, [*W, DEMO, '--resume', '{flipped}'],
                                       'mmrepro-train: error: --resume ' + FLIPPED_LINE),
    'test-flipped-checkpoint': (TEST, [*W, DEMO, '{flipped}'],
                                'mmrepro-test: error: CHECKPOINT ' + FLIPPED_LINE),
    'train-load-from-missing-file': (
        TRAIN, [*W, DEMO, '--cfg-options', 'load_from={missing}.pth'],
        "mmrepro-train: error: load_from '{missing}.pth': no such file, expected a checkpoint file "
        '(.pth); check the path given to load_from'),
    'check-config-resume-missing-file': (
        TRAIN, [*W, DEMO, '--check-config', '--resume', '{missing}.pth'],
        "mmrepro-train: error: --resume '{missing}.pth': no such file, expected a checkpoint file "
        '(.pth); ' + RESUME_FIX),
    'check-config-work-dir-is-a-file': (
        TRAIN, ['--work-dir', '{plain}', DEMO, '--check-config'],
        "mmrepro-train: error: --work-dir '{plain}' is a file, expected a directory (made if "
        'missing) for the checkpoints and logs; choose another path'),
    'check-config-launcher-without-world-size': (
        TRAIN, [*W, DEMO, '--check-config', '--launcher', 'pytorch'],
        'mmrepro-train: error: --check-config --launcher pytorch checks the arguments for every '
        'process the launcher will start and needs their number in WORLD_SIZE, but it is not '
        'set; run it as WORLD_SIZE=NPROC tools/train.py CONFIG --check-config --launcher '
        'pytorch (tools/dist_train.sh does)'),
    'check-config-resume-another-model': (
        TRAIN, [*W, '{faster}', '--check-config', '--resume', '{retina_ckpt}'],
        'mmrepro-train: error: ' + OTHER_MODEL),
    'dist-resume-missing-file': (
        DIST, [DEMO, '2', *W, '--resume', '{missing}.pth'],
        "mmrepro-train: error: --resume '{missing}.pth': no such file, expected a checkpoint file "
        '(.pth); ' + RESUME_FIX),
    'dist-resume-another-model': (DIST, ['{faster}', '2', *W, '--resume', '{retina_ckpt}'],
                                  'mmrepro-train: error: ' + OTHER_MODEL),
    'digest-directory': (DIGEST, ['{files}'],
                         'mmrepro-digest: error: {files}: a directory holding no checkpoint, '
                         'expected a checkpoint file (.pth)'),
    'digest-work-dir': (DIGEST, ['{retina_dir}'],
                        'mmrepro-digest: error: {retina_dir}: a directory, expected a '
                        'checkpoint file (.pth) in it, e.g. {retina_last}'),
    'digest-not-a-checkpoint': (DIGEST, ['{plain}'],
                                "mmrepro-digest: error: Checkpoint '{plain}' " + NOT_TORCH),
    'bundle-missing-out-directory': (
        BUNDLE, ['{files}', '{missing}/b.tar.gz'],
        'mmrepro-bundle: error: {missing}/b.tar.gz: its directory {missing} does not exist; '
        'nothing was written (make it first, or choose another path)'),
    'bundle-missing-work-dir': (
        BUNDLE, ['{missing}', '{files}/b.tar.gz'],
        'mmrepro-bundle: error: {missing}: no such directory; expected the work dir (or a log '
        'dir) of a run trained with mmrepro'),
    'bundle-no-run-record': (
        BUNDLE, ['{files}', '{files}/b.tar.gz'],
        'mmrepro-bundle: error: {files}: no run_record.json in it or in a log dir under it; '
        'give the work dir of a run trained with mmrepro'),
}
#: The cases that name the session's cached RetinaNet run or the Faster R-CNN test config.
NEEDS_RUNS = ('train-resume-work-dir', 'train-resume-another-model', 'digest-work-dir',
              'check-config-resume-another-model', 'dist-resume-another-model')
#: The cases that resume or test a copy of the cached RetinaNet run's first checkpoint
#: with one bit flipped (``{flipped}``), and the part it is flipped in.
FLIPPED = {'train-resume-flipped-weight': 'weights', 'train-resume-flipped-moment': 'optimizer',
           'train-resume-flipped-rng-state': 'mmrepro', 'test-flipped-checkpoint': 'weights'}
#: The cases run in a real subprocess (the module's docstring says why); the others call
#: the tool's ``main`` in this process.
IN_SUBPROCESS = (*sorted(case for case, (tool, _, _) in CASES.items()
                         if tool in (DIST, DIST_TEST)),
                 'train-resume-not-a-checkpoint', 'digest-not-a-checkpoint')

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
    bare = files / 'weights' / 'bare.pth'  # {files} itself holds no checkpoint
    bare.parent.mkdir()
    torch.save({'fc.weight': torch.zeros(2, 2)}, str(bare))
    return dict(bad=str(files / 'bad.py'), child=str(files / 'child.py'),
                plain=str(files / 'plain.py'), missing=str(files / 'missing.py'),
                no_torch=str(no_torch), work_dir=str(tmp_path / 'work'), files=str(files),
                bare=str(bare))


def _with_runs(places: dict, request, tmp_path) -> dict:
    """``places`` and the cached RetinaNet run's checkpoints and a Faster R-CNN config."""
    runs = request.getfixturevalue('runs')
    retina = runs.get('retinanet', 'base')
    faster = write_config(str(tmp_path / 'configs' / 'faster.py'), 'faster_rcnn',
                          runs.data_root)
    return dict(places, retina_dir=retina, retina_ckpt=checkpoint(retina, 'epoch_1.pth'),
                retina_last=checkpoint(retina), faster=faster)


def _with_flipped(places: dict, request, tmp_path, part: str) -> dict:
    """``places`` and a copy of the cached RetinaNet run's first checkpoint with one bit
    flipped in ``part`` (``{flipped}``), and what the line says of it."""
    runs = request.getfixturevalue('runs')
    path = tmp_path / 'flipped' / 'epoch_1.pth'
    path.parent.mkdir()
    shutil.copy(checkpoint(runs.get('retinanet', 'base'), 'epoch_1.pth'), path)
    saved = safe_load(str(path))
    if part == 'weights':
        name = 'bbox_head.retina_cls.weight'
        tensor, first = saved['state_dict'][name], f'state_dict[{name!r}]'
    elif part == 'optimizer':
        key = next(iter(saved['optimizer']['state']))
        tensor = saved['optimizer']['state'][key]['momentum_buffer']
        first = f"optimizer['state'][{key!r}]['momentum_buffer']"
    else:
        tensor, first = saved['mmrepro']['rng'][0]['torch'], "mmrepro['rng'][0]['torch']"
    flip_bit(str(path), tensor)
    found = part_digests(safe_load(str(path)), [part])[part].sha256
    return dict(places, flipped=str(path), part=PART_NAMES[part], first=first, found=found,
                expected=saved['meta'][PARTS_KEY]['parts'][part]['sha256'],
                unit='tensor' if part == 'weights' else 'entry')


def _run(case: str, places: dict, cwd: str, capfd, monkeypatch) -> Tuple[int, str]:
    """Run ``case`` from ``cwd``: its exit status and stderr."""
    tool, args, _ = CASES[case]
    args = [a.format(**places) for a in args]
    if case not in IN_SUBPROCESS:
        monkeypatch.chdir(cwd)
        code, _, err = run_tool(tool, args, capfd, monkeypatch)
        return code, err
    command = (['bash', tool.script] if tool in (DIST, DIST_TEST)
               else [sys.executable, tool.script])
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env['PYTHONPATH'] = pythonpath(REPO)
    if case == 'dist-python-without-torch':
        env['PYTHON'] = places['no_torch']
    elif tool in (DIST, DIST_TEST):
        env['PYTHON'] = sys.executable
    proc = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    return proc.returncode, proc.stderr


#: The cases the floor stack runs too: those that read a file as a checkpoint (what torch's
#: version changes); the others check arguments and configs alike on both stacks. The
#: launcher's cases (``dist-``: ``tools/dist_train.sh`` starting ``tools/train.py
#: --check-config``) read checkpoints as the ``check-config-`` cases do in this process.
FLOOR_CASES = ('resume', 'load', 'digest', 'checkpoint')


def _on_the_floor(case: str) -> bool:
    return not case.startswith('dist-') and any(word in case for word in FLOOR_CASES)


@pytest.mark.parametrize('case', [
    pytest.param(case, marks=() if _on_the_floor(case) else pytest.mark.slow)
    for case in sorted(CASES)])
def test_bad_input_is_one_error_line_exit_2_and_nothing_written(case, places, tmp_path,
                                                                 request, capfd, monkeypatch):
    if case in NEEDS_RUNS:
        places = _with_runs(places, request, tmp_path)
    if case in FLIPPED:
        places = _with_flipped(places, request, tmp_path, FLIPPED[case])
    cwd = tmp_path / 'cwd'
    cwd.mkdir()
    files = sorted(os.listdir(places['files']))
    code, err = _run(case, places, str(cwd), capfd, monkeypatch)
    assert err.splitlines() == [CASES[case][2].format(**places)], err
    assert code == 2
    assert not osp.exists(places['work_dir']) and os.listdir(cwd) == []
    assert sorted(os.listdir(places['files'])) == files


def test_docs_show_the_lines_the_tools_print(places, tmp_path, capfd, monkeypatch):
    lines = [_run(case, places, str(tmp_path), capfd, monkeypatch)[1].strip()
             for case in DOCUMENTED]
    # docs/tools.md names the file with the syntax error as the user typed it: bad.py.
    assert_shows('error-contract', '\n'.join(lines).replace(places['bad'], 'bad.py'))


def test_check_config_accepts_a_good_config_and_writes_nothing(places, capfd, monkeypatch):
    monkeypatch.chdir(places['files'])
    code, out, err = run_tool(TRAIN, [DEMO, '--check-config', '--work-dir',
                                      places['work_dir']], capfd, monkeypatch)
    assert code == 0, err
    assert out == f'{DEMO}: arguments and config are valid\n'
    assert not osp.exists(places['work_dir'])


def test_check_config_accepts_a_checkpoint_of_the_config_and_writes_nothing(
        places, tmp_path, request, capfd, monkeypatch):
    places = _with_runs(places, request, tmp_path)
    retina = write_config(str(tmp_path / 'configs' / 'retina.py'), 'retinanet',
                          request.getfixturevalue('runs').data_root)
    monkeypatch.chdir(places['files'])
    for resume in (['--resume', places['retina_ckpt']], ['--resume']):
        work_dir = places['retina_dir'] if resume == ['--resume'] else places['work_dir']
        before = sorted(os.listdir(places['retina_dir']))
        code, out, err = run_tool(TRAIN, [retina, '--check-config', '--work-dir', work_dir,
                                          *resume], capfd, monkeypatch)
        assert code == 0, err
        assert out == f'{retina}: arguments and config are valid\n'
        assert not osp.exists(places['work_dir'])
        assert sorted(os.listdir(places['retina_dir'])) == before
