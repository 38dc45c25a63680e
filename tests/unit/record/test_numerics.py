"""mmrepro.record.numerics: the CPU kernel set, libraries, GPUs and AMP dtype of a run."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from mmengine.optim import OptimWrapper, OptimWrapperDict
from support.repro_utils import REPO, pythonpath

from mmrepro.record.numerics import amp_record, cpu_record, gpu_record, library_record


def _cpu_record_in_child(**env) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ('ATEN_CPU_CAPABILITY',)}
    code = 'import json; from mmrepro.record.numerics import cpu_record; ' \
           'print(json.dumps(cpu_record()))'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, env={**clean, 'PYTHONPATH': pythonpath(REPO), **env})
    return json.loads(out.stdout)


def test_cpu_record_names_the_kernel_set_in_force():
    own = torch.backends.cpu.get_cpu_capability()
    assert cpu_record()['capability'] == own
    forced = _cpu_record_in_child(ATEN_CPU_CAPABILITY='default')
    # PyTorch's scalar kernels: what a teammate without AVX2 or AVX-512 runs (torch 2.1
    # calls them 'NO AVX').
    assert forced['capability'] in ('DEFAULT', 'NO AVX')
    assert forced['isa_env'] == {'ATEN_CPU_CAPABILITY': 'default'}
    assert _cpu_record_in_child()['isa_env'] == {}


@pytest.mark.skipif(not os.path.exists('/proc/cpuinfo'), reason='reads /proc/cpuinfo (Linux)')
def test_cpu_record_names_the_cpu_model():
    with open('/proc/cpuinfo') as f:
        model = next(line for line in f if line.startswith('model name')).split(':', 1)[1]
    record = cpu_record()
    assert record['model'] == model.strip() and record['model'] != record['machine']
    assert record['interop_threads'] == torch.get_num_interop_threads()


def test_library_record_reads_the_running_torch_build():
    libraries = library_record()
    if torch.backends.mkl.is_available():
        assert re.fullmatch(r'\d{4}\.\d+(-Product)?', libraries['mkl']), libraries
    if torch.backends.mkldnn.is_available():
        assert re.fullmatch(r'\d+\.\d+(\.\d+)?', libraries['onednn']), libraries
    if torch.distributed.is_nccl_available():
        assert re.fullmatch(r'\d+\.\d+\.\d+', libraries['nccl']), libraries
    else:
        assert libraries['nccl'] is None


def test_gpu_record_lists_capability_and_sms():
    record = gpu_record()
    if not torch.cuda.is_available():
        assert record == {'devices': []}
        return
    props = torch.cuda.get_device_properties(0)
    assert record['devices'][0]['capability'] == f'{props.major}.{props.minor}'
    assert record['devices'][0]['sm_count'] == props.multi_processor_count
    assert re.fullmatch(r'\d+\.\d+', record['cuda_driver_api'])


def test_amp_record_reads_the_wrapper_or_its_config():
    model = torch.nn.Linear(2, 2)
    plain = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    assert amp_record(plain) == {'enabled': False, 'dtype': None}
    assert amp_record(OptimWrapperDict(a=plain)) == {'enabled': False, 'dtype': None}
    assert amp_record(None) == {'enabled': False, 'dtype': None}
    # MMEngine builds AmpOptimWrapper only where CUDA (or NPU, MLU, MUSA) exists; before
    # it is built, a Runner holds its config.
    assert amp_record(dict(type='AmpOptimWrapper', dtype='bfloat16')) == {
        'enabled': True, 'dtype': 'bfloat16', 'wrapper': 'AmpOptimWrapper'}
    default = 'float16' if torch.cuda.is_available() else 'bfloat16'
    assert amp_record(dict(type='AmpOptimWrapper'))['dtype'] == default
    assert amp_record(dict(type='OptimWrapper'))['enabled'] is False
