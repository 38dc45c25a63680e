"""tools/check_repro.py: passes a reproducible detector, names an injected nondeterminism."""
import os
import os.path as osp
import subprocess
import sys

import pytest
from support.doc_examples import assert_shows
from support.repro_utils import REPO, RUN_CWD, TESTS, pythonpath, write_config

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


def check_repro(*args: str) -> subprocess.CompletedProcess:
    """Run tools/check_repro.py with tests/ importable by the training runs."""
    path = pythonpath(TESTS)
    return subprocess.run([sys.executable, osp.join(REPO, 'tools', 'check_repro.py'), *args],
                          cwd=RUN_CWD, capture_output=True, text=True, timeout=900,
                          env={**os.environ, 'PYTHONPATH': path})


@pytest.mark.slow
def test_reproducible_detector_passes_rerun_resume_and_workers_checks(data_root, tmp_path):
    config = write_config(str(tmp_path / 'cfg' / 'retinanet.py'), 'retinanet', data_root,
                          num_workers=0)
    proc = check_repro(config, '--iters', '3', '--resume-check', '--workers-check', '1',
                       '--work-dir', str(tmp_path / 'check'))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    assert 'run_b vs run_a: bit-identical over iterations 1..3' in out
    assert 'resume vs run_a: bit-identical over iterations 2..3' in out  # from iter_1.pth
    assert 'workers1 vs run_a: bit-identical over iterations 1..3' in out
    assert 'PyTorch: none reported' in out
    assert 'result: REPRODUCIBLE: 3 comparison(s) bit-identical' in out


@pytest.mark.slow
def test_injected_nondeterministic_module_is_named(data_root, tmp_path):
    config = write_config(str(tmp_path / 'cfg' / 'noisy.py'), 'retinanet', data_root,
                          num_workers=0, extra=NOISY_NECK)
    proc = check_repro(config, '--iters', '2', '--work-dir', str(tmp_path / 'check'))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr[-3000:]
    assert 'run_b vs run_a: first diverging iteration: 1' in out
    assert 'first difference: forward output of neck.noise (UrandomNoise)' in out
    assert '\ndata: identical samples in every traced iteration (1..2, 2)\n' in out
    assert 'PyTorch: put_ (in run_a, run_b)' in out  # deterministic mode, warn_only
    assert 'mmcv ops: none nondeterministic on CUDA in the model' in out
    assert 'result: NOT REPRODUCIBLE: run_b (rerun) diverges at iteration 1' in out
    assert_shows('check-repro-noisy', out, counts_vary=True)  # docs/troubleshooting.md shows it


@pytest.mark.slow
def test_failed_training_run_is_exit_2_with_its_log(tmp_path, capsys):
    config = write_config(str(tmp_path / 'bad.py'), 'retinanet', str(tmp_path / 'no_data'),
                          num_workers=0)
    assert main([config, '--iters', '1', '--work-dir', str(tmp_path / 'check')]) == 2
    err = capsys.readouterr().err
    assert "training run 'run_a' failed with exit code" in err
    assert osp.join(str(tmp_path / 'check'), 'run_a.log') in err


@pytest.mark.slow
def test_two_processes_pass_and_an_injected_module_is_named(data_root, tmp_path):
    """--launcher pytorch --nproc 2 (gloo on CPU): the demo passes, a noisy neck fails."""
    config = write_config(str(tmp_path / 'cfg' / 'retinanet.py'), 'retinanet', data_root,
                          num_workers=0)
    proc = check_repro(config, '--iters', '2', '--launcher', 'pytorch', '--nproc', '2',
                       '--work-dir', str(tmp_path / 'check'))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert '  every run: 2 processes launched by torch.distributed.run' in proc.stdout
    assert 'result: REPRODUCIBLE: 1 comparison(s) bit-identical' in proc.stdout
    record, _ = load_run_record(str(tmp_path / 'check' / 'run_a'))
    assert record['world_size'] == 2 and record['backend'] == 'gloo'
    noisy = write_config(str(tmp_path / 'cfg' / 'noisy.py'), 'retinanet', data_root,
                         num_workers=0, extra=NOISY_NECK)
    proc = check_repro(noisy, '--iters', '2', '--launcher', 'pytorch', '--nproc', '2',
                       '--work-dir', str(tmp_path / 'noisy'))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert 'first difference: forward output of neck.noise (UrandomNoise)' in proc.stdout
