"""What a checkpoint's digests cover: computed when it is saved, checked when it is loaded.

**The weights digest** (``meta['weights_sha256']``): sha256 of every tensor of the
checkpoint's ``state_dict`` and, where an ``EMAHook`` saved one, its
``ema_state_dict``, each by name, dtype, shape and bytes, in sorted name order. The
``.pth`` files of two bit-identical runs differ (timestamps, paths, the message hub), so
their ``sha256sum`` differs too; equal weights digests mean equal weights, byte for byte.
``mmrepro-digest``, the run record's ``weights`` section and ``mmrepro-diff`` compare it.

**The part digests** (``meta['part_digests']``): one for each part a resume restores,
``weights`` (the digest above), ``optimizer``, ``param_schedulers``, ``mmrepro`` (the
RNG states, data position and preprocessor state of :mod:`.section`) and ``meta`` (only
the epoch, iteration and seed a resume continues from: the rest of ``meta``, where the
digests themselves live, says where and when it was saved), each with a CRC-32
of every entry (a tensor, a numpy array, a value, a list of plain values), which names
the first entry that differs when the part's digest does not match. A part is walked in
a fixed order: mappings by sorted key, lists and tuples by index (a tuple and a list of
the same values are the same: a checkpoint round trip may turn one into the other),
tensors and arrays by dtype, shape and bytes, other values by type and ``repr`` (numpy
scalars by dtype and bytes: their ``repr`` changed in numpy 2). The weights digest reads
every byte through sha256, the identity runs are compared by; the other parts need only
show that they are what was saved, so their digest is the sha256 of their entries'
names and CRC-32s, one pass of CRC-32 over their bytes (several times faster). CRC-32
catches every flipped bit and every burst of up to 32 bits in an entry.

:func:`seal` writes both into a checkpoint being saved, in one pass over each part's
bytes; :func:`check_parts` recomputes them for a loaded one (the weights' per-tensor
checksums only where their digest does not match). Files that hold neither (written without
mmrepro) or only the weights digest (written by an earlier mmrepro) load as before:
:func:`check_parts` reports what it could not check.
"""
from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np
import torch

#: The checkpoint sections the weights digest hashes, in this order.
SECTIONS = ('state_dict', 'ema_state_dict')
#: Where a checkpoint's weights digest goes: ``checkpoint['meta'][META_KEY]``.
META_KEY = 'weights_sha256'
#: Where its part digests go: ``checkpoint['meta'][PARTS_KEY]``.
PARTS_KEY = 'part_digests'
#: ``format`` of the part digests' record.
PARTS_FORMAT = 1
#: The part that stands for the weights (``state_dict`` and ``ema_state_dict``).
WEIGHTS = 'weights'
#: The checkpoint keys a resume restores besides the weights, each a part.
RESTORED = ('optimizer', 'param_schedulers', 'mmrepro', 'meta')
#: The entries of ``meta`` its part covers: where a resume continues, and the seed.
META_RESTORED = ('epoch', 'iter', 'seed')
#: Every part :func:`seal` digests, in the order they are checked.
PARTS = (WEIGHTS, *RESTORED)
#: Values hashed by type and ``repr`` (a list of them is one entry).
_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_ADDRESS = re.compile(r' at 0x[0-9a-fA-F]+')


class WeightsError(ValueError):
    """A file holds no weights that can be digested."""


@dataclass(frozen=True)
class PartDigest:
    """The digest of one part of a checkpoint.

    Attributes:
        sha256: The part's digest (hex).
        entries: ``{entry: CRC-32}`` in the order hashed (empty unless asked for); an
            entry is named as Python subscripts it, e.g. ``state_dict['fc.weight']``.
    """

    sha256: str
    entries: Dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PartCheck:
    """One part of a loaded checkpoint against the digest saved in it.

    Attributes:
        part: The part (:data:`PARTS`).
        expected: The digest saved with it; None: none was (it cannot be checked).
        found: Its digest now; None where it was not computed (no digest to compare)
            or the part is missing.
        first_difference: The first entry whose checksum differs, where the checkpoint
            holds per-entry checksums and one does.
    """

    part: str
    expected: Optional[str]
    found: Optional[str]
    first_difference: Optional[str] = None

    @property
    def differs(self) -> bool:
        """A digest was saved and the part does not match it (or is missing)."""
        return self.expected is not None and self.found != self.expected


class _Hasher:
    """One part's digest, fed in one pass over its entries.

    Args:
        streamed: The digest is the sha256 of every byte (the weights digest); else the
            sha256 of the entries' names and CRC-32s.
        entries: Keep a CRC-32 per entry (always computed where not ``streamed``).
    """

    def __init__(self, streamed: bool, entries: bool) -> None:
        self.streamed, self.keep = streamed, entries
        self.sha = hashlib.sha256()
        self.entries: Optional[Dict[str, int]] = {} if entries or not streamed else None

    def add(self, entry: str, head: bytes, data: Any = None) -> None:
        """Hash one entry: its ``head`` line and ``data`` (a buffer, or None)."""
        if self.streamed:
            self.sha.update(head)
            if data is not None:
                self.sha.update(data)
        if self.entries is not None:
            crc = zlib.crc32(head)
            crc = crc if data is None else zlib.crc32(data, crc)
            self.entries[entry] = crc
            if not self.streamed:
                self.sha.update(f'{entry}\0{crc:08x}\n'.encode())

    def result(self) -> PartDigest:
        return PartDigest(self.sha.hexdigest(), dict(self.entries or {}) if self.keep else {})


def _tensor_bytes(value: torch.Tensor) -> Tuple[torch.Tensor, Any]:
    """``(value on the CPU, contiguous; its bytes as a buffer or None when empty)``."""
    value = value.detach().to('cpu').contiguous()
    return value, value.reshape(-1).view(torch.uint8).numpy() if value.numel() else None


def _encode(name: str, value: Any) -> Tuple[bytes, Any]:
    """The weights digest's ``(head line, bytes)`` of one named value."""
    if not torch.is_tensor(value):
        return f'{name}\0{type(value).__name__}\0{value!r}\n'.encode(), None
    value, data = _tensor_bytes(value)
    return f'{name}\0{value.dtype}\0{tuple(value.shape)}\n'.encode(), data


def update_digest(digest: Any, name: str, value: Any) -> None:
    """Hash one named value: a tensor by name, dtype, shape and bytes; else its repr."""
    head, data = _encode(name, value)
    digest.update(head)
    if data is not None:
        digest.update(data)


def _weight_sections(checkpoint: Mapping[str, Any]) -> Dict[str, Mapping[str, Any]]:
    """``{section: state}`` the weights digest hashes.

    Raises:
        WeightsError: Neither a checkpoint with a ``state_dict`` nor a state dict.
    """
    if not isinstance(checkpoint, Mapping):
        raise WeightsError(f'holds a {type(checkpoint).__name__}, not a checkpoint or a '
                           'state dict')
    if isinstance(checkpoint.get('state_dict'), Mapping):
        return {k: checkpoint[k] for k in SECTIONS if isinstance(checkpoint.get(k), Mapping)}
    if checkpoint and all(torch.is_tensor(v) for v in checkpoint.values()):
        return {'state_dict': checkpoint}
    raise WeightsError('has no state_dict (keys: '
                       f'{", ".join(map(str, list(checkpoint)[:6])) or "none"})')


def weights_part(checkpoint: Mapping[str, Any], entries: bool = False) -> PartDigest:
    """The weights' digest (:func:`weights_digest`), with a CRC-32 per tensor if asked.

    Raises:
        WeightsError: Neither a checkpoint with a ``state_dict`` nor a state dict.
    """
    hasher = _Hasher(streamed=True, entries=entries)
    for section, state in _weight_sections(checkpoint).items():
        hasher.sha.update(f'[{section}]\n'.encode())
        for name in sorted(state, key=str):
            hasher.add(f'{section}[{str(name)!r}]', *_encode(str(name), state[name]))
    return hasher.result()


def weights_digest(checkpoint: Mapping[str, Any]) -> str:
    """sha256 (hex) of a checkpoint's weights, independent of its other content.

    Args:
        checkpoint: A loaded checkpoint (``state_dict`` and, if present,
            ``ema_state_dict`` are hashed) or a bare state dict (every value a tensor).

    Raises:
        WeightsError: Neither a checkpoint with a ``state_dict`` nor a state dict.
    """
    return weights_part(checkpoint).sha256


def section_names(checkpoint: Mapping[str, Any]) -> str:
    """``state_dict`` or ``state_dict + ema_state_dict``: what the digest covers."""
    if not isinstance(checkpoint.get('state_dict'), Mapping):
        return 'state dict'
    return ' + '.join(k for k in SECTIONS if isinstance(checkpoint.get(k), Mapping))


def tree_part(name: str, value: Any, entries: bool = False) -> PartDigest:
    """The digest of a nested value (the optimizer's state dict, the mmrepro section...).

    Args:
        name: The part's name, which begins every entry's name.
        value: What the checkpoint holds under it.
        entries: Also keep a CRC-32 per entry.
    """
    hasher = _Hasher(streamed=False, entries=entries)
    _walk(hasher, name, value)
    return hasher.result()


def _walk(hasher: _Hasher, entry: str, value: Any) -> None:
    """Hash ``value``, named ``entry``: containers entry by entry, anything else whole."""
    if isinstance(value, Mapping):
        if not value:
            hasher.add(entry, f'{entry}\0mapping\n'.encode())
        for key in sorted(value, key=str):
            _walk(hasher, f'{entry}[{key!r}]', value[key])
    elif isinstance(value, (list, tuple)) and not all(_plain(v) for v in value):
        for index, item in enumerate(value):
            _walk(hasher, f'{entry}[{index}]', item)
    else:
        hasher.add(entry, *_leaf(entry, value))


def _plain(value: Any) -> bool:
    """Hashed by type and ``repr`` (numpy scalars, some of which are Python floats, by
    dtype and bytes instead)."""
    return isinstance(value, _PLAIN) and not isinstance(value, np.generic)


def _leaf(entry: str, value: Any) -> Tuple[bytes, Any]:
    """``(head line, bytes)`` of one entry that is not walked into."""
    if torch.is_tensor(value):
        value, data = _tensor_bytes(value)
        return f'{entry}\0{value.dtype}\0{tuple(value.shape)}\n'.encode(), data
    if isinstance(value, np.ndarray) and value.dtype != object:
        array = np.ascontiguousarray(value)
        return (f'{entry}\0ndarray\0{array.dtype.str}\0{array.shape}\n'.encode(),
                array.reshape(-1).view(np.uint8) if array.size else None)
    if isinstance(value, np.generic):
        return f'{entry}\0{value.dtype.str}\n'.encode(), value.tobytes()
    if isinstance(value, (list, tuple)):  # plain values only: one entry
        text = ','.join(f'{type(v).__name__}:{v!r}' for v in value)
        return f'{entry}\0sequence\0{text}\n'.encode(), None
    if isinstance(value, (set, frozenset)):
        text = ','.join(sorted(f'{type(v).__name__}:{v!r}' for v in value))
        return f'{entry}\0set\0{text}\n'.encode(), None
    text = _ADDRESS.sub('', repr(value))  # an object's repr may name its address
    return f'{entry}\0{type(value).__name__}\0{text}\n'.encode(), None


def part_digests(checkpoint: Mapping[str, Any], parts: Iterable[str],
                 entries: bool = False) -> Dict[str, PartDigest]:
    """The digests of those ``parts`` the checkpoint holds.

    Raises:
        WeightsError: :data:`WEIGHTS` is asked for and it holds no weights.
    """
    out = {}
    for part in parts:
        if part == WEIGHTS:
            out[part] = weights_part(checkpoint, entries)
        elif part in checkpoint:
            out[part] = tree_part(part, _part_value(checkpoint, part), entries)
    return out


def _part_value(checkpoint: Mapping[str, Any], part: str) -> Any:
    """What a part digests: the checkpoint's value (``meta``: its restored entries)."""
    value = checkpoint[part]
    if part == 'meta' and isinstance(value, Mapping):
        return {key: value[key] for key in META_RESTORED if key in value}
    return value


def seal(checkpoint: Dict[str, Any]) -> str:
    """Digest what a resume restores into the meta of a checkpoint being saved.

    Writes ``meta['weights_sha256']`` and ``meta['part_digests']`` (every part of
    :data:`PARTS` the checkpoint holds, with its per-entry checksums).

    Returns:
        The weights digest.

    Raises:
        WeightsError: The checkpoint holds no weights.
    """
    digests = part_digests(checkpoint, PARTS, entries=True)
    meta = checkpoint.setdefault('meta', {})
    meta[META_KEY] = digests[WEIGHTS].sha256
    meta[PARTS_KEY] = dict(format=PARTS_FORMAT, parts={
        part: dict(sha256=digest.sha256, entries=digest.entries)
        for part, digest in digests.items()})
    return meta[META_KEY]


def saved_digests(checkpoint: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """``{part: {'sha256': ..., 'entries': {...}}}`` saved in a checkpoint's meta.

    A checkpoint with the weights digest alone (an earlier mmrepro) gives it for
    :data:`WEIGHTS`, without entries; one without digests gives ``{}``.
    """
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) else None
    if not isinstance(meta, Mapping):
        return {}
    record = meta.get(PARTS_KEY)
    parts = record.get('parts') if isinstance(record, Mapping) else None
    out = {part: dict(saved) for part, saved in (parts or {}).items()
           if isinstance(saved, Mapping) and isinstance(saved.get('sha256'), str)}
    if WEIGHTS not in out and isinstance(meta.get(META_KEY), str):
        out[WEIGHTS] = dict(sha256=meta[META_KEY])
    return out


def check_parts(checkpoint: Mapping[str, Any], parts: Iterable[str]) -> List[PartCheck]:
    """Recompute the digests of ``parts`` and compare them with those saved.

    A part neither held nor digested is left out; one held without a saved digest is
    reported with ``expected=None`` (not hashed); one digested but missing, with
    ``found=None``. Where a digest differs and the checkpoint holds per-entry
    checksums, the first entry that differs is named (the weights are walked again for
    theirs).
    """
    saved = saved_digests(checkpoint)
    out = []
    for part in parts:
        held = _holds(checkpoint, part)
        if part not in saved:
            if held:
                out.append(PartCheck(part, None, None))
            continue
        expected = saved[part]['sha256']
        if not held:
            out.append(PartCheck(part, expected, None))
            continue
        now = part_digests(checkpoint, [part], entries=part != WEIGHTS)[part]
        first = None
        entries = saved[part].get('entries')
        if now.sha256 != expected and isinstance(entries, Mapping) and entries:
            if part == WEIGHTS:
                now = part_digests(checkpoint, [part], entries=True)[part]
            first = first_difference(entries, now.entries)
        out.append(PartCheck(part, expected, now.sha256, first))
    return out


def _holds(checkpoint: Mapping[str, Any], part: str) -> bool:
    """Whether the checkpoint holds ``part`` (weights: a state dict to digest)."""
    if part != WEIGHTS:
        return part in checkpoint
    try:
        _weight_sections(checkpoint)
    except WeightsError:
        return False
    return True


def first_difference(expected: Mapping[str, Any], found: Mapping[str, int]) -> Optional[str]:
    """The first entry, in the order saved, whose checksum differs or that is missing;
    else the first entry found that was not saved; None when every checksum matches."""
    for entry, crc in expected.items():
        if found.get(entry) != crc:
            return entry
    return next((entry for entry in found if entry not in expected), None)
