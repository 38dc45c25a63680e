"""mmrepro-check CONFIG --against BASELINE: a teammate's machine checked against a baseline.

Real RetinaNet runs on the tiny COCO data: the session's shared 3-epoch run (24 steps,
traced at the dense early steps 1, 2, 4, 8 and 16), a run on a private copy of the data,
and the session's 2-rank layout run (``tests/support/layout_runs.py``).
"""
import functools
import glob
import json
import os.path as osp
import re
import shutil

import pytest
from support.cli import run_main
from support.repro_utils import REPO, checkpoint, pythonpath, run_train, write_config

from mmrepro.cli.check_repro import main as check_main
from mmrepro.record.bundle import pack
from mmrepro.record.run_record import load_run_record

pytestmark = pytest.mark.slow


_check = functools.partial(run_main, check_main)


def _base_config(runs):
    runs.get('retinanet', 'base')
    return runs.config('retinanet', 'base')


def test_the_same_config_here_reproduces_the_baseline(runs, base_checked):
    """The session's check of its base run (``base_checked``, whose run
    test_repro_diff.py compares with the baseline)."""
    baseline = runs.get('retinanet', 'base')
    _, code, out = base_checked
    assert code == 0, out
    assert ('before training: nothing recorded differs from the baseline (initial weights, '
            'config, data, decoded images, code, library versions, CPU/GPU numerics, '
            'layout)') in out, out
    assert (f'verdict: reproduces {baseline} bit for bit through iteration 8 (4 traced '
            'optimizer step(s): samples, losses, gradients and weights)') in out
    assert out.endswith(f'next: train it here as usual (mmrepro-train {_base_config(runs)} '
                        f'--work-dir DIR); mmrepro-diff {baseline} DIR compares the whole run\n')


def test_a_bundle_alone_is_checked_with_its_own_config(runs, tmp_path, capsys):
    """No CONFIG: the bundle's config dump is trained, kept in the check's work dir."""
    work_dir = runs.get('retinanet', 'base')
    [log_dir] = [osp.basename(osp.dirname(p))
                 for p in glob.glob(osp.join(work_dir, '*', 'run_record.json'))]
    baseline = str(tmp_path / 'baseline.tar.gz')
    pack(work_dir, baseline)
    work = str(tmp_path / 'check')
    code, out, _ = _check(capsys, '--against', baseline, '--iters', '1', '--work-dir', work)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[:5] == [
        f"mmrepro-check: the baseline's config ({log_dir}/vis_data/config.py) against {baseline} "
        '(seed 0, 1 rank(s) x batch_size 2 x accumulative_counts 1 = global batch 2)',
        '  this run: 1 rank(s) x batch_size 2 x accumulative_counts 1 = global batch 2',
        'before training: nothing recorded differs from the baseline (initial weights, config, '
        'data, decoded images, code, library versions, CPU/GPU numerics, layout)',
        f"  the baseline's config: {work}/baseline_config.py",
        'training optimizer steps 1..1 here (1 step(s) of 1 micro-batch(es)): iterations 1..1']
    assert re.fullmatch(r'  iteration 1/1: loss \d+\.\d+ \(\d+\.\d s\)', lines[5]), lines[5]
    assert lines[7:] == [
        f'verdict: reproduces {baseline} bit for bit through iteration 1 (1 traced optimizer '
        'step(s): samples, losses, gradients and weights)',
        f'next: train it here as usual (mmrepro-train {work}/baseline_config.py --work-dir '
        f'DIR); mmrepro-diff {baseline} DIR compares the whole run']
    with open(osp.join(work_dir, log_dir, 'vis_data', 'config.py')) as f:
        assert open(f'{work}/baseline_config.py').read() == f.read()


def test_a_seedless_config_is_stopped_before_training_and_never_called_reproduced(
        runs, tmp_path, capsys):
    """The check would train with the baseline's seed; a real run draws its own."""
    baseline = runs.get('retinanet', 'base')
    config = tmp_path / 'seedless.py'
    config.write_text(f'_base_ = {_base_config(runs)!r}\n'
                      'randomness = dict(_delete_=True, deterministic=True)\n')
    work = tmp_path / 'check'
    code, out, _ = _check(capsys, str(config), '--against', baseline, '--work-dir', str(work))
    assert code == 1, out
    seed = ('the seed: the config has no randomness.seed, so a real run draws a new one (the '
            "check trains with the baseline's seed 0)")
    fix = 'set randomness.seed=0 in the config (or pass --seed 0 to mmrepro-train)'
    assert out.endswith(f'before training: 1 difference(s) from the baseline, most decisive '
                        f'first:\n  config: {seed}\n    fix: {fix}\n'
                        f'verdict: config differs (before training): {seed}; pass --go-on to '
                        f'train and compare anyway\nnext: {fix}\n')
    assert not osp.exists(work), 'nothing is trained or written'
    code, out, _ = _check(capsys, str(config), '--against', baseline, '--go-on', '--iters', '1',
                          '--work-dir', str(work))
    assert code == 1, out
    assert out.endswith(f'verdict: reproduces {baseline} bit for bit through iteration 1 (1 '
                        'traced optimizer step(s): samples, losses, gradients and weights), '
                        "but only with the baseline's seed 0, which the check pinned: the "
                        f'config has none, so a real run draws a new one\nnext: {fix}\n')


@pytest.mark.full
def test_a_nondeterministic_config_is_never_called_reproduced(runs, tmp_path, capsys):
    """Its first step can agree bit for bit here; real runs in nondeterministic mode may
    not (the check trains it only with --go-on: the randomness settings differ).

    Full tier, a second proof of a nondeterministic config never called reproduced, which
    CI's default run proves in
    ``test_check_repro.py::test_a_seedless_config_is_not_reproducible_though_its_runs_agree``
    and this module's seedless case (the same refusal of settings that differ).
    """
    baseline = runs.get('retinanet', 'base')
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline, '--go-on',
                          '--iters', '1', '--cfg-options', 'randomness.deterministic=False',
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out
    assert ('  config: the seed or randomness settings: randomness.deterministic: True in the '
            'baseline, False here\n  config: the seed or randomness settings: '
            "config.randomness.deterministic: 'True' in the baseline, 'False' here\n"
            "    fix: set the baseline's value: --cfg-options randomness.deterministic=True, or "
            "check against the baseline's own config (leave out CONFIG)\n") in out
    assert ('\nreal runs of this config (what the check filled in or cannot show):\n'
            '  randomness.deterministic is False: ') in out
    assert out.endswith(f'verdict: reproduces {baseline} bit for bit through iteration 1 (1 '
                        'traced optimizer step(s): samples, losses, gradients and weights), '
                        'but real runs of this config may not: randomness.deterministic is '
                        'False\nnext: set randomness.deterministic=True in the config (try it '
                        'here with --cfg-options randomness.deterministic=True), or pass '
                        '--deterministic to mmrepro-train\n')


def test_from_a_checkpoint_to_the_next_traced_step_against_a_bundle(runs, tmp_path, capsys):
    """The baseline as a team shares it: a bundle (no weights), and one of its checkpoints."""
    work_dir = runs.get('retinanet', 'base')
    baseline = str(tmp_path / 'baseline.tar.gz')
    pack(work_dir, baseline)
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline, '--from',
                          checkpoint(work_dir, 'epoch_1.pth'),
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 0, out
    assert 'training optimizer steps 9..16 from ' in out
    assert (f'verdict: reproduces {baseline} bit for bit through iteration 16 (1 traced '
            'optimizer step(s)') in out


@pytest.mark.full
def test_another_thread_count_is_named_and_judged_within_rounding(runs, tmp_path, capsys,
                                                                 monkeypatch):
    """Full tier, a second proof of the thread count named and judged within rounding, which
    CI's default run proves in
    ``test_repro_diff.py::test_thread_count_is_a_numeric_difference_within_rounding`` (the
    same judge)."""
    baseline = runs.get('retinanet', 'base')
    threads = load_run_record(baseline)[0]['devices']['torch_threads']
    monkeypatch.setenv('OMP_NUM_THREADS', '1' if threads > 1 else '2')
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline, '--iters', '2',
                          '--bitwise', '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out  # equivalent within rounding, but --bitwise asks for bit for bit
    other = 1 if threads > 1 else 2
    assert (f'  CPU/GPU numerics: the intra-op thread count: devices.torch_threads: {threads} '
            f'in the baseline, {other} here') in out
    assert re.search(r'\nverdict: not bitwise, but equivalent within rounding \(distance '
                     r'\S+x the envelope at step [12]\); --bitwise requires bit for bit: '
                     r'numerics differ from iteration 1: first module ', out), out
    assert (f'recorded causes: the intra-op thread count: devices.torch_threads: {threads} '
            f'in the baseline, {other} here') in out
    fix = (f"pin the baseline's thread count: --cfg-options randomness.threads={threads} (or "
           f'export OMP_NUM_THREADS={threads} before the check and the training)')
    assert out.count(f'    fix: {fix}\n') == 1  # said once for the count and its variable
    assert out.endswith(f'\nnext: {fix}\n')
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline, '--iters', '1',
                          '--bitwise', '--cfg-options', f'randomness.threads={threads}',
                          '--work-dir', str(tmp_path / 'fixed'))
    assert code == 0, out  # the fix removes the cause: bit for bit
    assert 'before training: nothing recorded differs from the baseline' in out
    assert 'rounding envelope' not in out  # nothing to judge: no envelope is trained


@pytest.mark.full
def test_an_edited_annotation_file_is_named_before_and_after_training(data_root, tmp_path,
                                                                      capsys):
    """Full tier, a second proof of an edited annotation named as a data difference, which CI's
    default run proves in
    ``test_repro_diff.py::test_changed_annotation_is_a_data_difference``."""
    data = str(tmp_path / 'data')
    shutil.copytree(data_root, data)
    config = write_config(str(tmp_path / 'cfg' / 'retinanet.py'), 'retinanet', data,
                          num_workers=0, max_epochs=1)
    baseline = str(tmp_path / 'baseline')
    run_train(config, baseline)
    path = osp.join(data, 'annotations', 'train.json')
    with open(path) as f:
        coco = json.load(f)
    for annotation in coco['annotations']:  # every box one pixel wider
        annotation['bbox'][2] += 1
    with open(path, 'w') as f:
        json.dump(coco, f)
    code, out, _ = _check(capsys, config, '--against', baseline,
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 1
    assert ('verdict: data differs (before training): the data files (fingerprint): '
            'data.ann_files.annotations/train.json: ') in out
    fix = ("train on the baseline's data files (those named above differ): copy them from "
           "the baseline's machine, or point the config at the same files")
    assert out.endswith(f'\nnext: {fix}\n')
    assert not osp.exists(tmp_path / 'check'), 'nothing is trained or written'
    code, out, _ = _check(capsys, config, '--against', baseline, '--go-on',
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out
    assert 'verdict: data differs from iteration 1: sample 0 of the global batch (img_id=' in out
    assert ('because the data files (fingerprint): data.ann_files.annotations/train.json: '
            in out)
    assert out.endswith(f'\nnext: {fix}\n')


@pytest.mark.full
def test_two_ranks_and_one_process_accumulating_reproduce_each_other(tmp_path_factory,
                                                                     layout_runs, capsys,
                                                                     monkeypatch):
    """A 2 ranks x 2 baseline (test_layouts.py's), checked from 1 process
    (accumulative_counts set to 2).

    Full tier, a second proof of 2 ranks and 1 process accumulating train alike, which CI's
    default run proves in
    ``test_layouts.py::test_accumulation_reproduces_two_ranks_bit_for_bit``.
    """
    baseline = layout_runs.get('retinanet', '2x2')
    config = osp.join(layout_runs.root, 'cfg-retinanet-2x2', 'cfg.py')
    monkeypatch.setenv('PYTHONPATH', pythonpath(osp.join(REPO, 'tests')))
    work = str(tmp_path_factory.mktemp('against-check'))
    code, out, _ = _check(capsys, config, '--against', baseline, '--iters', '4',
                          '--work-dir', work)
    assert code == 0, out
    assert ('  this run: 1 rank(s) x batch_size 2 x accumulative_counts 2 = global batch 4'
            in out)
    assert (f'verdict: reproduces {baseline} bit for bit through iteration 4 (4 traced '
            'optimizer step(s)') in out


def test_a_baseline_traced_before_step_records_is_one_error_line(runs, tmp_path, capsys):
    """Traces of earlier releases hold iterations, not whole optimizer steps."""
    old = str(tmp_path / 'old')
    shutil.copytree(runs.get('retinanet', 'base'), old,
                    ignore=shutil.ignore_patterns('*.pth'))
    for path in glob.glob(osp.join(old, '*', 'trace.jsonl')):
        with open(path) as f:
            lines = [json.loads(line) for line in f]
        with open(path, 'w') as f:
            for line in lines:
                f.write(json.dumps({k: v for k, v in line.items()
                                    if not k.startswith('step')}) + '\n')
    code, out, err = _check(capsys, _base_config(runs), '--against', old)
    assert code == 2 and out == ''
    assert err == (f"mmrepro-check: error: --against {old!r}: the baseline's trace has no "
                   'optimizer-step records (written by an earlier mmrepro release); train '
                   'the baseline with this release, or compare two runs with mmrepro-diff\n')


@pytest.mark.parametrize('argv,message', [
    (['--against', 'no/such/dir'], "--against 'no/such/dir': no such work dir or bundle"),
    (['--go-on'], '--go-on needs --against BASELINE'),
    (['--against', '.', '--resume-check'], '--resume-check checks a config on its own'),
    (['--against', '.', '--from', 'missing.pth'], "--from 'missing.pth': no such checkpoint"),
])
def test_bad_arguments_are_one_error_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / 'c.py'
    config.write_text('model = dict()\n')
    code, out, err = _check(capsys, str(config), *argv)
    assert code == 2 and out == ''
    assert err.startswith('mmrepro-check: error: ') and message in err and err.count('\n') == 1
