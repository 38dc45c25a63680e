"""mmrepro-check CONFIG --against BASELINE: a teammate's machine checked against a baseline.

Real RetinaNet runs on the tiny COCO data: the session's shared 3-epoch run (24 steps,
traced at the dense early steps 1, 2, 4, 8 and 16), a run on a private copy of the data,
and the 2-rank layout runs (``tests/support/layout_runs.py``).
"""
import functools
import glob
import json
import os.path as osp
import shutil

import pytest
from support.cli import run_main
from support.layout_runs import LayoutRuns
from support.repro_utils import REPO, checkpoint, pythonpath, run_train, write_config

from mmrepro.cli.check_repro import main as check_main
from mmrepro.record.bundle import pack
from mmrepro.record.run_record import load_run_record

pytestmark = pytest.mark.slow


_check = functools.partial(run_main, check_main)


def _base_config(runs):
    runs.get('retinanet', 'base')
    return osp.join(runs.root, 'retinanet-base-cfg', 'retinanet_base.py')


def test_the_same_config_here_reproduces_the_baseline(runs, tmp_path, capsys):
    baseline = runs.get('retinanet', 'base')
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline,
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 0, out
    assert ('before training: nothing recorded differs from the baseline (config, data, '
            'library versions, CPU/GPU numerics, layout)') in out, out
    assert (f'verdict: reproduces {baseline} bit for bit through iteration 8 (4 traced '
            'optimizer step(s): samples, losses, gradients and weights)') in out


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


def test_another_thread_count_is_named_as_numerics(runs, tmp_path, capsys, monkeypatch):
    baseline = runs.get('retinanet', 'base')
    threads = load_run_record(baseline)[0]['devices']['torch_threads']
    monkeypatch.setenv('OMP_NUM_THREADS', '1' if threads > 1 else '2')
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline, '--iters', '1',
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out
    other = 1 if threads > 1 else 2
    assert (f'  CPU/GPU numerics: the intra-op thread count: devices.torch_threads: {threads} '
            f'in the baseline, {other} here') in out
    assert 'verdict: numerics differ from iteration 1: first module ' in out
    assert (f'recorded causes: the intra-op thread count: devices.torch_threads: {threads} '
            f'in the baseline, {other} here') in out


def test_an_edited_annotation_file_is_named_before_and_after_training(data_root, tmp_path,
                                                                      capsys):
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
    assert not osp.exists(tmp_path / 'check'), 'nothing is trained or written'
    code, out, _ = _check(capsys, config, '--against', baseline, '--go-on',
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out
    assert 'verdict: data differs from iteration 1: sample 0 of the global batch (img_id=' in out
    assert ('because the data files (fingerprint): data.ann_files.annotations/train.json: '
            in out)


def test_two_ranks_and_one_process_accumulating_reproduce_each_other(tmp_path_factory,
                                                                     data_root, capsys,
                                                                     monkeypatch):
    """A 2 ranks x 2 baseline, checked from 1 process (accumulative_counts set to 2)."""
    layouts = LayoutRuns(str(tmp_path_factory.mktemp('against')), data_root, max_epochs=1)
    baseline = layouts.get('retinanet', '2x2')
    config = osp.join(layouts.root, 'cfg-retinanet-2x2', 'cfg.py')
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
    assert err == (f"check_repro: error: --against {old!r}: the baseline's trace has no "
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
    assert err.startswith('check_repro: error: ') and message in err and err.count('\n') == 1
