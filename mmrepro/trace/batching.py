"""Digests of nested outputs (tensors in tuples, dicts, data samples), in batches.

A digest is started on the device (:class:`_Pending`, :class:`_Batch`) and read back
with one transfer per device when a trace line is written (:func:`_resolve`).
"""
from __future__ import annotations

import weakref
import zlib
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from .digests import _MASK, _META_MULT, _bits_digest, _bits_digests, _meta, _row_multipliers


def _plain(value: Any) -> Optional[str]:
    """A deterministic text for a non-tensor leaf (None when it has none).

    Strings are left out: in model outputs they name things (e.g. image paths, which
    differ between machines without changing a single number).
    """
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, np.ndarray):
        return f'{value.dtype}{value.shape}{zlib.crc32(np.ascontiguousarray(value).tobytes())}'
    if isinstance(value, np.generic):
        return repr(value.item())
    return None


def _leaves(obj: Any, path: str, tensors: List[Tuple[str, Tensor]], texts: List[str],
            depth: int = 0) -> None:
    """Collect the tensors and plain values inside ``obj`` (nested containers)."""
    if isinstance(obj, Tensor):
        tensors.append((path, obj))
        return
    text = _plain(obj)
    if text is not None:
        texts.append(f'{path}={text}')
        return
    if depth > 8:
        texts.append(f'{path}:{type(obj).__name__}')
        return
    if isinstance(obj, Mapping):
        items: Iterable = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    elif hasattr(obj, 'all_items') and callable(obj.all_items):  # mmengine data elements
        items = obj.all_items()
    elif isinstance(getattr(obj, 'tensor', None), Tensor):  # mmdet boxes
        items = [('tensor', obj.tensor)]
    else:  # an object without a stable representation: only its type counts
        texts.append(f'{path}:{type(obj).__name__}')
        return
    texts.append(f'{path}:{type(obj).__name__}')
    if not isinstance(obj, (list, tuple)):  # key order may follow set iteration
        items = sorted(items, key=lambda item: str(item[0]))
    for key, value in items:
        _leaves(value, f'{path}.{key}', tensors, texts, depth + 1)


class _Pending(NamedTuple):
    """A digest whose tensor parts are computed but not yet read back.

    Attributes:
        parts: ``(bits digest (0-d int64 tensor), meta term)`` per tensor.
        const: Hash of the structure and plain values; None for a bare tensor.
    """

    parts: List[Tuple[Tensor, int]]
    const: Optional[int]


class _DigestCache:
    """Bits digests of the tensors seen in one iteration, while they are unmodified.

    Containers return their last child's output object, which need not be read twice.
    Entries hold weak references, so no activation is kept alive, and compare the
    tensor's version counter, so a tensor changed in place is digested again.
    """

    def __init__(self) -> None:
        self._entries: Dict[int, Tuple[Any, int, Tensor]] = {}

    def bits(self, tensor: Tensor) -> Tensor:
        """``_bits_digest(tensor)``, reading the tensor only if needed."""
        entry = self._entries.get(id(tensor))
        version = tensor._version
        if entry is not None and entry[0]() is tensor and entry[1] == version:
            return entry[2]
        value = _bits_digest(tensor)
        self._entries[id(tensor)] = (weakref.ref(tensor), version, value)
        return value

    def clear(self) -> None:
        """Forget every entry (at the end of an iteration)."""
        self._entries.clear()


def _pending(obj: Any, cache: Optional[_DigestCache] = None) -> Optional[_Pending]:
    """Start the digest of ``obj`` (see :func:`digest`); None if it holds no tensor."""
    bits = cache.bits if cache is not None else _bits_digest
    if isinstance(obj, Tensor):
        return _bare(bits(obj), obj)
    tensors: List[Tuple[str, Tensor]] = []
    texts: List[str] = []
    _leaves(obj, '', tensors, texts)
    if not tensors:
        return None
    return _Pending([(bits(t), _meta(p, t)) for p, t in tensors],
                    (zlib.crc32('\n'.join(texts).encode()) * _META_MULT) & _MASK)


def _bare(bits: Tensor, tensor: Tensor) -> _Pending:
    """The pending digest of a bare ``tensor`` whose bits digest is ``bits``."""
    return _Pending([(bits, _meta('', tensor))], None)


class _Batch(NamedTuple):
    """Bits digests of many bare tensors (see :func:`_batch`), not yet read back.

    Attributes:
        keys: ``(section, name)`` of each tensor in a trace line.
        metas: Each tensor's (dtype, shape) term.
        bits: Their bits digests (1-D int64).
    """

    keys: List[Tuple[str, str]]
    metas: List[int]
    bits: Tensor


def _batch(keys: List[Tuple[str, str]], tensors: Sequence[Tensor]) -> _Batch:
    """Start the digests of bare ``tensors`` labelled ``keys``, all at once."""
    return _Batch(keys, [_meta('', tensor) for tensor in tensors], _bits_digests(tensors))


def _resolve(pendings: Sequence[_Pending]) -> List[int]:
    """Read back many pending digests (one transfer per device) and finish them."""
    tensors = [bits for pending in pendings for bits, _ in pending.parts]
    raw = iter(_to_ints(tensors))
    out = []
    for pending in pendings:
        values = [(next(raw) + meta) & _MASK for _, meta in pending.parts]
        if pending.const is None:
            out.append(values[0])
            continue
        mult = _row_multipliers(len(values)) if len(values) > 1 else [1]
        out.append((pending.const + sum(v * int(m) for v, m in zip(values, mult, strict=True)))
                   & _MASK)
    return out


def _to_ints(values: Sequence[Tensor]) -> List[int]:
    """Read many 0-d tensors with one transfer per device."""
    out: List[int] = [0] * len(values)
    by_device: Dict[torch.device, List[int]] = {}
    for i, value in enumerate(values):
        by_device.setdefault(value.device, []).append(i)
    for indices in by_device.values():
        read = torch.stack([values[i] for i in indices]).tolist()
        for i, value in zip(indices, read, strict=True):
            out[i] = value
    return out



def digest(obj: Any) -> Optional[int]:
    """Digest of every tensor and plain value inside ``obj`` (an unsigned 64-bit int).

    ``obj`` may be a tensor (then this is :func:`tensor_digest`) or nest tensors in
    tuples, lists, dicts, MMEngine data elements (e.g. ``DetDataSample``) and
    MMDetection boxes; their structure, keys and plain values (numbers, numpy arrays)
    count, key order and strings do not.

    Returns:
        int or None: None when ``obj`` holds no tensor.
    """
    pending = _pending(obj)
    return None if pending is None else _resolve([pending])[0]

