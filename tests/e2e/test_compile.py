"""MMEngine's ``compile`` under mmrepro, through tools/train.py and the tools.

A plain MMEngine classifier that compiles in seconds (``support/tiny_classifier.py``: its
data draw a flip and noise per sample, its model dropout, and BatchNorm keeps statistics),
compiled with ``aot_eager`` (eager's kernels) and with inductor (generated C++ kernels).
``mmrepro-check`` trains the ``aot_eager`` config four times (a rerun, a resume from
mid-epoch, which compiles again, and ``num_workers=0``) and finds every traced iteration
bit-identical; ``--against`` reproduces that run, ``mmrepro-test`` tests its checkpoint;
inductor resumes exactly, 2 ranks resume exactly; the run record says it compiled and
with what; ``mmrepro-diff`` names the compile setting first against an eager run, with
the rounding verdict where the numbers differ. Each run is made once for the module.
Real detectors and segmenters compile for minutes on 2 cores:
``tests/e2e/test_compile_models.py``.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os.path as osp

import pytest
from support.cli import run_main
from support.dist_utils import dist_train
from support.repro_utils import (
    TESTS,
    atomics,
    checkpoint,
    losses,
    pythonpath,
    run_log,
    run_train,
    state_digest,
    train_log,
)
from support.tiny_classifier import config_text

from mmrepro.record.run_record import find_log_dir, load_run_record
from mmrepro.trace import TRACE_NAME, read_trace

pytestmark = pytest.mark.slow

AOT_EAGER = "compile = dict(backend='aot_eager')"
INDUCTOR = 'compile = True'
#: The config's hooks without the trace.
UNTRACED = """custom_hooks = [dict(type='ReproducibilityHook', trace_interval=0),
                dict(type='CheckpointHook', by_epoch=False, interval=2, save_last=False)]"""


class CompiledRuns:
    """The module's runs of the tiny classifier, each made once, by tag."""

    def __init__(self, root: str) -> None:
        self.root, self._done = root, {}

    def config(self, tag: str, **options) -> str:
        path = osp.join(self.root, f'{tag}.py')
        with open(path, 'w') as f:
            f.write(config_text(**options))
        return path

    def get(self, tag: str, *args: str, **options) -> str:
        """Train ``tag`` (tools/train.py, ``args``) with ``config_text(**options)``."""
        if tag not in self._done:
            work_dir = osp.join(self.root, tag)
            run_train(self.config(tag, **options), work_dir, *args,
                      env={'PYTHONPATH': pythonpath(TESTS)})
            self._done[tag] = work_dir
        return self._done[tag]

    def eager(self) -> str:
        """The tiny classifier trained eagerly."""
        return self.get('eager', compile_line='')

    def inductor(self) -> str:
        """The tiny classifier compiled with inductor."""
        return self.get('inductor', compile_line=INDUCTOR)


@pytest.fixture(scope='module')
def compiled(tmp_path_factory) -> CompiledRuns:
    return CompiledRuns(str(tmp_path_factory.mktemp('compiled')))


@pytest.fixture(scope='module')
def checked(compiled, tmp_path_factory):
    """``mmrepro-check`` of the aot_eager config: its status, output and reference run."""
    from mmrepro.cli.check_repro import main as check_main
    work = str(tmp_path_factory.mktemp('check'))
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(
            io.StringIO()) as out:
        patch.setenv('PYTHONPATH', pythonpath(TESTS))  # the check's trainings import it
        code = check_main([compiled.config('aot', compile_line=AOT_EAGER), '--iters', '4',
                           '--resume-check', '--workers-check', '0', '--keep-checkpoints',
                           '--work-dir', work])
    return code, out.getvalue(), osp.join(work, 'run_a')


def test_rerun_mid_epoch_resume_and_other_workers_are_bitwise(checked):
    """The check's four runs: iteration 2 of 4 is mid-epoch; the resumed one compiles again."""
    code, out, run_a = checked
    assert code == 0 and 'result: REPRODUCIBLE: 3 comparison(s) bit-identical' in out, out
    assert '  compile: train_step runs compiled (aot_eager): the trace holds no module ' \
        'outputs, so a difference is named by its first gradient or weight' in out
    resumed = open(osp.join(osp.dirname(run_a), 'resume.log')).read()
    assert 'mmrepro: resumed RNG states and data position' in resumed
    assert 'Model has been "compiled"' in resumed
    header, lines = read_trace(osp.join(find_log_dir(run_a), TRACE_NAME))
    assert [line['iter'] for line in lines] == [1, 2, 3, 4]  # all compared, all traced
    assert header['compiled'] is True and header['forward'] is False  # the check asked
    assert lines[0]['grad'] and lines[0]['step_grad'] and lines[0]['weight']


def test_the_record_says_compiled_and_with_what(checked, compiled):
    _, _, run_a = checked
    record, _ = load_run_record(run_a)
    section = record['compile']
    assert section['enabled'] is True and section['backend'] == 'aot_eager'
    assert section['mode'] == 'default' and 'inductor' not in section
    assert 'recompile_limit' in section['dynamo'] or 'cache_size_limit' in section['dynamo']
    assert 'compile' not in load_run_record(compiled.eager())[0]
    log = glob.glob(osp.join(run_a, '*', '*.log'))[0]
    assert "mmrepro: compile: backend aot_eager, mode default; mmrepro's hooks run outside " \
        'the compiled graphs and the trace records no module outputs' in open(log).read()


def test_against_and_the_test_tool_on_a_compiled_run(checked, compiled, tmp_path, capsys,
                                                     monkeypatch):
    from mmrepro.cli.check_repro import main as check_main
    from mmrepro.cli.test import main as test_main
    monkeypatch.setenv('PYTHONPATH', pythonpath(TESTS))
    _, _, run_a = checked
    config = compiled.config('aot', compile_line=AOT_EAGER)
    code, out, _ = run_main(check_main, capsys, config, '--against', run_a, '--iters', '2',
                            '--work-dir', str(tmp_path / 'against'))
    assert code == 0 and f'verdict: reproduces {run_a} bit for bit' in out, out
    metrics, out, _ = run_main(test_main, capsys, config, checkpoint(run_a), '--work-dir',
                               str(tmp_path / 'test'))
    assert set(metrics) == {'accuracy'} and 'mmrepro: test finished' in out, out
    record, _ = load_run_record(osp.join(find_log_dir(str(tmp_path / 'test'),
                                                      'test_record.json'), 'test_record.json'))
    assert record['run'] == 'test' and 'compile' not in record  # testing is not compiled


def test_eager_vs_compiled_diff_names_compile_first(checked, compiled, capsys):
    """aot_eager computes with eager's kernels: identical, though compiled."""
    from mmrepro.cli.repro_diff import main as diff_main
    _, _, run_a = checked
    code, out, _ = run_main(diff_main, capsys, compiled.eager(), run_a)
    assert code == 4, out
    verdict = next(line for line in out.splitlines() if line.startswith('verdict: '))
    assert 'although settings that can change training differ: compiled vs eager (' in verdict
    assert "  next: compiled vs eager: train B eagerly, as A: remove compile from B's config " \
        '(or --cfg-options compile=False)' in out


@pytest.mark.floor
def test_inductor_resume_is_bitwise_and_its_settings_are_recorded(compiled):
    import torch._inductor.config as config
    inductor = compiled.inductor()
    resumed = compiled.get('inductor-resumed', '--resume', checkpoint(inductor, 'iter_6.pth'),
                           compile_line=INDUCTOR, workers=0)
    assert state_digest(checkpoint(resumed)) == state_digest(checkpoint(inductor))
    assert losses(train_log(resumed)) == losses(train_log(inductor))[6:]
    settings = load_run_record(inductor)[0]['compile']['inductor']
    assert settings['fallback_random'] is True
    assert settings.get('deterministic') is (True if hasattr(config, 'deterministic') else None)
    assert 'mmrepro: compile: inductor fallback_random=True' in run_log(inductor)


def test_the_trace_changes_nothing_a_compiled_run_computes(compiled):
    """Inductor with the trace (its hooks excluded from compilation, at steps 1, 2, 4 and
    8) and without it: the same weights, bit for bit, so no hook of mmrepro split a graph
    into kernels that round otherwise."""
    untraced = compiled.get('inductor-untraced', compile_line=INDUCTOR, extra=UNTRACED)
    assert state_digest(checkpoint(untraced)) == state_digest(checkpoint(compiled.inductor()))


def test_eager_vs_inductor_differ_by_rounding_and_compile_is_named(compiled, capsys,
                                                                    monkeypatch):
    from mmrepro.cli.repro_diff import main as diff_main
    monkeypatch.setenv('PYTHONPATH', pythonpath(TESTS))  # the envelope's runs import it
    code, out, _ = run_main(diff_main, capsys, compiled.eager(), compiled.inductor())
    lines = out.splitlines()
    verdict = next(line for line in lines if line.startswith('verdict: '))
    assert 'the numbers differ from iteration 1' in verdict, out
    assert 'rounding' in verdict.split('; ', 2)[2], out
    explained = next(line for line in lines if line.startswith('  explained by'))
    assert explained.startswith('  explained by (most likely first): compiled vs eager ('), out


def test_inductors_accumulating_index_put_uses_no_atomics_in_deterministic_mode():
    """In deterministic mode inductor's accumulating ``index_put`` (embedding backward,
    ``index_add``) is eager's deterministic kernel; without it, ``atomic_add``.

    Not marked ``floor``: the floor's minute of compiled tests in CI goes to the inductor
    resume above; torch 2.1.2 passed this too (40 s on a loaded machine), and the cuda
    tier checks it on the GPU (``tests/cuda/test_compile_cuda.py``)."""
    assert atomics('cpu') == ['deterministic', 'False', 'default', 'True']


@pytest.mark.full
def test_two_ranks_compiled_resume_mid_epoch_exactly(compiled, tmp_path):
    """Global batch 8 on 2 ranks of 4: 4 iterations per epoch, iteration 6 mid-epoch.

    Full tier, a second proof of 2 ranks, which CI's default run proves in
    ``test_distributed.py`` (eager); compiled resume:
    ``test_inductor_resume_is_bitwise_and_its_settings_are_recorded`` and the check's
    resumed run.
    """
    config = compiled.config('dist', compile_line=AOT_EAGER, workers=1, batch=4)
    base = str(tmp_path / 'dist')
    assert 'Model has been "compiled"' in dist_train(config, base)
    resumed = str(tmp_path / 'dist-resumed')
    dist_train(config, resumed, '--resume', checkpoint(base, 'iter_6.pth'))
    assert state_digest(checkpoint(resumed)) == state_digest(checkpoint(base))
    assert load_run_record(base)[0]['world_size'] == 2
