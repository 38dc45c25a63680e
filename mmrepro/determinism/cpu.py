"""The CPU's numerics: the facts that change its rounding, and a portable mode.

The facts that change the CPU's rounding are read here: the model, the kernel set
PyTorch dispatches to, the thread counts and the environment variables that choose
kernels (:func:`cpu_record`, the run record's ``numerics.cpu``). The run record's
``devices`` section reads the host's name and core count itself.

A portable CPU mode pins the instruction set PyTorch's CPU kernels use.

PyTorch picks its CPU kernels (``DEFAULT``, ``AVX2``, ``AVX512``) and oneDNN and MKL
pick theirs from the CPU they start on, and wider vectors add in another order: the
same run on an AVX-512 machine and on an AVX2 machine ends with different weights.
``randomness.cpu_isa`` names one set for every machine of a team. The choice is made
when a library first runs, so it is set through the environment before the process
starts:

- ``ATEN_CPU_CAPABILITY``: PyTorch's own kernels;
- ``DNNL_MAX_CPU_ISA``: oneDNN (convolutions on CPU);
- ``MKL_CBWR``: MKL's conditional numerical reproducibility (matrix products).

``mmrepro-train`` (``tools/train.py``) sets them and starts itself again; any other
launch (MMDetection's ``tools/train.py``, a script) gets an error from the Runner that
says what to set, when the process's kernels are not the ones asked for.
"""
from __future__ import annotations

import os
import platform
from typing import Any, Dict, Optional

import torch

#: The accepted values and the environment each needs.
CPU_ISA_ENV: Dict[str, Dict[str, str]] = {
    'default': dict(ATEN_CPU_CAPABILITY='default', DNNL_MAX_CPU_ISA='SSE41',
                    MKL_CBWR='COMPATIBLE'),
    'avx2': dict(ATEN_CPU_CAPABILITY='avx2', DNNL_MAX_CPU_ISA='AVX2', MKL_CBWR='AVX2'),
    'avx512': dict(ATEN_CPU_CAPABILITY='avx512', DNNL_MAX_CPU_ISA='AVX512_CORE',
                   MKL_CBWR='AVX512'),
}
#: Environment variables that choose CPU kernels (read by PyTorch, oneDNN and MKL at
#: start): those :data:`CPU_ISA_ENV` sets, and oneDNN's and MKL's other names.
ISA_ENV = ('ATEN_CPU_CAPABILITY', 'DNNL_MAX_CPU_ISA', 'ONEDNN_MAX_CPU_ISA',
           'MKL_ENABLE_INSTRUCTIONS', 'MKL_CBWR')
#: Environment variables that set the thread counts (which change CPU rounding).
THREAD_ENV = ('OMP_NUM_THREADS', 'MKL_NUM_THREADS')
#: ``torch.backends.cpu.get_cpu_capability()`` of each (torch 2.1 says ``NO AVX``).
_CAPABILITY = {'default': ('DEFAULT', 'NO AVX'), 'avx2': ('AVX2',), 'avx512': ('AVX512',)}


def check_cpu_isa(value: Any, key: str = 'randomness.cpu_isa') -> None:
    """Raise unless ``value`` is None or one of :data:`CPU_ISA_ENV`.

    Raises:
        ValueError: another value.
    """
    if value is None or (isinstance(value, str) and value in CPU_ISA_ENV):
        return
    raise ValueError(
        f'{key} must be one of {sorted(CPU_ISA_ENV)} (the CPU kernel set every machine '
        f'uses), got {value!r}. Pick one that every machine of the team has, e.g. '
        "`randomness=dict(cpu_isa='avx2')`, or remove the key to let each CPU choose.")


def environment(isa: Optional[str]) -> Dict[str, str]:
    """The environment variables ``isa`` needs (empty for None)."""
    return dict(CPU_ISA_ENV[isa]) if isa else {}


def capability() -> Optional[str]:
    """The kernel set PyTorch dispatches to in this process, where torch says."""
    getter = getattr(getattr(torch.backends, 'cpu', None), 'get_cpu_capability', None)
    return getter() if getter else None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else the platform's word)."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_record() -> Dict[str, Any]:
    """The CPU model, the kernel set PyTorch uses on it and the ISA variables.

    (The intra-op thread count is in the run record's ``devices``.)
    """
    return dict(model=cpu_model(), machine=platform.machine(), capability=capability(),
                interop_threads=torch.get_num_interop_threads(),
                isa_env={k: os.environ[k] for k in ISA_ENV if k in os.environ})


def check_process(isa: Optional[str], key: str = 'randomness.cpu_isa') -> None:
    """Raise unless this process runs ``isa``'s kernels with its environment set.

    Raises:
        RuntimeError: the kernel set or a variable differs, saying how to launch.
    """
    if not isa:
        return
    wanted = environment(isa)
    unset = {name: value for name, value in wanted.items() if os.environ.get(name) != value}
    running = capability()
    if not unset and (running is None or running in _CAPABILITY[isa]):
        return
    launch = ' '.join(f'{name}={value}' for name, value in wanted.items())
    if unset:
        why = f"{', '.join(sorted(unset))} not set so before the process started"
    else:  # set, but the CPU cannot run that set: PyTorch fell back
        why = f'PyTorch runs {running} kernels: this CPU lacks {isa}'
    raise RuntimeError(
        f'{key}={isa!r}, but {why}. Launch with `{launch} python ...` (mmrepro-train and '
        "tools/train.py set them and restart themselves), or pick a set this CPU has.")
