"""tools/check_repro.py: passes a reproducible detector, names an injected nondeterminism,
calls no config reproducible whose real runs are not, and says what to do next.

The check runs in the test process (its ``main``, as its console script calls it); what it
trains runs in processes of their own, as in a user's check."""
import functools
import glob
import os.path as osp
import re

import pytest
from support.cli import run_main
from support.doc_examples import assert_shows
from support.repro_utils import RUN_CWD, TESTS, pythonpath, write_config

from mmrepro.cli.check_repro import main
from mmrepro.record.run_record import load_run_record

#: RetinaNet whose neck adds OS-seeded noise (tests/support/nondeterministic_layer.py).
NOISY_NECK = """
custom_imports = dict(imports=['mmrepro', 'support.nondeterministic_layer'],
                      allow_failed_imports=False)
model = dict(neck=dict(_delete_=True, type='NondeterministicNeck', neck=dict(
    type='FPN', in_channels=[16, 32, 64, 128], out_channels=64, start_level=1,
    add_extra_convs='on_input', num_outs=5)))
"""


@pytest.fixture
def check_repro(monkeypatch, capsys):
    """``check_repro(*args)``: mmrepro-check's ``main`` in this process, from the training
    runs' working directory, tests/ importable by its runs; ``(exit code, stdout, stderr)``."""
    monkeypatch.setenv('PYTHONPATH', pythonpath(TESTS))
    monkeypatch.chdir(RUN_CWD)
    return functools.partial(run_main, main, capsys)


@pytest.mark.slow
def test_reproducible_detector_passes_rerun_resume_and_workers_checks(data_root, tmp_path,
                                                                     check_repro):
    config = write_config(str(tmp_path / 'cfg' / 'retinanet.py'), 'retinanet', data_root,
                          num_workers=0)
    code, out, err = check_repro(config, '--iters', '3', '--resume-check', '--workers-check',
                                 '1', '--work-dir', str(tmp_path / 'check'))
    assert code == 0, out + err[-3000:]
    assert 'run_b vs run_a: bit-identical over iterations 1..3' in out
    assert 'resume vs run_a: bit-identical over iterations 2..3' in out  # from iter_1.pth
    assert 'workers1 vs run_a: bit-identical over iterations 1..3' in out
    assert 'PyTorch: none reported' in out
    assert 'real runs of this config' not in out  # seeded, deterministic, enables mmrepro
    # run_a, run_b, workers1: iterations 1, 2, 3; resume: 2, 3
    assert re.search(r'\ncheckpoints: removed 11 \(\d+\.\d MiB\) after comparing\n', out), out
    assert glob.glob(str(tmp_path / 'check' / '**' / '*.pth'), recursive=True) == []
    assert out.endswith('result: REPRODUCIBLE: 3 comparison(s) bit-identical\n'
                        f'next: train it as usual (mmrepro-train {config})\n')


@pytest.mark.slow
def test_injected_nondeterministic_module_is_named(data_root, tmp_path, check_repro):
    config = write_config(str(tmp_path / 'cfg' / 'noisy.py'), 'retinanet', data_root,
                          num_workers=0, extra=NOISY_NECK)
    code, out, err = check_repro(config, '--iters', '2', '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out + err[-3000:]
    assert 'run_b vs run_a: first diverging iteration: 1' in out
    assert 'first difference: forward output of neck.noise (UrandomNoise)' in out
    assert '\ndata: identical samples in every traced iteration (1..2, 2)\n' in out
    assert 'PyTorch: put_ (in run_a, run_b)' in out  # deterministic mode, warn_only
    assert 'mmcv ops: none nondeterministic on CUDA in the model' in out
    work = str(tmp_path / 'check')
    assert out.endswith(
        'result: NOT REPRODUCIBLE: run_b (rerun) diverges at iteration 1; PyTorch has no '
        'deterministic implementation of put_ (a real run stops there)\n'
        'next: run_b: forward output of neck.noise (UrandomNoise) differs with the same '
        'samples: it depends on something no seed reaches (a generator of its own, '
        'os.urandom, the clock), or runs an operation that is not deterministic; make it '
        f'deterministic; mmrepro-diff {work}/run_a {work}/run_b shows every difference\n'
        'next: replace put_ in the model with deterministic operations, or set '
        'randomness.warn_only=True to train with them (runs may then differ)\n')
    assert_shows('check-repro-noisy', out, counts_vary=True)  # docs/troubleshooting.md shows it


#: The test config without a seed (deterministic mode kept).
SEEDLESS = 'randomness = dict(_delete_=True, deterministic=True)\n'
#: A training iteration as the check reports it while it trains.
ITERATION = r'  iteration (\d)/2: loss (\d+\.\d+) \(\d+\.\d s\)'


@pytest.mark.slow
def test_a_seedless_config_is_not_reproducible_though_its_runs_agree(data_root, tmp_path,
                                                                     check_repro):
    """The check pins a seed to train; real runs each draw one. Also: progress per
    iteration, a previous check's work dir replaced, checkpoints removed once compared."""
    config = write_config(str(tmp_path / 'cfg' / 'seedless.py'), 'retinanet', data_root,
                          num_workers=0, extra=SEEDLESS)
    work = tmp_path / 'check'
    (work / 'run_a').mkdir(parents=True)  # a previous check's work dir
    (work / 'check_repro_config.py').write_text('')
    (work / 'run_a' / 'iter_8.pth').write_bytes(b'old')
    code, out, err = check_repro(config, '--iters', '2', '--work-dir', str(work))
    assert code == 1, out + err[-3000:]
    lines = out.splitlines()
    assert lines[:3] == [
        f'mmrepro-check: {config}: 2 iteration(s) per run, traced at every iteration; seed 0 '
        '(the config has none: the check pins it), deterministic=True',
        f"  replacing {work}: a previous check's runs (name another --work-dir to keep them)",
        f'  work dir: {work} (child config {work}/check_repro_config.py)']
    assert lines[3] == '[1/2] run_a (reference): iterations 1..2'
    assert lines[7] == '[2/2] run_b (rerun): iterations 1..2'
    progress = [re.fullmatch(ITERATION, line) for line in lines[4:6] + lines[8:10]]
    assert all(progress), lines[3:11]
    assert [m.group(1) for m in progress] == ['1', '2', '1', '2']
    assert [m.group(2) for m in progress[:2]] == [m.group(2) for m in progress[2:]]
    assert re.fullmatch(r'  done in \d+\.\d s', lines[6]) and lines[10].startswith('  done')
    assert not osp.exists(work / 'run_a' / 'iter_8.pth')  # replaced
    assert 'run_b vs run_a: bit-identical over iterations 1..2' in out
    assert ('\nreal runs of this config (what the check filled in or cannot show):\n'
            "  the config has no randomness.seed: the check trained with mmrepro-check's seed "
            '0, but every real run draws a new seed, so two real runs train on other samples '
            'and end with other weights\n'
            '    fix: set randomness.seed in the config, e.g. randomness = dict(seed=0, '
            'deterministic=True), or pass --seed 0 to mmrepro-train\n') in out
    assert re.search(r'\ncheckpoints: removed 2 \(\d+\.\d MiB\) after comparing\n', out)
    assert glob.glob(str(work / '**' / '*.pth'), recursive=True) == []
    assert out.endswith(
        'result: NOT REPRODUCIBLE: the config has no seed (every real run draws a new one); '
        'its 1 comparison(s) here are bit-identical\n'
        'next: set randomness.seed in the config, e.g. randomness = dict(seed=0, '
        'deterministic=True), or pass --seed 0 to mmrepro-train\n')
    assert 'REPRODUCIBLE:' not in out.replace('NOT REPRODUCIBLE:', '')


@pytest.mark.slow
@pytest.mark.full
def test_nondeterministic_mode_is_not_reproducible_though_its_runs_agree(data_root,
                                                                          tmp_path,
                                                                          check_repro):
    """Full tier, a second proof that runs which agree without being reproducible are never
    called so, which CI's default run proves in
    ``test_a_seedless_config_is_not_reproducible_though_its_runs_agree``."""
    config = write_config(str(tmp_path / 'cfg' / 'fast.py'), 'retinanet', data_root,
                          num_workers=0, extra='randomness = dict(_delete_=True, seed=0)\n')
    code, out, err = check_repro(config, '--iters', '1', '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out + err[-3000:]
    assert 'run_b vs run_a: bit-identical over iteration 1' in out
    assert ('nondeterministic operations: not reported (randomness.deterministic is False; '
            'pass --cfg-options randomness.deterministic=True to list them)') in out
    assert out.endswith(
        'result: NOT REPRODUCIBLE: randomness.deterministic is False; its 1 comparison(s) '
        'here are bit-identical\n'
        'next: set randomness.deterministic=True in the config (try it here with '
        '--cfg-options randomness.deterministic=True), or pass --deterministic to '
        'mmrepro-train\n')


@pytest.mark.slow
@pytest.mark.full
def test_a_config_without_mmrepro_is_reproducible_only_with_mmrepro_train(data_root,
                                                                          tmp_path,
                                                                          check_repro):
    """The check (like mmrepro-train) enables mmrepro; MMDetection's tools/train.py would
    not, so the result says which tool and how to enable it in the config.

    Full tier, a second proof that the check enables mmrepro as mmrepro-train does, which
    CI's default run proves in
    ``test_reproducible_detector_passes_rerun_resume_and_workers_checks``.
    """
    config = write_config(str(tmp_path / 'cfg' / 'plain.py'), 'retinanet', data_root,
                          num_workers=0, extra=WITHOUT_MMREPRO)
    code, out, err = check_repro(config, '--iters', '1', '--work-dir', str(tmp_path / 'check'))
    assert code == 0, out + err[-3000:]
    assert ("\n  the config does not enable mmrepro: the check trained it with mmrepro's "
            "tools/train.py (mmrepro-train), which adds it; MMDetection's tools/train.py "
            'trains it without mmrepro, not reproducibly across num_workers or resume\n') in out
    assert out.endswith(
        'result: REPRODUCIBLE when trained with mmrepro-train: 1 comparison(s) bit-identical\n'
        "next: add custom_imports = dict(imports=['mmrepro'], allow_failed_imports=False) to "
        'the config, or train it with mmrepro-train\n'
        f'next: train it as usual (mmrepro-train {config}); add --resume-check (resume) and '
        '--workers-check K (num_workers) to check more\n')


#: The test config with neither mmrepro's import nor its hook.
WITHOUT_MMREPRO = """custom_imports = dict(_delete_=True, imports=[], allow_failed_imports=False)
custom_hooks = [dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]
"""


@pytest.mark.slow
def test_a_diverging_resume_keeps_the_checkpoint_it_started_from(data_root, tmp_path,
                                                                 check_repro):
    config = write_config(str(tmp_path / 'cfg' / 'noisy.py'), 'retinanet', data_root,
                          num_workers=0, extra=NOISY_NECK)
    work = str(tmp_path / 'check')
    code, out, err = check_repro(config, '--iters', '2', '--resume-check', '--work-dir', work)
    assert code == 1, out + err[-3000:]
    assert re.search(r'\n\[3/3\] resume \(run_a resumed from iter_1\.pth\): iterations 2\.\.2\n'
                     r'  iteration 2/2: loss \d+\.\d+ \(\d+\.\d s\)\n  done in', out), out
    assert re.search(r'\ncheckpoints: removed 4 \(\d+\.\d MiB\) after comparing; kept '
                     r'run_a/iter_1\.pth, where the resume run starts, to reproduce its '
                     r'divergence\n', out), out
    ckpt = f'{work}/run_a/iter_1.pth'
    assert glob.glob(f'{work}/**/*.pth', recursive=True) == [ckpt]
    assert (f'\nnext: resume: forward output of neck.noise (UrandomNoise) differs with the '
            "same samples: it depends on state the checkpoint does not hold (a module's or "
            "hook's own counter, cache or generator), or runs an operation that is not "
            f'deterministic; make it deterministic; mmrepro-diff {work}/run_a {work}/resume '
            f'shows every difference; {ckpt} is kept to reproduce it: mmrepro-train '
            f'{work}/check_repro_config.py --work-dir DIR --resume {ckpt}\n') in out


@pytest.mark.slow
def test_failed_training_run_is_exit_2_with_its_log(tmp_path, capsys):
    config = write_config(str(tmp_path / 'bad.py'), 'retinanet', str(tmp_path / 'no_data'),
                          num_workers=0)
    assert main([config, '--iters', '1', '--work-dir', str(tmp_path / 'check')]) == 2
    err = capsys.readouterr().err
    assert "training run 'run_a' failed with exit code" in err
    assert osp.join(str(tmp_path / 'check'), 'run_a.log') in err


@pytest.mark.slow
def test_two_processes_pass(data_root, tmp_path, check_repro):
    """--launcher pytorch --nproc 2 (gloo on CPU): the demo passes."""
    config = write_config(str(tmp_path / 'cfg' / 'retinanet.py'), 'retinanet', data_root,
                          num_workers=0)
    code, out, err = check_repro(config, '--iters', '2', '--launcher', 'pytorch',
                                 '--nproc', '2', '--work-dir', str(tmp_path / 'check'))
    assert code == 0, out + err[-3000:]
    assert '  every run: 2 processes launched by torch.distributed.run' in out
    assert 'result: REPRODUCIBLE: 1 comparison(s) bit-identical' in out
    record, _ = load_run_record(str(tmp_path / 'check' / 'run_a'))
    assert record['world_size'] == 2 and record['backend'] == 'gloo'


@pytest.mark.slow
@pytest.mark.full
def test_two_processes_name_an_injected_module(data_root, tmp_path, check_repro):
    """Full tier: a second proof of what ``test_injected_nondeterministic_module_is_named``
    proves in one process (the same trace comparison names the module), on the launch
    ``test_two_processes_pass`` proves."""
    noisy = write_config(str(tmp_path / 'cfg' / 'noisy.py'), 'retinanet', data_root,
                         num_workers=0, extra=NOISY_NECK)
    code, out, err = check_repro(noisy, '--iters', '2', '--launcher', 'pytorch',
                                 '--nproc', '2', '--work-dir', str(tmp_path / 'noisy'))
    assert code == 1, out + err[-3000:]
    assert 'first difference: forward output of neck.noise (UrandomNoise)' in out
