"""Rounding or real: runs that are not bitwise, judged against a measured envelope.

Real RetinaNet runs on the tiny COCO data. The baseline is the session's shared 3-epoch
run; rounding differences come from another CPU kernel set and thread count, a real one
from an lr 0.1 % higher (a neck scaled where no record looks: test_rounding_neck.py).
"""
import re

import pytest
from support.rounding import BEYOND, EQUIVALENT, check

from mmrepro.checks.envelope import THRESHOLD
from mmrepro.determinism import cpu

pytestmark = pytest.mark.slow


def _base_config(runs):
    runs.get('retinanet', 'base')
    return runs.config('retinanet', 'base')


@pytest.mark.skipif(cpu.capability() != 'AVX512', reason='needs a CPU whose default '
                    f'kernel set is AVX512 (here {cpu.capability()}), so that '
                    "randomness.cpu_isa='avx2' rounds otherwise")
@pytest.mark.full
def test_another_cpu_kernel_set_is_equivalent_within_rounding(runs, tmp_path, capsys):
    """Full tier, a second proof of a numeric cause judged within rounding, which CI's
    default run proves in
    ``test_repro_diff.py::test_thread_count_is_a_numeric_difference_within_rounding``."""
    baseline = runs.get('retinanet', 'base')
    code, out, _ = check(capsys, _base_config(runs), '--against', baseline, '--go-on',
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


def test_an_lr_higher_by_a_thousandth_is_never_equivalent(runs, tmp_path, capsys):
    """A real cause that changes no forward output at the first iteration, only the steps
    (the other real causes tested: the neck in test_rounding_neck.py, an lr twice as high in
    test_repro_diff.py; a loss weight 1 % higher is in benchmarks/bench_envelope.py)."""
    baseline = runs.get('retinanet', 'base')
    code, out, _ = check(capsys, _base_config(runs), '--against', baseline, '--go-on',
                         '--iters', '2', '--cfg-options', 'optim_wrapper.optimizer.lr=0.01001',
                         '--work-dir', str(tmp_path / 'check'))
    assert code == 1, out
    assert BEYOND.search(out), out
    assert 'not bitwise, but equivalent' not in out
