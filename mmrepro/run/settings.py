"""The ``randomness`` settings: their keys, defaults and validation.

:func:`parse_randomness` checks a config's ``randomness`` dict and fills in the
defaults, as a :class:`RunSettings`; ``ReproRunner.set_randomness``
(:mod:`mmrepro.runner.randomness`) keeps the result on the run's
:class:`~mmrepro.run.state.RunState`. :func:`validate_randomness` returns the same as a
plain dict.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import torch

from ..determinism.cpu import check_cpu_isa
from ..determinism.mode import has_fill_uninitialized_memory

MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class RunSettings:
    """A run's validated ``randomness`` settings (see docs/configuration.md).

    Built by :func:`parse_randomness`; :meth:`to_dict` gives the plain dict that run
    records, checkpoints and logs hold. Change a copy with :func:`dataclasses.replace`.

    Attributes:
        seed: An int in ``[0, 2**32 - 1]``; None: drawn once on rank 0 and broadcast.
        deterministic: cuDNN deterministic, benchmark off,
            ``torch.use_deterministic_algorithms(True)`` and deterministic cuBLAS.
        diff_rank_seed: Each rank gets ``seed + rank`` for its global RNGs and its own
            augmentation stream; the sampler order stays shared.
        sample_seeding: Per-sample seeding of the data pipeline; False keeps MMEngine's
            worker seeding.
        keyed_cache: ``CachedMosaic``/``CachedMixUp`` draw partners by key from the
            previous samples of the stream; False keeps MMDetection's per-worker caches.
        global_stream: One batch stream for every layout, each rank training on its
            slices; False: MMEngine's per-rank batching.
        global_batch: Samples per optimizer step over all ranks that the layout must
            give; None accepts any layout.
        warn_only: With ``deterministic``: PyTorch warns instead of raising on an op
            without a deterministic implementation.
        strict: Raise, instead of warning, on what mmrepro cannot make exact.
        fill_uninitialized_memory: With ``deterministic``:
            ``torch.utils.deterministic.fill_uninitialized_memory``; None keeps
            PyTorch's default.
        threads: PyTorch's intra-op threads per process; None keeps PyTorch's default.
        cpu_isa: A portable CPU mode (``'avx2'``, ``'avx512'`` or ``'default'``); None
            lets each CPU choose.
        verify_checkpoints: Refuse a checkpoint that does not match the digests saved
            in it (:mod:`mmrepro.resume.verification`); False loads it anyway, and the
            log and run record say so.
    """

    seed: Optional[int] = None
    deterministic: bool = False
    diff_rank_seed: bool = False
    sample_seeding: bool = True
    keyed_cache: bool = True
    global_stream: bool = True
    global_batch: Optional[int] = None
    warn_only: bool = False
    strict: bool = False
    fill_uninitialized_memory: Optional[bool] = None
    threads: Optional[int] = None
    cpu_isa: Optional[str] = None
    verify_checkpoints: bool = True

    def to_dict(self) -> Dict[str, Any]:
        """The settings as a plain dict, in the key order of :data:`RANDOMNESS_DEFAULTS`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: Accepted keys of the ``randomness`` config dict, with their defaults.
RANDOMNESS_DEFAULTS: Dict[str, Any] = RunSettings().to_dict()


_BOOL_KEYS = ('deterministic', 'diff_rank_seed', 'sample_seeding', 'keyed_cache',
              'global_stream', 'warn_only', 'strict', 'verify_checkpoints')


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
    """Validate a ``randomness`` config dict and fill in the defaults, as a plain dict.

    Args:
        randomness: The ``randomness`` dict of a config (``None`` means empty).

    Returns:
        dict: A new dict with every key of :data:`RANDOMNESS_DEFAULTS`
        (:meth:`RunSettings.to_dict` of :func:`parse_randomness`'s result).

    Raises:
        TypeError: ``randomness`` is not a dict, or a value has the wrong type.
        ValueError: an unknown key, or a seed out of range.
    """
    return parse_randomness(randomness).to_dict()


def parse_randomness(randomness: Optional[Mapping[str, Any]]) -> RunSettings:
    """Validate a ``randomness`` config dict and fill in the defaults.

    Args:
        randomness: The ``randomness`` dict of a config (``None`` means empty).

    Returns:
        RunSettings: Every key of :data:`RANDOMNESS_DEFAULTS`, validated.

    Raises:
        TypeError: ``randomness`` is not a dict, or a value has the wrong type.
        ValueError: an unknown key (the closest accepted key suggested, see
            :func:`unknown_keys_message`), or a seed out of range.
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
        raise ValueError(unknown_keys_message(unknown))
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
    return RunSettings(**out)


def unknown_keys_message(unknown: List[str]) -> str:
    """The one line for keys of ``randomness`` that are not accepted keys.

    Each key close to an accepted one (:func:`difflib.get_close_matches`) gets that key
    suggested; where none is close, the line says so and lists the accepted keys.

    Args:
        unknown: The unknown keys, sorted.
    """
    accepted = sorted(RANDOMNESS_DEFAULTS)
    close = {key: difflib.get_close_matches(str(key), accepted, n=1) for key in unknown}
    head = f'Unknown key(s) {unknown} in `randomness`'
    far = [key for key in unknown if not close[key]]
    if len(far) == len(unknown):
        return (f'{head}, and no accepted key is close; accepted keys are {accepted}. '
                'Check the spelling or remove them.')
    if len(unknown) == 1:
        key, guess = unknown[0], close[unknown[0]][0]
        return (f'{head}: did you mean {guess!r}? Rename randomness.{key} to '
                f'randomness.{guess} (in the config or --cfg-options), or remove it.')
    guesses = ', '.join(f'{close[key][0]!r} for {key!r}' for key in unknown if close[key])
    nothing_close = (f' No accepted key is close to {far}; accepted keys are {accepted}.'
                     if far else '')
    return f'{head}: did you mean {guesses}?{nothing_close} Fix the spelling or remove them.'


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
