"""tools/repro_diff.py: names changed data and config keys, finds divergence, plots."""
import glob
import json
import os
import re
import shutil

import pytest
from doc_examples import assert_shows
from repro_utils import run_train, write_config

from mmrepro.cli.repro_diff import main, plot_losses

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
#: Three traced iterations, no validation.
TRACED = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=3, val_interval=100)
log_processor = dict(by_epoch=False)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=3))
custom_hooks = [dict(type='ReproducibilityHook', trace_interval=1)]
"""
#: An iteration loop's own sampler (a finite one is not resumed exactly: guarantees.md).
INFINITE = """
train_dataloader = dict(sampler=dict(_delete_=True, type='InfiniteSampler', shuffle=True))
"""


@pytest.fixture(scope='module')
def diff_runs(data_root, tmp_path_factory):
    """Work dirs ``base``, ``lr`` (lr 0.02), ``ann`` (one box of the first sample
    trained moved by one pixel) and ``threads`` (1 intra-op thread instead of 2)."""
    root = tmp_path_factory.mktemp('diff')
    data = str(root / 'data')
    shutil.copytree(data_root, data)
    config = write_config(str(root / 'cfg' / 'base.py'), 'retinanet', data, num_workers=0,
                          extra=TRACED)
    lr = write_config(str(root / 'cfg' / 'lr.py'), 'retinanet', data, num_workers=0,
                      extra=TRACED + 'optim_wrapper = dict(optimizer=dict(lr=0.02))\n')
    runs = {name: str(root / name) for name in ('base', 'lr', 'ann', 'threads')}
    two = {'OMP_NUM_THREADS': '2'}  # fixed: the thread count changes CPU results
    run_train(config, runs['base'], env=two)
    run_train(lr, runs['lr'], env=two)
    run_train(config, runs['threads'], env={'OMP_NUM_THREADS': '1'})
    ann_file = os.path.join(data, 'annotations', 'train.json')
    with open(ann_file) as f:
        annotations = json.load(f)
    # The first sample of the first batch, as base's trace names it: 'img_id=K digest'.
    with open(glob.glob(os.path.join(runs['base'], '*', 'trace.jsonl'))[0]) as f:
        first = json.loads(f.readlines()[1])['data']['0']
    image_id = int(first.split()[0].split('=')[1])
    next(a for a in annotations['annotations'] if a['image_id'] == image_id)['bbox'][0] += 1
    with open(ann_file, 'w') as f:
        json.dump(annotations, f)
    run_train(config, runs['ann'], env=two)  # the same config, on the changed annotations
    return runs


def _diff(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_same_run_is_identical(diff_runs, capsys):
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['base'])
    assert code == 0
    assert 'run records: identical' in out
    assert 'traces: bit-identical over iterations 1..3 (3 traced): every loss, sample, ' \
        'gradient, weight and buffer' in out
    assert out.endswith('verdict: the same samples in every traced iteration; bit-identical, '
                        'as expected (no setting that changes results differs)\n'), out


@pytest.mark.slow
def test_trace_of_another_version_compares_losses_only(diff_runs, capsys, tmp_path):
    old = str(tmp_path / 'old')
    shutil.copytree(diff_runs['base'], old)
    (trace,) = [os.path.join(d, f) for d, _, files in os.walk(old) for f in files
                if f == 'trace.jsonl']
    with open(trace) as f:
        rows = [json.loads(row) for row in f]
    rows[0]['version'] = 1
    rows[1]['grad'] = {name: '0' * 16 for name in rows[1]['grad']}  # other digests
    with open(trace, 'w') as f:
        f.writelines(json.dumps(row) + '\n' for row in rows)
    code, out, _ = _diff(capsys, diff_runs['base'], old)
    assert code == 0
    assert 'traces: trace versions differ (2 vs 1: written by different mmrepro versions, ' \
        'whose digests are not comparable); comparing loss values only' in out
    assert 'traces: bit-identical over iterations 1..3 (3 traced): every loss\n' in out


@pytest.mark.slow
def test_changed_annotation_is_a_data_difference(diff_runs, capsys):
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['ann'])
    assert code == 1
    assert 'data: 2 fingerprint value(s) differ: the training data differs' in out
    assert '    ann_files.annotations/train.json: ' in out
    assert '  config:' not in out  # the same config file: only the data differs
    assert 'traces: first diverging iteration: 1, of iterations 1..3 (3 traced)' in out
    assert '  first difference: data of sample 0 of the batch' in out
    assert re.search(r'\ndata: differ from iteration 1, sample 0 of the batch: '
                     r'A (img_id=\d+) [0-9a-f]{16} vs B \1 [0-9a-f]{16}\n', out), out
    assert out.endswith('verdict: the data differ from iteration 1\n  why: the data files '
                        '(fingerprint) (data.ann_files.annotations/train.json, '
                        'data.annotations_sha256)\n'), out
    assert_shows('repro-diff-data', out)  # docs/troubleshooting.md shows it


@pytest.mark.slow
def test_changed_lr_is_named_by_config_key(diff_runs, capsys):
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['lr'])
    assert code == 1
    assert '    optim_wrapper.optimizer.lr: 0.01 -> 0.02' in out
    assert '  data:' not in out  # the same data fingerprint
    # the same samples, and iteration 1 runs with equal weights; only the step differs
    assert '\ndata: identical samples in every traced iteration (1..3, 3)\n' in out
    assert out.endswith('verdict: the same samples in every traced iteration; the numbers '
                        'differ from iteration 1\n  explained by (most likely first): the '
                        'config (config.optim_wrapper.optimizer.lr)\n  bitwise equality '
                        'expected: no, settings that change results differ\n'), out
    assert 'traces: first diverging iteration: 1' in out
    assert 'first difference: weight after the step of' in out
    assert_shows('repro-diff-lr', out)  # docs/troubleshooting.md shows it


@pytest.mark.slow
def test_thread_count_is_a_numeric_difference(diff_runs, capsys):
    """An environment difference: the same samples, other rounding, and why."""
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['threads'])
    assert code == 1
    assert out.endswith(
        'verdict: the same samples in every traced iteration; the numbers differ from '
        'iteration 1\n'
        '  explained by (most likely first): the intra-op thread count '
        '(devices.torch_threads, env.OMP_NUM_THREADS)\n'
        '  bitwise equality expected: no, settings that change results differ\n'), out


@pytest.mark.slow
def test_plot_is_a_png_with_both_curves(diff_runs, capsys, tmp_path):
    out_png = tmp_path / 'losses.png'
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['lr'], '--plot', str(out_png))
    assert code == 1 and f'plot: {out_png}' in out
    assert out_png.read_bytes()[:8] == PNG_SIGNATURE
    from matplotlib.image import imread
    image = imread(str(out_png))
    assert image.shape[0] > 100 and image.shape[1] > 100 and image[..., :3].std() > 0.05


def test_plot_losses_draws_two_curves(tmp_path):
    out = tmp_path / 'p.png'
    lines = plot_losses([(1, 2.0), (2, 1.5), (3, 1.2)], [(1, 2.0), (2, 1.6), (3, 1.3)],
                        str(out), divergence=2)
    assert len(lines) == 2
    assert list(lines[1].get_xdata()) == [1, 2, 3] and lines[1].get_ydata()[2] == 1.3
    assert out.read_bytes()[:8] == PNG_SIGNATURE


# ------------------------------------------------- runs without traces, broken files
def _fake_run(root, losses, lr=0.01, trace=None, record=None):
    log_dir = root / '20260101_000000'
    (log_dir / 'vis_data').mkdir(parents=True)
    record = record if record is not None else json.dumps(dict(
        seed=0, world_size=1, versions=dict(torch='2.13.0'), config_sha256='0' * 64,
        config={'optim_wrapper.optimizer.lr': repr(lr)}))
    (log_dir / 'run_record.json').write_text(record)
    rows = [dict(lr=lr, loss=loss, loss_cls=loss / 2, iter=i + 1, step=i + 1)
            for i, loss in enumerate(losses)]
    (log_dir / 'vis_data' / 'scalars.json').write_text(
        ''.join(json.dumps(r) + '\n' for r in rows))
    if trace is not None:
        (log_dir / 'trace.jsonl').write_text(trace)
    return str(root)


def test_without_traces_the_scalars_logs_give_the_divergence(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5, 1.25, 1.0])
    b = _fake_run(tmp_path / 'b', [2.0, 1.5, 1.5, 1.0])
    code, out, _ = _diff(capsys, a, b, '--plot', str(tmp_path / 'p.png'))
    assert code == 1
    assert 'run records: identical' in out
    assert 'scalars logs: first logged iteration whose losses differ: 3, equal at ' \
        'iteration 2' in out
    assert 'loss 1.25 vs 1.5' in out
    assert (tmp_path / 'p.png').read_bytes()[:8] == PNG_SIGNATURE


def test_corrupted_record_is_exit_2_naming_the_file(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [1.0])
    b = _fake_run(tmp_path / 'b', [1.0], record='{"seed": 0, "world_size": 1, "vers')
    code, _, err = _diff(capsys, a, b)
    assert code == 2
    assert err.startswith('repro_diff: error: ')
    assert 'b/20260101_000000/run_record.json: not valid JSON' in err


def test_missing_record_is_exit_2(tmp_path, capsys):
    (tmp_path / 'empty').mkdir()
    code, _, err = _diff(capsys, _fake_run(tmp_path / 'a', [1.0]), str(tmp_path / 'empty'))
    assert code == 2 and 'empty: no run_record.json in it' in err
    code, _, err = _diff(capsys, str(tmp_path / 'nope'), str(tmp_path / 'empty'))
    assert code == 2 and 'nope: no such file or directory' in err


def test_corrupted_trace_is_exit_2_naming_the_line(tmp_path, capsys):
    header = json.dumps(dict(format='mmrepro-trace', version=1, modules={})) + '\n'
    a = _fake_run(tmp_path / 'a', [1.0], trace=header)
    b = _fake_run(tmp_path / 'b', [1.0], trace=header + '{"iter": 1, "los\n{}\n')
    code, _, err = _diff(capsys, a, b)
    assert code == 2 and 'trace.jsonl: line 2 is not valid JSON' in err


@pytest.mark.slow
def test_a_resumed_work_dir_is_compared_whole(data_root, tmp_path, capsys):
    """Stopped after iteration 2 and resumed in the same work dir: both log dirs count."""
    config = write_config(str(tmp_path / 'cfg' / 'resumable.py'), 'retinanet', data_root,
                          num_workers=0, extra=TRACED + 'default_hooks = dict(checkpoint='
                          'dict(interval=1))\n' + INFINITE)
    full, split = str(tmp_path / 'full'), str(tmp_path / 'split')
    run_train(config, full)
    run_train(config, split, '--cfg-options', 'train_cfg.max_iters=2')
    run_train(config, split, '--resume')
    assert main([full, split]) == 0
    out = capsys.readouterr().out
    assert out.count('a resumed run: 2 log dirs joined in iteration order') == 1
    assert ' (iterations 1-2), ' in out and ' (iterations 3-3)' in out
    assert 'run records: resume differ (a resumed run); not settings, left out' in out
    assert 'run records: identical' in out
    assert 'traces: bit-identical over iterations 1..3 (3 traced)' in out
