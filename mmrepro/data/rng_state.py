"""Capture and restore the global RNG states of one process."""
from __future__ import annotations

import hashlib
import random
from typing import Any, Dict, Tuple

import numpy as np
import torch

from .numpy_state import KEY_BYTES, restore_numpy_state, save_numpy_state, seed_numpy
from .seeds import derive_bytes


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
        ``cuda`` (a list, one state per visible device; empty without CUDA).
    """
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return dict(
        python=random.getstate(),
        numpy=dict(name=name, key=torch.from_numpy(keys.astype(np.int64)), pos=int(pos),
                   has_gauss=int(has_gauss), gauss=float(gauss)),
        torch=torch.get_rng_state(),
        cuda=[s.cpu() for s in cuda],
    )


def restore_rng_state(state: Dict[str, Any]) -> None:
    """Restore a state from :func:`capture_rng_state` into this process.

    Raises:
        ValueError: the number of CUDA states differs from the visible devices.
    """
    random.setstate(_as_python_state(state['python']))
    npst = state['numpy']
    np.random.set_state((npst['name'], npst['key'].numpy().astype(np.uint32), npst['pos'],
                         npst['has_gauss'], npst['gauss']))
    torch.set_rng_state(state['torch'])
    cuda = state.get('cuda', [])
    if cuda and torch.cuda.is_available():
        if len(cuda) != torch.cuda.device_count():
            raise ValueError(
                f'The checkpoint holds CUDA RNG states for {len(cuda)} device(s) but '
                f'{torch.cuda.device_count()} are visible; resume with the same '
                'CUDA_VISIBLE_DEVICES as the run that wrote it.')
        torch.cuda.set_rng_state_all(cuda)


def _as_python_state(state: Any) -> tuple:
    # A checkpoint round trip may turn the inner tuple into a list.
    version, internal, gauss = state
    return version, tuple(internal), gauss
