"""Collision-free seed derivation from structured keys.

Seeds are derived by hashing the whole key with BLAKE2b (a cryptographic hash, like
numpy's ``SeedSequence`` mixes its entropy, but an order of magnitude cheaper, which
matters once per sample). Neighbouring keys (seed 42 worker 1, seed 43 worker 0)
never collide the way additive formulas do.
"""
from __future__ import annotations

import hashlib
import struct
from typing import Tuple

import numpy as np

#: Domain tags keep seeds drawn for different purposes apart.
SAMPLE, WORKER, LOADER, SAMPLER, MODEL, OWNED = 1, 2, 3, 4, 5, 6


def derive_bytes(*key: int, size: int = 16) -> bytes:
    """Return ``size`` (at most 64) bytes derived from ``key`` (64-bit ints)."""
    packed = struct.pack(f'<{len(key)}q', *key)
    return hashlib.blake2b(packed, digest_size=size, person=b'mmrepro').digest()


def derive_words(*key: int, n_words: int = 4) -> np.ndarray:
    """Return ``n_words`` (at most 16) uint32 words derived from ``key`` (64-bit ints)."""
    return np.frombuffer(derive_bytes(*key, size=4 * n_words), dtype=np.uint32)


def derive_seed(*key: int) -> int:
    """Return a 64-bit seed derived from ``key`` (non-negative ints)."""
    lo, hi = derive_words(*key, n_words=2)
    return int(lo) | (int(hi) << 32)


def sample_key(seed: int, epoch: int, position: int, index: int,
               rank: int = -1) -> Tuple[int, ...]:
    """The key a sample's RNG seeds are derived from.

    Args:
        seed: The run's seed (the same on every rank).
        epoch: The sampler's epoch (0 for one infinite stream).
        position: Position of the sample in the epoch's global stream
            (``local_position * world_size + rank``), so repeated indices within
            an epoch (class-aware oversampling) still get their own seeds.
        index: The dataset index.
        rank: The rank when ``diff_rank_seed`` asks for per-rank streams, else -1.
    """
    key = (SAMPLE, seed, epoch, position, index)
    return key + (rank,) if rank >= 0 else key


def key_position(key: Tuple[int, ...]) -> int:
    """The stream position a :func:`sample_key` was made for."""
    return key[3]


def with_position(key: Tuple[int, ...], position: int, index: int) -> Tuple[int, ...]:
    """The key of the sample at ``position`` (dataset ``index``) of ``key``'s stream.

    Same seed, epoch and rank as ``key``: what :func:`sample_key` gave that sample.
    """
    return key[:3] + (position, index) + key[5:]
