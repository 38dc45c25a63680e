"""Hardware and library facts that change floating-point results.

Two runs with the same code, config and data can still round differently when the
kernels that run differ: the CPU kernel set PyTorch dispatches to (AVX2 or AVX-512),
the MKL and oneDNN builds, the GPU's architecture and SM count (cuBLAS picks its
algorithms by them), the driver, NCCL (its reduction order) and the autocast dtype.
:func:`numerics_record` gathers them cheaply (no subprocess, no GPU work) for the run
record, so that ``repro_diff`` can name them.
"""
from __future__ import annotations

import ctypes
import re
from typing import Any, Dict, List, Optional

import torch

from ..determinism.cpu import cpu_record

__all__ = ['amp_record', 'cpu_record', 'gpu_record', 'library_record', 'numerics_record']

#: Where Linux reports the loaded NVIDIA kernel driver.
NVIDIA_PROC = '/proc/driver/nvidia/version'


def _built_with(pattern: str, config: str) -> Optional[str]:
    match = re.search(pattern, config)
    return match.group(1) if match else None


def _nccl_version() -> Optional[str]:
    try:
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):  # a build without NCCL (CPU wheels)
        return None
    return '.'.join(map(str, version)) if isinstance(version, tuple) else str(version)


def library_record() -> Dict[str, Optional[str]]:
    """MKL, oneDNN and NCCL versions of the running PyTorch (None where absent)."""
    config = torch.__config__.show()  # PyTorch's build summary, read once
    return dict(mkl=_built_with(r'Math Kernel Library Version ([\w.\-]+)', config),
                onednn=_built_with(r'MKL-DNN v([\w.]+)', config), nccl=_nccl_version())


def _driver() -> Dict[str, Optional[str]]:
    """The NVIDIA kernel driver and the CUDA driver API version, where present."""
    kernel = None
    try:
        with open(NVIDIA_PROC) as f:
            found = re.search(r'Kernel Module\s+([\d.]+)', f.read())
            kernel = found.group(1) if found else None
    except OSError:
        pass
    api = None
    try:
        version = ctypes.c_int()
        if ctypes.CDLL('libcuda.so.1').cuDriverGetVersion(ctypes.byref(version)) == 0:
            api = f'{version.value // 1000}.{version.value % 1000 // 10}'
    except (OSError, AttributeError):
        pass
    return dict(kernel_driver=kernel, cuda_driver_api=api)


def gpu_record() -> Dict[str, Any]:
    """Every visible CUDA device's name, compute capability, SMs and memory; the driver."""
    if not torch.cuda.is_available():
        return dict(devices=[])
    devices: List[Dict[str, Any]] = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        devices.append(dict(name=props.name, capability=f'{props.major}.{props.minor}',
                            sm_count=props.multi_processor_count,
                            memory_mib=props.total_memory // 2**20))
    return dict(devices=devices, **_driver())


def _default_amp_dtype() -> torch.dtype:
    return torch.float16 if torch.cuda.is_available() else torch.bfloat16


def amp_record(optim_wrapper: Any) -> Dict[str, Any]:
    """Whether training autocasts, and to which dtype (the wrapper's, else autocast's).

    MMEngine's ``AmpOptimWrapper(dtype=None)`` autocasts to the device's default:
    float16 on CUDA, bfloat16 on CPU.
    """
    if isinstance(optim_wrapper, dict):  # not built yet: its config
        if 'Amp' not in str(optim_wrapper.get('type', '')):
            return dict(enabled=False, dtype=None)
        dtype = optim_wrapper.get('dtype')
        return dict(enabled=True, dtype=str(dtype or _default_amp_dtype()).replace(
            'torch.', ''), wrapper=str(optim_wrapper['type']))
    wrappers = (list(optim_wrapper.values()) if hasattr(optim_wrapper, 'values')
                else [optim_wrapper])
    amp = [w for w in wrappers if hasattr(w, 'cast_dtype')]
    if not amp:
        return dict(enabled=False, dtype=None)
    dtype = amp[0].cast_dtype or _default_amp_dtype()
    return dict(enabled=True, dtype=str(dtype).replace('torch.', ''),
                wrapper=type(amp[0]).__name__)


def numerics_record(optim_wrapper: Any = None) -> Dict[str, Any]:
    """:func:`cpu_record`, :func:`gpu_record`, :func:`library_record` and the AMP dtype."""
    return dict(cpu=cpu_record(), gpu=gpu_record(), libraries=library_record(),
                amp=amp_record(optim_wrapper))
