"""Fast save, restore and seeding of numpy's legacy global RNG (``np.random.*``).

numpy's public ``get_state``/``set_state`` copy the 624-word MT19937 key one element
at a time in Python, and ``np.random.seed`` with an array checks it with several numpy
operations (costs in ``benchmarks/results/sample_seeding_cpu.md``). Per-sample seeding
reseeds this RNG for every sample and, in the main process, saves and restores it
around every batch, so mmrepro reads and writes the state directly:

* the MT19937 key and position through ``MT19937.ctypes.state_address`` (numpy's
  public ctypes interface to the bit generator's C state, 624 uint32 words and an int);
* the Box-Muller cache (``has_gauss``, ``gauss``) that the legacy ``RandomState`` keeps
  beside it. numpy has no cheap accessor for it, so :func:`_locate_gauss_cache` finds
  it once, at import, by writing known values through ``set_state`` and searching the
  object's own memory (``type.__basicsize__`` bytes), then verifies reads and writes
  through the public API both ways.

When the probe does not verify (a numpy with another layout), every operation falls
back to the public API and gives the same states, only slower.

Why not the public API alone: per-sample seeding then cost 53 us per sample instead of
29-32 us, and 231 us per batch instead of 34-40 us to save and restore the main
process's states (``benchmarks/results/sample_seeding_cpu.md``); numpy offers no cheaper
public route to the same state. The probe is explicit about what it assumes (the cache
lives in the ``RandomState`` object's own memory, as an ``int`` then a ``double``) and
proves each assumption through the public API before any state is written this way.
"""
from __future__ import annotations

import ctypes
import struct
from typing import Any, Optional, Tuple

import numpy as np

__all__ = ['KEY_BYTES', 'restore_numpy_state', 'save_numpy_state', 'seed_numpy']

#: Bytes of key material :func:`seed_numpy` takes (the 624 MT19937 words).
KEY_BYTES = 624 * 4
_STATE_BYTES = KEY_BYTES + 4  # key[624] then int pos, as in numpy's mt19937_state
_GAUSS = struct.Struct('<i4xd')  # int has_gauss, padding, double gauss


def _global() -> Any:
    return np.random.mtrand._rand


def _locate_gauss_cache(rs: Any) -> Optional[int]:
    """Offset of ``(has_gauss, gauss)`` inside ``rs``'s object, verified; else None."""
    size = type(rs).__basicsize__
    saved = rs.get_state()
    name, key, pos = saved[:3]
    try:
        probes = (1.0000000000000002e-300, -3.0000000000000004e+200)
        rs.set_state((name, key, pos, 1, probes[0]))
        raw = ctypes.string_at(id(rs), size)
        pattern = struct.pack('<d', probes[0])
        for start in range(8, size - 7, 8):
            if raw[start:start + 8] != pattern:
                continue
            offset = start - 8
            if _GAUSS.unpack_from(raw, offset) != (1, probes[0]):
                continue
            rs.set_state((name, key, pos, 0, probes[1]))  # public write, raw read
            if _GAUSS.unpack(ctypes.string_at(id(rs) + offset, _GAUSS.size)) != \
                    (0, probes[1]):
                continue
            ctypes.memmove(id(rs) + offset, _GAUSS.pack(1, probes[0]), _GAUSS.size)
            if tuple(rs.get_state()[3:]) == (1, probes[0]):  # raw write, public read
                return offset
        return None
    finally:
        rs.set_state(saved)


def _probe() -> Optional[Tuple[Any, int, int]]:
    """``(RandomState, state address, gauss-cache address)`` of the global RNG, or None."""
    try:
        rs = _global()
        bit_generator = rs._bit_generator
        if type(bit_generator).__name__ != 'MT19937':
            return None
        offset = _locate_gauss_cache(rs)
        if offset is None:
            return None
        address = int(bit_generator.ctypes.state_address)
        name, key, pos = rs.get_state()[:3]  # the key/pos layout, checked the same way
        if ctypes.string_at(address, _STATE_BYTES) != \
                key.astype('<u4').tobytes() + struct.pack('<i', pos):
            return None
        return rs, address, id(rs) + offset
    except Exception:  # any surprise: the public API is always correct
        return None


#: The probe's result; it holds the RandomState, so the addresses stay valid.
_FAST = _probe()


def _is_fast() -> bool:
    # numpy never replaces its global RandomState, but the check is cheap.
    return _FAST is not None and _FAST[0] is _global()


def _write(state: bytes, gauss: bytes) -> None:
    """Write the raw MT19937 state and the Gaussian cache (direct path only)."""
    with _FAST[0]._bit_generator.lock:
        ctypes.memmove(_FAST[1], state, _STATE_BYTES)
        ctypes.memmove(_FAST[2], gauss, _GAUSS.size)


def save_numpy_state() -> Any:
    """The global RNG's state (opaque; give it to :func:`restore_numpy_state`)."""
    if _is_fast():
        with _FAST[0]._bit_generator.lock:  # the lock numpy's own draws take
            return (ctypes.string_at(_FAST[1], _STATE_BYTES),
                    ctypes.string_at(_FAST[2], _GAUSS.size))
    return np.random.get_state()


def restore_numpy_state(state: Any) -> None:
    """Restore a state from :func:`save_numpy_state`."""
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], bytes):
        _write(state[0], state[1])
    else:
        np.random.set_state(state)


def seed_numpy(material: bytes) -> None:
    """Set the global RNG to the MT19937 key ``material`` (:data:`KEY_BYTES` bytes).

    The state is exactly ``np.random.set_state(('MT19937', key, 624, 0, 0.0))`` with
    ``key`` the little-endian uint32 words of ``material``: the first draw regenerates
    the whole table from the key (as after ``np.random.seed``) and no Gaussian is cached.
    """
    if len(material) != KEY_BYTES:
        raise ValueError(f'seed_numpy: expected {KEY_BYTES} bytes of key material, got '
                         f'{len(material)}.')
    if _is_fast():
        _write(material + struct.pack('<i', 624), _GAUSS.pack(0, 0.0))
    else:
        np.random.set_state(('MT19937', np.frombuffer(material, dtype='<u4'), 624, 0, 0.0))
