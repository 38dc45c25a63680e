"""mmrepro.determinism.cpu: one CPU kernel set on every machine, set before the process starts."""
import os
import subprocess
import sys

import pytest
import torch
from support.repro_utils import REPO, pythonpath

from mmrepro.determinism import cpu
from mmrepro.run.settings import parse_randomness

#: Ops whose rounding follows the kernel set (PyTorch's log_softmax, MKL's matrix
#: product, oneDNN's convolution), one thread; and the kernel set.
PROBE = (
    'import sys, hashlib, torch\n'
    'from mmrepro.determinism import cpu\n'
    'from mmrepro.cli.train import reexec_with_environment\n'
    'if sys.argv[1] == "pin":\n'
    '    reexec_with_environment(cpu.environment("avx2"), sys.argv)\n'
    'cpu.check_process("avx2" if sys.argv[1] != "free" else None)\n'
    'torch.set_num_threads(1)\n'
    'g = torch.Generator().manual_seed(0)\n'
    'a, b = torch.randn(257, 513, generator=g), torch.randn(513, 129, generator=g)\n'
    'img, w = torch.randn(2, 16, 64, 64, generator=g), torch.randn(32, 16, 3, 3, generator=g)\n'
    'out = [a.log_softmax(1), a @ b, torch.nn.functional.conv2d(img, w)]\n'
    'print(cpu.capability(), *(hashlib.sha256(t.numpy().tobytes()).hexdigest()[:12]'
    ' for t in out))\n')
AVX2_CPU = cpu.capability() in ('AVX2', 'AVX512')


def test_bad_value_is_an_error_naming_the_choices():
    with pytest.raises(ValueError) as info:
        parse_randomness(dict(cpu_isa='AVX-2'))
    assert str(info.value) == (
        "randomness.cpu_isa must be one of ['avx2', 'avx512', 'default'] (the CPU kernel set "
        "every machine uses), got 'AVX-2'. Pick one that every machine of the team has, e.g. "
        "`randomness=dict(cpu_isa='avx2')`, or remove the key to let each CPU choose.")
    assert parse_randomness({}).cpu_isa is None


def test_a_process_started_without_the_environment_is_refused(monkeypatch):
    for name in cpu.CPU_ISA_ENV['avx2']:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError) as info:
        cpu.check_process('avx2')
    assert str(info.value) == (
        "randomness.cpu_isa='avx2', but ATEN_CPU_CAPABILITY, DNNL_MAX_CPU_ISA, MKL_CBWR not "
        'set so before the process started. Launch with `ATEN_CPU_CAPABILITY=avx2 '
        'DNNL_MAX_CPU_ISA=AVX2 MKL_CBWR=AVX2 python ...` (mmrepro-train and tools/train.py '
        'set them and restart themselves), or pick a set this CPU has.')


@pytest.mark.skipif(not AVX2_CPU, reason='needs an x86 CPU with AVX2 (PyTorch runs '
                    f'{cpu.capability()} kernels here)')
def test_pinned_process_computes_what_an_avx2_launch_computes(tmp_path):
    script = tmp_path / 'probe.py'
    script.write_text(PROBE)
    base = {k: v for k, v in os.environ.items() if k not in cpu.CPU_ISA_ENV['avx2']}
    base['PYTHONPATH'] = pythonpath(REPO)

    def run(mode, env):
        return subprocess.run([sys.executable, str(script), mode], env=env, check=True,
                              capture_output=True, text=True).stdout.split()

    pinned = run('pin', base)
    assert pinned[0] == 'AVX2'
    assert run('launched', {**base, **cpu.environment('avx2')}) == pinned
    free = run('free', base)
    assert free[0] == cpu.capability()
    if free[0] == 'AVX512':  # wider vectors add in another order: the pin changes bits
        # (which of PyTorch's, MKL's and oneDNN's kernels differ depends on the CPU model:
        # on some, MKL's AVX-512 matrix product gives the AVX2 bits)
        assert any(f != p for f, p in zip(free[1:], pinned[1:], strict=True)), (free, pinned)


def test_capability_is_torchs_own():
    assert cpu.capability() == torch.backends.cpu.get_cpu_capability()
