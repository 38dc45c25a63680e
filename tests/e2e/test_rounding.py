"""Rounding or real: runs that are not bitwise, judged against a measured envelope.

Real RetinaNet runs on the tiny COCO data. The baseline is the session's shared 3-epoch
run; rounding differences come from another CPU kernel set and thread count, real ones
from a neck scaled by 1 + 1e-3 in a module no record shows, and an lr 0.1 % higher.
"""
import functools
import os.path as osp
import re

import pytest
from support.cli import run_main
from support.repro_utils import pythonpath, run_train, write_config

from mmrepro.checks.envelope import THRESHOLD
from mmrepro.cli.check_repro import main as check_main
from mmrepro.cli.repro_diff import main as diff_main
from mmrepro.determinism import cpu

pytestmark = pytest.mark.slow

_check = functools.partial(run_main, check_main)
_diff = functools.partial(run_main, diff_main)
#: The verdict of a run within the envelope, with its distance and step.
EQUIVALENT = re.compile(r'not bitwise, but equivalent within rounding \(distance '
                        r'(\S+)x the envelope at step (\d+)\)')
#: The verdict of a run beyond it.
BEYOND = re.compile(r'differs beyond rounding from step (\d+) \(distance (\S+)x the '
                    r'envelope\), ([^;\n]*)')
#: A neck whose output is scaled by the factor a module beside it holds: the plugin
#: ``custom_imports`` names is recorded by digest, the module it imports is not.
PLUGIN = '''from mmdet.models.necks import FPN
from mmdet.registry import MODELS

from neck_scale import SCALE


@MODELS.register_module()
class ScaledFPN(FPN):
    def forward(self, inputs):
        return tuple(out * SCALE for out in super().forward(inputs))
'''


def _base_config(runs):
    runs.get('retinanet', 'base')
    return runs.config('retinanet', 'base')


@pytest.mark.skipif(cpu.capability() != 'AVX512', reason='needs a CPU whose default '
                    f'kernel set is AVX512 (here {cpu.capability()}), so that '
                    "randomness.cpu_isa='avx2' rounds otherwise")
def test_another_cpu_kernel_set_is_equivalent_within_rounding(runs, tmp_path, capsys):
    baseline = runs.get('retinanet', 'base')
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline, '--go-on',
                          '--iters', '4', '--cfg-options', 'randomness.cpu_isa=avx2',
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 0, out
    assert ('rounding envelope: optimizer steps 1..4 again here, every weight moved one ulp '
            'up or down first\n') in out
    table = out.split('(equivalent within rounding up to 1x):\n')[1].splitlines()
    assert table[0] == '  step          loss   gradients     weights'
    assert [int(row.split()[0]) for row in table[1:4]] == [1, 2, 4]
    assert re.fullmatch(r'  first iteration, forward outputs: at most \S+x the envelope '
                        r'\(.*; beyond 100x the computation differs\)', table[4]), table[4]
    found = EQUIVALENT.search(out)
    assert found, out
    assert float(found.group(1)) <= THRESHOLD
    assert ': numerics differ from iteration 1: first module ' in out


@pytest.fixture(scope='module')
def scaled(tmp_path_factory, data_root):
    """A baseline trained with the neck's factor 1.0, outside the work tree."""
    root = tmp_path_factory.mktemp('scaled')
    ext = root / 'ext'
    ext.mkdir()
    (ext / 'scaled_neck.py').write_text(PLUGIN)
    (ext / 'neck_scale.py').write_text('SCALE = 1.0\n')
    extra = ("custom_imports = dict(imports=['mmrepro', 'scaled_neck'], "
             "allow_failed_imports=False)\nmodel = dict(neck=dict(type='ScaledFPN'))\n")
    config = write_config(str(root / 'cfg' / 'retinanet.py'), 'retinanet', data_root, extra,
                          num_workers=0, max_epochs=1)
    baseline = str(root / 'baseline')
    run_train(config, baseline, env=dict(PYTHONPATH=pythonpath(str(ext))))
    return dict(ext=ext, config=config, baseline=baseline)


def test_a_neck_scaled_where_no_record_looks_differs_beyond_rounding(scaled, tmp_path, capsys,
                                                                     monkeypatch):
    (scaled['ext'] / 'neck_scale.py').write_text('SCALE = 1.0 + 1e-3\n')  # the teammate's
    monkeypatch.setenv('PYTHONPATH', pythonpath(str(scaled['ext'])))  # the runs'
    monkeypatch.syspath_prepend(str(scaled['ext']))  # the config, read here
    work = str(tmp_path / 'check')
    code, out, _ = _check(capsys, scaled['config'], '--against', scaled['baseline'],
                          '--iters', '2', '--work-dir', work)
    assert code == 1, out
    assert 'before training: nothing recorded differs from the baseline' in out
    found = BEYOND.search(out)
    assert found, out
    assert float(found.group(2)) > 10 * THRESHOLD
    assert found.group(1) == '1'  # before any step: the computation itself differs
    assert found.group(3) == ('first module neck (ScaledFPN): its forward output at the first '
                              'iteration'), found.group(3)
    assert 'not bitwise, but equivalent' not in out
    # the finished runs: the baseline and the check's own run
    code, out, _ = _diff(capsys, scaled['baseline'], osp.join(work, 'against'))
    assert code == 1, out
    found = BEYOND.search(out)
    assert found, out
    assert found.group(3).startswith('first module neck (ScaledFPN)'), found.group(3)
    assert "rounding envelope: A's config trained here through step 2, twice" in out
    assert 'not bitwise, but equivalent' not in out


def test_an_lr_higher_by_a_thousandth_is_never_equivalent(runs, tmp_path, capsys):
    """A real cause that changes no forward output at the first iteration, only the steps
    (the other real causes tested: the neck above, an lr twice as high in
    test_repro_diff.py; a loss weight 1 % higher is in benchmarks/bench_envelope.py)."""
    baseline = runs.get('retinanet', 'base')
    code, out, _ = _check(capsys, _base_config(runs), '--against', baseline, '--go-on',
                          '--iters', '2', '--cfg-options', 'optim_wrapper.optimizer.lr=0.01001',
                          '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out
    assert BEYOND.search(out), out
    assert 'not bitwise, but equivalent' not in out
