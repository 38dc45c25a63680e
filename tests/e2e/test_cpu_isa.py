"""randomness.cpu_isa through tools/train.py: the CLI restarts itself with the kernel set."""
import glob
import json
import os.path as osp

import pytest
from support.repro_utils import run_log

from mmrepro.determinism import cpu

AVX2_CPU = cpu.capability() in ('AVX2', 'AVX512')


@pytest.mark.slow
@pytest.mark.skipif(not AVX2_CPU, reason='needs an x86 CPU with AVX2 (PyTorch runs '
                    f'{cpu.capability()} kernels here)')
def test_train_cli_restarts_itself_with_the_kernel_set(runs):
    work_dir = runs.get('retinanet', 'avx2', '--cfg-options', 'randomness.cpu_isa=avx2',
                        max_epochs=1)
    assert ', cpu_isa=avx2' in run_log(work_dir)
    record = glob.glob(osp.join(work_dir, '*', 'run_record.json'))
    with open(record[0]) as f:
        assert json.load(f)['numerics']['cpu']['capability'] == 'AVX2'
