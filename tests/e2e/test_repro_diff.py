"""tools/repro_diff.py on real runs: changed data and config keys, divergence, plots."""
import functools
import glob
import hashlib
import json
import os
import os.path as osp
import re
import shutil
import textwrap

import pytest
import torch
from support.cli import PNG_SIGNATURE, run_main
from support.doc_examples import assert_shows
from support.repro_utils import TESTS, pythonpath, run_log, run_train, write_config

from mmrepro.checks.run_data import load_run
from mmrepro.cli.diff_plot import plot_losses, run_curves
from mmrepro.cli.repro_diff import SETTINGS_DIFFER, main
from mmrepro.cli.weights_digest import main as digest_main
from mmrepro.record.bundle import pack
from mmrepro.resume.checkpoint_io import safe_load

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
    """Work dirs ``base``, ``again`` (a rerun of it), ``short`` (it stopped after 2
    iterations), ``lr`` (lr 0.02), ``ann`` (one box of the first sample trained moved
    by one pixel) and ``threads`` (1 intra-op thread instead of 2)."""
    root = tmp_path_factory.mktemp('diff')
    data = str(root / 'data')
    shutil.copytree(data_root, data)
    config = write_config(str(root / 'cfg' / 'base.py'), 'retinanet', data, num_workers=0,
                          extra=TRACED)
    lr = write_config(str(root / 'cfg' / 'lr.py'), 'retinanet', data, num_workers=0,
                      extra=TRACED + 'optim_wrapper = dict(optimizer=dict(lr=0.02))\n')
    runs = {name: str(root / name) for name in ('base', 'again', 'short', 'lr', 'ann',
                                                'threads')}
    two = {'OMP_NUM_THREADS': '2'}  # fixed: the thread count changes CPU results
    run_train(config, runs['base'], env=two)
    run_train(config, runs['again'], env=two)
    run_train(config, runs['short'], '--cfg-options', 'train_cfg.max_iters=2', env=two)
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


_diff = functools.partial(run_main, main)


@pytest.mark.slow
def test_rerun_is_identical_in_everything_compared(diff_runs, capsys):
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['again'])
    assert code == 0
    assert 'run records: identical' in out
    assert 'traces: bit-identical over iterations 1..3 (3 traced): every loss, sample, ' \
        'gradient, weight and buffer' in out
    assert 'scalars logs: losses equal at every logged iteration in common (1..3, 3 ' \
        'logged)' in out
    assert 'weights: identical at iteration 3 (the final weights)' in out
    assert out.endswith('compared: 3 logged iterations, 3 traced iterations, final weights\n'
                        'verdict: the same samples in every traced iteration; bit-identical, '
                        'as expected (no setting that changes results differs)\n'), out


@pytest.mark.slow
def test_short_run_against_a_long_one_names_the_span(diff_runs, capsys):
    code, out, _ = _diff(capsys, diff_runs['short'], diff_runs['base'])
    assert 'weights: no iteration whose weights both runs know' in out
    assert out.endswith(
        'compared: 2 logged iterations, 2 traced iterations\n'
        'verdict: the same samples in every traced iteration; identical through iteration 2 '
        '(A stops there), although settings that can change training differ: the config '
        "(config.train_cfg.max_iters)\n  next: the config: train B with A's values: "
        '--cfg-options train_cfg.max_iters=2\n'), out
    assert code == SETTINGS_DIFFER == 4  # identical outcomes; a setting that can matter


def _sha256(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.slow
def test_two_checkpoints_compare_by_their_weights(diff_runs, capsys):
    base, again, lr, short = (osp.join(diff_runs[name], f'iter_{n}.pth') for name, n in (
        ('base', 3), ('again', 3), ('lr', 3), ('short', 2)))
    assert _sha256(base) != _sha256(again)  # other metadata: the files differ
    code, out, _ = _diff(capsys, base, again)
    assert code == 0
    assert 'weights: identical (at iteration 3)' in out
    assert out.endswith('compared: the weights of both checkpoints\nverdict: bit-identical, '
                        'as expected (no setting that changes results differs)\n'), out
    code, out, _ = _diff(capsys, base, lr)
    assert code == 1
    assert re.search(r'\nweights: differ \(at iteration 3\): A [0-9a-f]{12} vs B '
                     r'[0-9a-f]{12}\n', out), out
    assert 'verdict: the numbers differ from iteration 3\n  explained by (most likely ' \
        'first): the config (config.optim_wrapper.optimizer.lr)' in out
    code, out, _ = _diff(capsys, base, short)
    assert code == 1
    assert out.endswith('verdict: different weights, from different points of training (A at '
                        'iteration 3, B at iteration 2)\n  next: compare two checkpoints of '
                        'the same iteration, or the two work dirs (they compare at every '
                        'checkpoint both hold)\n'), out


@pytest.mark.slow
def test_weights_digest_is_recorded_logged_and_printed(diff_runs, capsys, tmp_path):
    """Equal for two bit-identical runs, whatever else their files hold, and printed for a
    checkpoint written without mmrepro."""
    digests = []
    for name in ('base', 'again'):
        (record,) = glob.glob(osp.join(diff_runs[name], '*', 'run_record.json'))
        with open(record) as f:
            weights = json.load(f)['weights']
        final = weights['final']
        assert final['iter'] == 3 and weights['checkpoints'] == {'3': final['sha256']}
        ckpt = safe_load(osp.join(diff_runs[name], 'iter_3.pth'))
        assert ckpt['meta']['weights_sha256'] == final['sha256']
        assert (f"mmrepro: weights sha256 after iteration 3: {final['sha256']} (state_dict; "
                'compare with mmrepro-digest CHECKPOINT)') in run_log(diff_runs[name])
        digests.append(final['sha256'])
    assert digests[0] == digests[1]
    lr = safe_load(osp.join(diff_runs['lr'], 'iter_3.pth'))['meta']['weights_sha256']
    assert lr != digests[0]
    plain, bare = str(tmp_path / 'plain.pth'), str(tmp_path / 'bare.pth')
    torch.save({'state_dict': ckpt['state_dict'], 'meta': {'note': 'no mmrepro'}}, plain)
    torch.save(ckpt['state_dict'], bare)
    assert digest_main([plain, bare]) == 0
    assert capsys.readouterr().out == (f'{digests[0]}  {plain}  (iteration unknown; '
                                       f'state_dict)\n{digests[0]}  {bare}  (iteration '
                                       'unknown; state dict)\n')


#: Seven iterations traced at the default interval (steps 1, 2 and 4), logged at each; the
#: neck turns nondeterministic after four (an op nondeterministic for some inputs only).
LATE = """
custom_imports = dict(imports=['mmrepro', 'support.nondeterministic_layer'],
                      allow_failed_imports=False)
model = dict(neck=dict(_delete_=True, type='NondeterministicNeck', start_after=4, scale=0.5,
                      neck=dict(
    type='FPN', in_channels=[16, 32, 64, 128], out_channels=64, start_level=1,
    add_extra_convs='on_input', num_outs=5)))
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=7, val_interval=100)
log_processor = dict(by_epoch=False)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=7))
custom_hooks = [dict(type='ReproducibilityHook')]
randomness = dict(warn_only=True)  # the noise calls put_, which deterministic mode refuses
"""


@pytest.mark.slow
@pytest.mark.full
def test_divergence_after_the_last_traced_iteration_is_not_identical(data_root, tmp_path,
                                                                     capsys):
    """Full tier, a second proof of a divergence found from the scalars logs, which CI's
    default run proves in ``test_without_traces_the_scalars_logs_give_the_divergence``."""
    config = write_config(str(tmp_path / 'cfg' / 'late.py'), 'retinanet', data_root,
                          num_workers=0, extra=LATE)
    env = {'PYTHONPATH': pythonpath(TESTS),
           'OMP_NUM_THREADS': '2'}
    a, b = str(tmp_path / 'a'), str(tmp_path / 'b')
    run_train(config, a, env=env)
    run_train(config, b, env=env)
    code, out, _ = _diff(capsys, a, b)
    assert code == 1
    assert 'traces: bit-identical over iterations 1..4 (3 traced): every loss, sample, ' \
        'gradient, weight and buffer' in out
    # The neck adds noise from its fifth training forward pass on. An untrained head
    # barely depends on its features, so the loss moves by a few ulps: the first logged
    # iteration that shows it is the fifth or, by chance, a later one.
    found = re.search(r'\nscalars logs: first logged iteration whose losses differ: (\d+), '
                      r'equal at iteration (\d+)\n', out)
    assert found, out
    first = int(found.group(1))
    assert 5 <= first <= 7 and int(found.group(2)) == first - 1
    assert re.search(r'\nweights: differ at iteration 7 \(the final weights\): A '
                     r'[0-9a-f]{12} vs B [0-9a-f]{12}\n', out), out
    assert out.endswith(
        'compared: 7 logged iterations, 3 traced iterations, final weights\n'
        'verdict: the same samples in every traced iteration; the numbers differ from '
        f'iteration {first}\n  bitwise equality expected: yes: nothing recorded that changes '
        'results differs, so an operation is nondeterministic or a setting is not recorded\n'
        f"  next: mmrepro-check CONFIG --iters {first}, on the run's config: it trains it "
        'twice and names the first module whose output, gradient or weight differs, and the '
        'nondeterministic operations met\n'), out
    assert_shows('repro-diff-late', out)  # docs/troubleshooting.md shows it


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
                        'data.annotations_sha256)\n  next: the data files (fingerprint): '
                        'train both on the same data files: those listed under data: above '
                        "differ (each run record holds every file's sha256)\n"), out
    assert_shows('repro-diff-data', out)  # docs/troubleshooting.md shows it


@pytest.mark.slow
def test_changed_lr_is_named_by_config_key(diff_runs, capsys):
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['lr'])
    assert code == 1
    assert '    optim_wrapper.optimizer.lr: 0.01 -> 0.02' in out
    assert '  data:' not in out  # the same data fingerprint
    # the same samples, and iteration 1 runs with equal weights; only the step differs
    assert '\ndata: identical samples in every traced iteration (1..3, 3)\n' in out
    assert re.search(r'\nverdict: the same samples in every traced iteration; the numbers '
                     r'differ from iteration 1; differs beyond rounding from step 1 \(distance '
                     r'\d+x the envelope\), largest weight difference in \S+ \(Conv2d\) '
                     r'\((\d+|\de\d)x the envelope\)\n', out), out
    assert out.endswith('\n  explained by (most likely first): the config '
                        '(config.optim_wrapper.optimizer.lr)\n  bitwise equality '
                        'expected: no, settings that change results differ\n  next: the '
                        "config: train B with A's values: --cfg-options "
                        'optim_wrapper.optimizer.lr=0.01\n'), out
    assert 'traces: first diverging iteration: 1' in out
    assert 'first difference: weight after the step of' in out
    assert_shows('repro-diff-lr', out)  # docs/troubleshooting.md shows it


@pytest.mark.slow
def test_thread_count_is_a_numeric_difference_within_rounding(diff_runs, capsys, tmp_path):
    """An environment difference: the same samples, other rounding, and why."""
    png = tmp_path / 'threads.png'
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['threads'], '--plot', str(png))
    assert code == 0, out  # equivalent within rounding passes; --bitwise fails it
    assert png.read_bytes()[:8] == PNG_SIGNATURE  # with the envelope's band and ratios
    assert re.search(r'\nverdict: the same samples in every traced iteration; the numbers '
                     r'differ from iteration 1; not bitwise, but equivalent within rounding '
                     r'\(distance \S+x the envelope at step [123]\)\n', out), out
    assert out.endswith(
        '  explained by (most likely first): the intra-op thread count '
        '(devices.torch_threads, env.OMP_NUM_THREADS)\n'
        '  bitwise equality expected: no, settings that change results differ\n'
        '  next: the intra-op thread count: pin the count in both configs: '
        "randomness.threads=2 (A's count), or set OMP_NUM_THREADS=2 before training\n"
        f'plot: {png}\n'), out
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['threads'], '--bitwise',
                         '--no-envelope')
    assert code == 1, out
    assert 'rounding envelope' not in out and 'equivalent' not in out


@pytest.mark.slow
def test_plot_is_a_png_with_both_curves(diff_runs, capsys, tmp_path):
    out_png = tmp_path / 'losses.png'
    code, out, _ = _diff(capsys, diff_runs['base'], diff_runs['lr'], '--plot', str(out_png),
                         '--no-envelope')  # the band: test_rounding.py, test_diff_plot.py
    assert code == 1 and f'plot: {out_png}' in out
    assert out_png.read_bytes()[:8] == PNG_SIGNATURE
    from matplotlib.image import imread
    image = imread(str(out_png))
    assert image.shape[0] > 100 and image.shape[1] > 100 and image[..., :3].std() > 0.05


@pytest.mark.slow
@pytest.mark.full
def test_a_resumed_work_dir_is_compared_whole(data_root, tmp_path, capsys):
    """Stopped after iteration 2 and resumed in the same work dir: both log dirs count.

    Full tier, a second proof of a resumed run's log dirs joined, which CI's default run
    proves in
    ``test_evaluation.py::test_resumed_two_rank_run_validates_as_the_uninterrupted_one``.
    """
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


@pytest.mark.slow
def test_a_teammates_run_with_other_workers_matches_the_bundle_exit_0(runs, tmp_path, capsys):
    """The baseline shared as a bundle (2 persistent workers), a run with no workers."""
    bundle = str(tmp_path / 'baseline.tar.gz')
    pack(runs.get('retinanet', 'base'), bundle)
    mine = runs.get('retinanet', 'nw0', num_workers=0, persistent=False)
    code, out, _ = _diff(capsys, bundle, mine)
    assert code == 0, out
    assert 'run records: identical (every setting that can change training)\n  cannot ' \
        'change training (information, not causes): 2 key(s): train_dataloader.num_workers ' \
        '2 -> 0, train_dataloader.persistent_workers True -> False\n' in out, out
    assert re.search(r'\nweights: identical at iterations [\d, ]+, 24 \(the final weights\)\n',
                     out), out
    assert out.endswith('verdict: the same samples in every traced iteration; bit-identical, '
                        'as expected (no setting that changes results differs)\n'), out


@pytest.mark.slow
def test_a_checks_own_run_matches_its_baseline_and_plots_alike(runs, base_checked, tmp_path,
                                                              capsys):
    """``mmrepro-check --against`` (the session's ``base_checked``) trains steps 1..8 traced
    at every step, with its own hooks and without validation; its work dir compared with
    the baseline is identical, and the plot draws both runs at every logged iteration."""
    baseline = runs.get('retinanet', 'base')
    check_dir, code, out = base_checked
    assert code == 0, out
    mine, png = osp.join(check_dir, 'against'), str(tmp_path / 'losses.png')
    code, out, _ = _diff(capsys, baseline, mine, '--plot', png)
    assert code == 0, out
    assert 'run records: identical (every setting that can change training)\n' in out, out
    (inert,) = [line for line in out.splitlines() if line.startswith('  cannot change')]
    assert inert.startswith('  cannot change training (information, not causes): 8 key(s): '
                            'default_hooks.checkpoint.interval 1 -> 1000000000, '), inert
    assert inert.endswith('; and default_hooks.checkpoint.save_best, '
                          'custom_hooks.0.trace_interval, custom_hooks.2.type, '
                          'custom_hooks.2.max_iters'), inert
    verdict = ('the same samples in every traced iteration; identical through iteration 8 '
               '(B stops there), as expected (no setting that changes results differs)')
    assert out.endswith(f'verdict: {verdict}\nplot: {png}\n'), out
    a, b = load_run('A', baseline), load_run('B', mine)
    drawn = plot_losses(run_curves(a.trace, a.scalars), run_curves(b.trace, b.scalars),
                        str(tmp_path / 'again.png'), verdict)
    assert list(drawn.lines['A logged'].get_xdata()) == list(range(1, 25))
    assert list(drawn.lines['B logged'].get_xdata()) == list(range(1, 9))
    assert list(drawn.lines['A traced'].get_xdata()) == [1, 2, 4, 8, 16]
    assert list(drawn.lines['B traced'].get_xdata()) == list(range(1, 9))
    assert list(drawn.lines['A logged'].get_ydata())[:8] == list(
        drawn.lines['B logged'].get_ydata())
    assert set(drawn.lines['|A - B| logged'].get_ydata()) == {0.0}
    assert drawn.title == textwrap.fill(verdict, 90)
