"""Capture and restore the global RNG states of one process."""
from __future__ import annotations

import hashlib
import random
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from .keys import derive_bytes
from .numpy_state import KEY_BYTES, restore_numpy_state, save_numpy_state, seed_numpy


def seed_host_rngs(key: Tuple[int, ...]) -> None:
    """Seed python ``random``, numpy's global RNG and torch's CPU RNG from ``key``.

    The key's 128-bit BLAKE2b digest seeds python ``random`` (all of it) and torch
    (its low 64 bits); numpy's MT19937 gets a full 624-word key expanded from the digest
    with SHAKE-128. Only the CPU generator of torch is touched (``torch.manual_seed``
    would reseed every CUDA device too, which the main process's model draws from).
    """
    digest = derive_bytes(*key)
    random.seed(int.from_bytes(digest, 'little'))
    seed_numpy(hashlib.shake_128(digest).digest(KEY_BYTES))
    torch.default_generator.manual_seed(int.from_bytes(digest[:8], 'little'))


def get_host_states() -> Tuple[Any, Any, torch.Tensor]:
    """Return the states of python ``random``, numpy's global RNG and torch CPU."""
    return random.getstate(), save_numpy_state(), torch.default_generator.get_state()


def set_host_states(states: Tuple[Any, Any, torch.Tensor]) -> None:
    """Restore states returned by :func:`get_host_states`."""
    py_state, np_state, torch_state = states
    random.setstate(py_state)
    restore_numpy_state(np_state)
    torch.default_generator.set_state(torch_state)


class IsolatedHostRNGs:
    """Host RNG states of their own, swapped in for the duration of a ``with``.

    Code run inside (a sampler drawing from global ``np.random``, torch's
    ``RandomSampler`` drawing its seed from the global torch RNG) gets a stream
    seeded from ``key`` and leaves the process's own streams untouched.

    Args:
        key: The key the isolated streams are seeded from.
    """

    def __init__(self, key: Tuple[int, ...]) -> None:
        outer = get_host_states()
        seed_host_rngs(key)
        self._inner = get_host_states()
        set_host_states(outer)
        self._outer: Any = None

    def __enter__(self) -> IsolatedHostRNGs:
        self._outer = get_host_states()
        set_host_states(self._inner)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._inner = get_host_states()
        set_host_states(self._outer)


def capture_rng_state() -> Dict[str, Any]:
    """Every global RNG state of this process, in a ``weights_only``-loadable form.

    Returns:
        dict: ``python`` (the tuple from ``random.getstate``), ``numpy`` (the
        legacy state with its key as an int64 tensor), ``torch`` (CPU state) and
        ``cuda`` (a list holding the state of this process's current CUDA device;
        empty without CUDA). Other devices are not this rank's: under torchrun every
        rank sees all GPUs, under Slurm each sees one, and the same job must resume
        either way.
    """
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    cuda = ([torch.cuda.get_rng_state(torch.cuda.current_device()).cpu()]
            if torch.cuda.is_available() and torch.cuda.is_initialized() else [])
    return dict(
        python=random.getstate(),
        numpy=dict(name=name, key=torch.from_numpy(keys.astype(np.int64)), pos=int(pos),
                   has_gauss=int(has_gauss), gauss=float(gauss)),
        torch=torch.get_rng_state(),
        cuda=cuda,
    )


def restore_rng_state(state: Dict[str, Any]) -> None:
    """Restore a state from :func:`capture_rng_state` into this process.

    Every tensor is copied to the CPU first: ``Runner.resume`` loads checkpoints with
    ``map_location`` set to the current CUDA device, and RNG states are set from CPU
    byte tensors. The CUDA state goes to this process's current device.

    Raises:
        ValueError: the state holds CUDA states of several devices (written by
            an earlier mmrepro, which saved every visible device) and this process's
            device is not among them.
    """
    random.setstate(_as_python_state(state['python']))
    npst = state['numpy']
    np.random.set_state((npst['name'], _cpu(npst['key']).numpy().astype(np.uint32),
                         npst['pos'], npst['has_gauss'], npst['gauss']))
    torch.set_rng_state(_cpu(state['torch']))
    cuda = state.get('cuda') or []
    if not cuda or not torch.cuda.is_available():
        return
    device = torch.cuda.current_device()
    if len(cuda) > 1 and device >= len(cuda):
        raise ValueError(
            f'The checkpoint holds CUDA RNG states for {len(cuda)} device(s) (every '
            f'device its writer saw), none for this process\'s device cuda:{device}; '
            'resume with the CUDA_VISIBLE_DEVICES of the run that wrote it.')
    torch.cuda.set_rng_state(_cpu(cuda[device] if len(cuda) > 1 else cuda[0]), device)


def rng_state_problem(state: Any) -> Optional[str]:
    """What is wrong with a state from :func:`capture_rng_state` (None if nothing)."""
    if not (isinstance(state, dict) and isinstance(state.get('torch'), torch.Tensor)
            and isinstance(state.get('python'), (tuple, list))
            and isinstance(state.get('numpy'), dict)):
        return 'an RNG state lacks its python/numpy/torch entries'
    return None


class ProcessRNGs:
    """This process's global RNGs as a part of the resume state.

    ``state_dict`` is :func:`capture_rng_state`, ``load_state_dict`` is
    :func:`restore_rng_state`; the checkpoint holds one state per rank.
    """

    def state_dict(self) -> Dict[str, Any]:
        """Every global RNG state of this process (:func:`capture_rng_state`)."""
        return capture_rng_state()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict` (:func:`restore_rng_state`).

        Raises:
            ValueError: the state is malformed, or see :func:`restore_rng_state`.
        """
        problem = rng_state_problem(state)
        if problem:
            raise ValueError(f'mmrepro: cannot restore the RNG states: {problem}.')
        restore_rng_state(state)


def _cpu(tensor: Any) -> torch.Tensor:
    """A CPU copy of ``tensor`` (a no-op for CPU tensors)."""
    return torch.as_tensor(tensor).cpu()


def _as_python_state(state: Any) -> tuple:
    # A checkpoint round trip may turn the inner tuple into a list.
    version, internal, gauss = state
    return version, tuple(internal), gauss
