"""The ``randomness`` settings: their keys, defaults and validation.

:func:`validate_randomness` checks a config's ``randomness`` dict and fills in the
defaults; the Runner patch (:mod:`mmrepro.patches.runner_randomness`) keeps the result
on the run's :class:`~mmrepro.run.state.RunState`.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np
import torch

from ..determinism.cpu import check_cpu_isa

MAX_SEED = 2**32 - 1


#: Accepted keys of the ``randomness`` config dict, with their defaults.
RANDOMNESS_DEFAULTS: Dict[str, Any] = dict(
    seed=None,
    deterministic=False,
    diff_rank_seed=False,
    sample_seeding=True,
    keyed_cache=True,
    global_stream=True,
    global_batch=None,
    warn_only=False,
    strict=False,
    fill_uninitialized_memory=None,
    threads=None,
    cpu_isa=None,
)


_BOOL_KEYS = ('deterministic', 'diff_rank_seed', 'sample_seeding', 'keyed_cache',
              'global_stream', 'warn_only', 'strict')


def check_seed(seed: Any, key: str = 'randomness.seed') -> int:
    """Return ``seed`` if it is a valid seed, else raise.

    Args:
        seed: The value to check.
        key: Name of the setting, used in the error message.

    Returns:
        int: ``seed`` as a plain ``int``.

    Raises:
        TypeError: ``seed`` is not an int (``bool`` is rejected too).
        ValueError: ``seed`` is outside ``[0, 2**32 - 1]``.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(
            f'{key} must be an int in [0, {MAX_SEED}], got {seed!r} '
            f'({type(seed).__name__}). Set it to a whole number, e.g. '
            f'`randomness=dict(seed=42)` or `--seed 42`.')
    seed = int(seed)
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(
            f'{key} must be in [0, {MAX_SEED}] (2**32 - 1), got {seed}. '
            f'Pick a seed in that range, e.g. `{abs(seed) % (MAX_SEED + 1)}`.')
    return seed


def check_flag(value: Any, key: str) -> bool:
    """Return ``value`` if it is a bool, else raise a TypeError naming ``key``."""
    if not isinstance(value, bool):
        raise TypeError(
            f'{key} must be True or False, got {value!r} ({type(value).__name__}). '
            f'Write `{key.split(".")[-1]}=True` or `=False` in the config.')
    return value


def validate_randomness(randomness: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Validate a ``randomness`` config dict and fill in the defaults.

    Args:
        randomness: The ``randomness`` dict of a config (``None`` means empty).

    Returns:
        dict: A new dict with every key of :data:`RANDOMNESS_DEFAULTS`.

    Raises:
        TypeError: ``randomness`` is not a dict, or a value has the wrong type.
        ValueError: an unknown key, or a seed out of range.
    """
    if randomness is None:
        randomness = {}
    if not isinstance(randomness, Mapping):
        seed = randomness if isinstance(randomness, int) and not isinstance(
            randomness, bool) and 0 <= randomness <= MAX_SEED else 0
        raise TypeError(
            f'randomness must be a dict such as dict(seed=0, deterministic=True), got '
            f'{randomness!r} ({type(randomness).__name__}). Set its keys, e.g. '
            f'`--cfg-options randomness.seed={seed}` or `randomness = dict(seed={seed})` in '
            'the config.')
    unknown = sorted(set(randomness) - set(RANDOMNESS_DEFAULTS))
    if unknown:
        raise ValueError(
            f'Unknown key(s) {unknown} in `randomness`; accepted keys are '
            f'{sorted(RANDOMNESS_DEFAULTS)}. Check the spelling or remove them.')
    out = dict(RANDOMNESS_DEFAULTS)
    out.update(randomness)
    if out['seed'] is not None:
        out['seed'] = check_seed(out['seed'])
    for key in _BOOL_KEYS:
        check_flag(out[key], f'randomness.{key}')
    check_fill_uninitialized_memory(out['fill_uninitialized_memory'])
    check_threads(out['threads'])
    check_cpu_isa(out['cpu_isa'])
    check_positive(out['global_batch'], 'randomness.global_batch',
                   'samples per optimizer step over all ranks',
                   'Set e.g. `randomness=dict(global_batch=16)`, or remove the key to '
                   'accept any layout.')
    return out


def check_threads(value: Any, key: str = 'randomness.threads') -> None:
    """Raise unless ``value`` is None or a whole number >= 1 (intra-op threads).

    Raises:
        TypeError: not an int.
        ValueError: below 1.
    """
    check_positive(value, key, 'PyTorch intra-op threads per process',
                   'Set e.g. `randomness=dict(threads=1)`, or remove the key to keep '
                   'PyTorch\'s default (OMP_NUM_THREADS, else the number of cores).')


def check_positive(value: Any, key: str, meaning: str, fix: str) -> None:
    """Raise unless ``value`` is None or a whole number >= 1.

    Args:
        value: The value to check.
        key: Name of the setting, used in the error message.
        meaning: What the number counts, for the message.
        fix: How to set it, for the message.

    Raises:
        TypeError: not an int.
        ValueError: below 1.
    """
    if value is None:
        return
    message = f'{key} must be a whole number >= 1 ({meaning}), got {value!r}. {fix}'
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(message)
    if value < 1:
        raise ValueError(message)


def check_fill_uninitialized_memory(value: Optional[bool],
                                    key: str = 'randomness.fill_uninitialized_memory') -> None:
    """Raise unless ``value`` is None, or a bool this torch can apply.

    Raises:
        TypeError: not a bool.
        ValueError: torch < 2.2, which has no ``torch.utils.deterministic``.
    """
    if value is None:
        return
    check_flag(value, key)
    if not has_fill_uninitialized_memory():
        raise ValueError(
            f'{key}={value} needs torch >= 2.2 (torch.utils.deterministic), but torch '
            f'{torch.__version__} is installed. Remove the key to keep this torch\'s '
            'behaviour, or upgrade torch.')


def has_fill_uninitialized_memory() -> bool:
    """Whether this torch has ``torch.utils.deterministic.fill_uninitialized_memory``."""
    try:
        import torch.utils.deterministic as deterministic
    except ImportError:
        return False
    return hasattr(deterministic, 'fill_uninitialized_memory')
