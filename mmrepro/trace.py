"""The training trace: exact, cheap digests of losses, activations, gradients and weights.

Every N iterations :class:`Tracer` writes one JSON line to ``<log_dir>/trace.jsonl``
with the iteration, every loss value (``float.hex``, so exact), and one digest per
module forward output (in the order the forward pass finishes them), per parameter
gradient (in the order backward produces them), per parameter after the optimizer
step and per buffer. Two runs are bit-identical where their traces are equal;
:func:`compare_traces` finds the first iteration and the first module or parameter
where they are not.

The digest (:func:`tensor_digest`) reads a tensor's bytes as little-endian 64-bit
words ``v_k`` and computes ``sum_k v_k * m_k mod 2**64`` with fixed odd multipliers
``m_k`` (products of splitmix64 outputs, see :func:`multipliers`), plus a term for
dtype and shape. Why this one:

* **Exact.** Flipping any single bit changes one word by ``+-2**b`` (``b < 64``), so
  the digest changes by ``2**b * m_k mod 2**64``, never 0 because ``m_k`` is odd: a
  single bit flip is always detected, not just with high probability. Other changes
  (several bits, swapped elements: the multipliers depend on the position) collide
  with probability about ``2**-64``.
* **Deterministic.** Integer addition modulo ``2**64`` is associative, so the result
  does not depend on reduction order, thread count or device: the same bits give the
  same digest on CPU and GPU (unlike a floating-point sum).
* **Cheap.** The tensor is read once, in place, as int64 words. On CPU, blocks of 256
  words are multiplied by the word multipliers in one ``torch.bmm``; for contractions
  this short torch runs bmm as a loop parallelised over the blocks with its own
  intra-op (OpenMP) threads, so every core reads and no extra thread competes with
  them. The block sums (1/256 of the data) are then weighted by the row multipliers
  and summed, for many tensors at once. Other devices multiply and sum. No copy, no
  host transfer and no synchronisation until the line is written (the small
  per-tensor terms are then added in Python). Hashing the bytes with sha256 would copy
  every tensor to the host and run on one core at a fraction of memory bandwidth.
"""
from __future__ import annotations

import functools
import json
import math
import os.path as osp
import weakref
import zlib
from dataclasses import dataclass, field
from functools import partial
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

import numpy as np
import torch
from torch import Tensor, nn
from torch.autograd import Variable

__all__ = [
    'TRACE_NAME', 'TraceDiff', 'TraceError', 'Tracer', 'comparable_sections',
    'compare_traces', 'describe_diff',
    'digest', 'multipliers', 'read_trace', 'tensor_digest', 'to_hex',
]

#: File name of the trace inside the run's log dir.
TRACE_NAME = 'trace.jsonl'
#: ``format`` field of the trace's header line.
TRACE_FORMAT = 'mmrepro-trace'
TRACE_VERSION = 2  # 2: 256-word rows (version 1 digests used 65536)
#: Name under which the model itself (the root module) appears in the trace.
ROOT_NAME = '(model)'
#: Sections of a trace line holding digests, in the order a difference is blamed.
SECTIONS = ('forward', 'grad', 'weight', 'buffer')
SECTION_TITLES = dict(forward='forward output', grad='gradient', weight='weight after the step',
                      buffer='buffer', losses='loss value')
_SINGULARS = dict(losses='loss', forward='forward output', grad='gradient', weight='weight',
                  buffer='buffer')
_PLURALS = dict(forward='forward outputs', grad='gradients', weight='weights after the step',
                buffer='buffers', losses='loss values')

_MASK = (1 << 64) - 1
#: Words per row: the contraction of the CPU ``torch.bmm``, which torch parallelises
#: over the rows when it is below 400 (``baddbmm_cpu_kernel``).
_CHUNK = 256
_CHUNK_OFFSET = 1 << 40  # row multipliers come from a disjoint part of the sequence
_META_MULT = 0x9E3779B97F4A7C15  # odd: mixes (path, dtype, shape) into the digest
#: Dtypes whose bytes are read as they are (no dense/int_repr/real view first).
_WORD_DTYPES = frozenset((torch.float32, torch.float16, torch.bfloat16, torch.float64,
                          torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8))
_SMALL_BYTES = 1 << 14  # tensors up to this size are digested in one batch
_HEAD = _SMALL_BYTES // 8  # the first multipliers, kept whole: one dot for small tensors
_ZERO_BYTES = torch.zeros(8, dtype=torch.uint8)
_LAYOUTS: Dict[Tuple[str, Tuple[int, ...]], Tuple[Tensor, Tensor]] = {}
_META_CACHE: Dict[Tuple[str, torch.dtype, torch.Size], int] = {}


# ------------------------------------------------------------------------- digests
def _splitmix64(start: int, count: int) -> np.ndarray:
    """``count`` odd splitmix64 outputs for indices ``start...`` (uint64)."""
    with np.errstate(over='ignore'):
        z = (np.arange(start, start + count, dtype=np.uint64) + np.uint64(1)) * \
            np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z | np.uint64(1)


def _row_multipliers(count: int) -> np.ndarray:
    """The per-row factors (uint64): 1 for row 0 (so small tensors need one dot)."""
    rows = _splitmix64(_CHUNK_OFFSET, count)
    rows[0] = 1
    return rows


def multipliers(start: int, count: int) -> np.ndarray:
    """The digest's multipliers ``m_k`` for ``k`` in ``[start, start + count)`` (uint64).

    ``m_k = word[k % 256] * row[k // 256] mod 2**64`` with ``word`` and ``row``
    odd splitmix64 outputs (``row[0] = 1``), so every ``m_k`` is odd.
    """
    index = np.arange(start, start + count, dtype=np.int64)
    words = _splitmix64(0, _CHUNK)
    rows = _row_multipliers(int(index[-1]) // _CHUNK + 1 if count else 1)
    with np.errstate(over='ignore'):
        return words[index % _CHUNK] * rows[index // _CHUNK]


@functools.lru_cache(maxsize=1024)
def _multiplier(index: int) -> int:
    """``m_index`` as a signed 64-bit int."""
    return _signed(int(multipliers(index, 1)[0]))


def _signed(value: int) -> int:
    """``value mod 2**64`` as a signed 64-bit int (for arithmetic with int64 tensors)."""
    value &= _MASK
    return value - (1 << 64) if value >> 63 else value


class _Tables:
    """The multipliers as int64 tensors on one device, with cached prefixes."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.words = torch.from_numpy(multipliers(0, _CHUNK).view(np.int64)).to(device)
        self.rows = torch.from_numpy(_row_multipliers(1024).view(np.int64)).to(device)
        self.head = torch.from_numpy(multipliers(0, _HEAD).view(np.int64)).to(device)
        self._prefixes: Dict[Tuple[str, int], Tensor] = {}
        self._columns: Dict[int, Tensor] = {}

    def column(self, rows: int) -> Tensor:
        """The word multipliers as a ``(rows, 256, 1)`` view (the right side of bmm)."""
        column = self._columns.get(rows)
        if column is None:
            if len(self._columns) > 4096:
                self._columns.clear()
            column = self._columns[rows] = self.words.view(1, _CHUNK, 1).expand(
                rows, _CHUNK, 1)
        return column

    def prefix(self, kind: str, count: int) -> Tensor:
        """The first ``count`` multipliers ``m_k`` (``kind='head'``, up to 2048), word
        or row multipliers."""
        key = (kind, count)
        prefix = self._prefixes.get(key)
        if prefix is None:
            if kind == 'rows' and count > self.rows.numel():
                size = 1 << (count - 1).bit_length()
                self.rows = torch.from_numpy(_row_multipliers(size).view(np.int64)).to(
                    self.device)
                self._prefixes = {k: v for k, v in self._prefixes.items() if k[0] != 'rows'}
            prefix = self._prefixes[key] = getattr(self, kind)[:count]
        return prefix


_TABLES: Dict[torch.device, _Tables] = {}


def _tables(device: torch.device) -> _Tables:
    tables = _TABLES.get(device)
    if tables is None:
        tables = _TABLES[device] = _Tables(device)
    return tables


def _dot(words: Tensor, mult: Tensor) -> Tensor:
    """``sum(words * mult)`` modulo ``2**64``, 1-D int64 inputs of equal length."""
    if words.is_cpu:
        return torch.dot(words, mult)
    return (words * mult).sum()


def _row_sums(block: Tensor, tables: _Tables) -> Tensor:
    """``block @ words`` for a ``(rows, 1, 256)`` int64 block (exact mod ``2**64``).

    On CPU as a batch of ``rows`` 1x256 by 256x1 products: torch runs that as one loop
    parallelised over the batch on its intra-op threads (``torch.mv`` on int64 runs
    on one thread, and a helper thread of ours would compete with OpenMP's).

    Returns:
        Tensor: ``rows`` sums, in a tensor of ``rows`` elements (any shape).
    """
    if not block.is_cpu:
        return (block.view(-1, _CHUNK) * tables.words).sum(1)
    return torch.bmm(block, tables.column(block.shape[0]))


def _word_sum(words: Tensor) -> Tensor:
    """``sum_k words[k] * m_k mod 2**64`` for a 1-D int64 tensor (0-d result)."""
    count = words.numel()
    tables = _tables(words.device)
    if count <= _HEAD:
        return _dot(words, tables.prefix('head', count))
    rows, rest = divmod(count, _CHUNK)
    sums = _row_sums(words[:rows * _CHUNK].view(rows, 1, _CHUNK), tables).view(rows)
    row_mult = tables.prefix('rows', rows + 1)
    total = _dot(sums, row_mult[:rows])
    if rest:
        total = total + _dot(words[rows * _CHUNK:], tables.prefix('words', rest)) * \
            row_mult[rows]
    return total


def _bits_digest(tensor: Tensor) -> Tensor:
    """``sum_k v_k * m_k mod 2**64`` over ``tensor``'s bytes as 64-bit words (0-d int64)."""
    flat = tensor.detach()
    nbytes = _plain_bytes(flat)
    if nbytes and not nbytes % 8:  # the common case: whole 64-bit words in place
        return _word_sum(flat.view(-1).view(torch.int64))
    if flat.layout != torch.strided:
        flat = flat.to_dense()
    if flat.is_quantized:
        flat = flat.int_repr()
    if flat.is_complex():
        flat = torch.view_as_real(flat)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    flat = flat.reshape(-1)
    count, size = flat.numel(), flat.element_size()
    if not count:
        return torch.zeros((), dtype=torch.int64, device=flat.device)
    if flat.stride(0) != 1 or (flat.storage_offset() * size) % 8:
        flat = flat.new_empty(flat.shape).copy_(flat)  # unit stride, 8-byte aligned
    full, rest = divmod(count * size, 8)
    if not rest:
        return _word_sum(flat.view(torch.int64))
    data = flat.view(torch.uint8)
    last = torch.zeros(8, dtype=torch.uint8, device=flat.device)
    last[:rest] = data[full * 8:]
    tail = last.view(torch.int64)[0] * _multiplier(full)
    return _word_sum(data[:full * 8].view(torch.int64)) + tail if full else tail


def _plain_bytes(tensor: Tensor) -> int:
    """``tensor``'s size in bytes when its bytes can be read in place as 64-bit words
    (contiguous, a plain dtype, starting at a multiple of 8 bytes; the common case),
    else 0. The size itself need not be a whole number of words."""
    if tensor.layout != torch.strided or tensor.dtype not in _WORD_DTYPES or \
            not tensor.is_contiguous() or (tensor.storage_offset() * tensor.element_size()) % 8:
        return 0
    return tensor.nbytes


def _padded_words(tensor: Tensor, nbytes: int) -> Tensor:
    """A small plain tensor's bytes as 1-D int64, zero-padded to whole words."""
    flat = tensor if tensor.dim() == 1 else tensor.reshape(-1)
    if nbytes % 8:
        flat = torch.cat([flat.view(torch.uint8), _ZERO_BYTES[:-nbytes % 8]])
    return flat.view(torch.int64)


def _segment_sums(products: Tensor, ends: Tensor) -> Tensor:
    """Sums of consecutive segments of ``products`` ending at ``ends`` (mod ``2**64``).

    Integer arithmetic: the differences of a running sum are exact.
    """
    running = products.cumsum(0)[ends]
    return torch.cat([running[:1], running[1:] - running[:-1]])


def _bits_digests(tensors: Sequence[Tensor]) -> Tensor:
    """:func:`_bits_digest` of many tensors: a 1-D int64 tensor, in order.

    On CPU most tensors cost two views here and no operation of their own:

    * small ones (up to 16 KiB; zero-padded to whole words) are concatenated; the
      words are multiplied by the concatenation of each tensor's first multipliers
      (cached per layout) and summed per tensor;
    * big ones of whole 256-word rows each take one ``torch.bmm`` (see
      :func:`_row_sums`); their row sums are concatenated, multiplied by each
      tensor's row multipliers (cached per layout) and summed per tensor.

    Others (other devices, odd sizes, non-contiguous...) go through
    :func:`_bits_digest` one by one.
    """
    groups: Tuple[List[int], List[int], List[int]] = ([], [], [])  # small, rows, other
    small_words: List[Tensor] = []
    row_sums: List[Tensor] = []
    counts: Tuple[List[int], List[int]] = ([], [])  # words per small tensor, rows per big
    tables = _tables(torch.device('cpu'))
    with torch.no_grad():  # views of parameters without autograd's bookkeeping
        for i, tensor in enumerate(tensors):
            nbytes = _plain_bytes(tensor) if tensor.is_cpu else 0
            if not nbytes:
                groups[2].append(i)
            elif nbytes <= _SMALL_BYTES:
                groups[0].append(i)
                counts[0].append(-(-nbytes // 8))
                small_words.append(_padded_words(tensor, nbytes))
            elif not nbytes % (_CHUNK * 8):
                groups[1].append(i)
                counts[1].append(nbytes // (_CHUNK * 8))
                block = tensor.view(counts[1][-1], 1, -1).view(torch.int64)
                row_sums.append(_row_sums(block, tables))
            else:
                groups[2].append(i)
    parts: List[Tensor] = []
    if small_words:
        mult, ends = _layout('head', tuple(counts[0]))
        parts.append(_segment_sums(torch.cat(small_words) * mult, ends))
    if row_sums:
        mult, ends = _layout('rows', tuple(counts[1]))
        parts.append(_segment_sums(torch.cat(row_sums).view(-1) * mult, ends))
    if groups[2]:
        others = [_bits_digest(tensors[i]) for i in groups[2]]
        device = others[0].device
        parts.append(torch.stack([o if o.device == device else o.to(device) for o in others]))
    if len(parts) > 1 and len({part.device for part in parts}) > 1:
        parts = [part.cpu() for part in parts]
    if not parts:
        return torch.zeros(0, dtype=torch.int64)
    order = groups[0] + groups[1] + groups[2]
    values = torch.cat(parts) if len(parts) > 1 else parts[0]
    if order == list(range(len(order))):
        return values
    return torch.empty_like(values).index_copy_(
        0, torch.tensor(order, device=values.device), values)


def _layout(kind: str, counts: Tuple[int, ...]) -> Tuple[Tensor, Tensor]:
    """The first ``count`` multipliers of ``kind`` (``head``: ``m_k``, ``rows``: row
    multipliers) for every count, concatenated, and the index of each segment's end."""
    key = (kind, counts)
    layout = _LAYOUTS.get(key)
    if layout is None:
        tables = _tables(torch.device('cpu'))
        layout = (torch.cat([tables.prefix(kind, count) for count in counts]),
                  torch.tensor(counts, dtype=torch.int64).cumsum(0) - 1)
        if len(_LAYOUTS) > 64:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    return layout


def _meta(path: str, tensor: Tensor) -> int:
    """The (path, dtype, shape) term of a digest."""
    key = (path, tensor.dtype, tensor.shape)
    value = _META_CACHE.get(key)
    if value is None:
        if len(_META_CACHE) > 100000:
            _META_CACHE.clear()
        text = f'{path}|{tensor.dtype}|{tuple(tensor.shape)}'.encode()
        value = _META_CACHE[key] = (zlib.crc32(text) * _META_MULT) & _MASK
    return value


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


def tensor_digest(tensor: Tensor, path: str = '') -> int:
    """Exact digest of ``tensor``'s bits, dtype and shape (an unsigned 64-bit int).

    Elements are taken in logical (row-major) order, so a non-contiguous tensor has the
    digest of its contiguous copy.

    Args:
        tensor: Any tensor (a sparse one is made dense, a quantized one is digested
            through its integer representation).
        path: A label mixed into the digest (e.g. the key of the tensor in an output).

    Returns:
        int: ``sum_k v_k * m_k + meta mod 2**64`` where ``v_k`` are the tensor's bytes
        read as 64-bit little-endian words (the last one zero-padded), ``m_k`` the odd
        :func:`multipliers` and ``meta`` a hash of ``path``, dtype and shape.
    """
    return (int(_bits_digest(tensor)) + _meta(path, tensor)) & _MASK


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


def to_hex(value: int) -> str:
    """A digest as 16 hex digits."""
    return f'{int(value) & _MASK:016x}'


# -------------------------------------------------------------------------- tracer
class Tracer:
    """Record losses and digests every ``interval`` iterations into ``trace.jsonl``.

    With ``forward``, forward hooks (on every module) exist only during traced
    iterations: they are added in :meth:`before_train_iter` and removed in
    :meth:`after_train_iter`. Post-accumulate-grad hooks (on every trainable
    parameter) are added at the first traced iteration (again when the set of
    trainable parameters changes) and return at once on untraced iterations; they are
    removed by :meth:`close`. Gradients are read once backward has
    accumulated them (before clipping, the step and the optimizer wrapper's
    ``zero_grad``): on a plain model all of them at the end of the backward pass (an
    autograd engine callback); in a model wrapper
    (``DistributedDataParallel``...) each in its hook, before the wrapper's
    all-reduce can write to it. A module called several times in one iteration gets
    one entry per call (``name``, ``name#1``...). Weights and buffers are digested
    after the step.

    The modules are those of the model when the tracer is made (the start of the
    run); their parameters and buffers are read at every traced iteration.

    On several processes, rank 0 writes ``trace.jsonl`` and rank ``r`` writes
    ``trace_rank{r}.jsonl``; gradients are those of the rank's own backward (before
    the all-reduce of ``DistributedDataParallel`` finishes).

    Args:
        runner: The MMEngine Runner (``runner.model``, ``runner.log_dir``).
        interval: Trace iterations ``i`` (1-based) with ``i % interval == 0``.
        filename: Trace file name in ``runner.log_dir``.
        forward: Also digest every module's forward output, to name the first module
            whose output differs (``tools/check_repro.py`` turns it on). Off by
            default: it reads every activation and adds a Python call per module call,
            which more than doubles the trace's cost on the demo RetinaNet R18 (24 ->
            55 ms per iteration, ``benchmarks/results/trace_cpu.md``).
    """

    def __init__(self, runner: Any, interval: int, filename: str = TRACE_NAME,
                 forward: bool = False) -> None:
        from mmengine.dist import get_dist_info
        from mmengine.model import is_model_wrapper
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(f'Tracer(interval={interval!r}): expected an int >= 1.')
        if not isinstance(forward, bool):
            raise TypeError(f'Tracer(forward={forward!r}): expected True or False.')
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self.interval = interval
        self.forward = forward
        self.model: nn.Module = model
        self._grads_in_hook = is_model_wrapper(runner.model)
        self._grad_refs: List[Tuple[str, Tensor]] = []
        self._grad_batches: List[_Batch] = []
        self._grads_queued = False
        # Gradient hooks stay from the first traced iteration on (a call that returns
        # at once on other iterations is cheaper than adding and removing 100s of them).
        self._grad_handles: List[Any] = []
        self._trainable: Optional[Tuple[bool, ...]] = None
        rank, world_size = get_dist_info()
        if rank:
            filename = f'{osp.splitext(filename)[0]}_rank{rank}.jsonl'
        self.path = osp.join(runner.log_dir, filename)
        named = list(model.named_modules())
        self._modules = [(name or ROOT_NAME, module) for name, module in named]
        # (prefix, module) pairs to list parameters and buffers without walking the tree
        self._prefixes = [(f'{name}.' if name else '', module) for name, module in named]
        self._handles: List[Any] = []
        self._forward: Dict[str, _Pending] = {}
        self._grad: Dict[str, _Pending] = {}
        self._calls: Dict[str, int] = {}
        self._cache = _DigestCache()
        self._active = False
        self._file = open(self.path, 'w')
        header = dict(format=TRACE_FORMAT, version=TRACE_VERSION, interval=interval,
                      rank=rank, world_size=world_size, forward=forward,
                      modules={name: type(module).__name__ for name, module in self._modules})
        self._write(header)

    # ----------------------------------------------------------------- runner calls
    def traced(self, iteration: int) -> bool:
        """Whether the 0-based ``iteration`` is traced."""
        return (iteration + 1) % self.interval == 0

    def before_train_iter(self, runner: Any, batch_idx: int) -> None:
        """Install the hooks when this iteration is traced."""
        if not self.traced(runner.iter) or self._file is None:
            return
        self._active = True
        for name, module in self._modules if self.forward else ():
            self._handles.append(module.register_forward_hook(partial(self._on_forward, name)))
        trainable = tuple(p.requires_grad for _, p in self._named('_parameters'))
        if trainable != self._trainable:  # the first traced iteration, or (un)freezing
            self._remove_grad_hooks()
            self._trainable = trainable
            self._grad_handles = [
                param.register_post_accumulate_grad_hook(partial(self._on_grad, name))
                for name, param in self._named('_parameters') if param.requires_grad]

    def after_train_iter(self, runner: Any, batch_idx: int, outputs: Any = None) -> None:
        """Remove the hooks and write this iteration's line."""
        if not self._active:
            return
        self._remove_hooks()
        self._digest_grads()  # a backward that ended without running the callback
        state = [(('weight', name), tensor) for name, tensor in self._named('_parameters')] \
            + [(('buffer', name), tensor) for name, tensor in self._named('_buffers')]
        batches = self._grad_batches + [_batch([key for key, _ in state],
                                               [tensor for _, tensor in state])]
        line: Dict[str, Any] = dict(iter=runner.iter + 1, epoch=runner.epoch,
                                    batch_idx=batch_idx, losses=_losses(outputs))
        line.update({s: {} for s in (SECTIONS if self.forward else SECTIONS[1:])})
        pending = [(section, name, value)
                   for section, values in (('forward', self._forward), ('grad', self._grad))
                   for name, value in values.items()]
        values = _resolve([value for _, _, value in pending])
        for (section, name, _), value in zip(pending, values, strict=True):
            line[section][name] = to_hex(value)
        for keys, metas, bits in batches:
            for (section, name), meta, value in zip(keys, metas, bits.tolist(), strict=True):
                line[section][name] = to_hex(value + meta)
        self._write(line)
        self._forward, self._grad, self._calls, self._grad_batches = {}, {}, {}, []
        self._cache.clear()

    def close(self) -> None:
        """Remove any hooks and close the file."""
        self._remove_hooks()
        self._remove_grad_hooks()
        if self._file is not None:
            self._file.close()
            self._file = None

    def _named(self, store: str) -> List[Tuple[str, Tensor]]:
        """``named_parameters()`` (``store='_parameters'``) or ``named_buffers()``.

        The same names, order and de-duplication, read from each module's own dict
        (what it holds now) without walking the module tree again.
        """
        seen = set()
        out = []
        for prefix, module in self._prefixes:
            for key, tensor in getattr(module, store).items():
                if tensor is not None and id(tensor) not in seen:
                    seen.add(id(tensor))
                    out.append((prefix + key, tensor))
        return out

    # ----------------------------------------------------------------------- hooks
    def _on_forward(self, name: str, module: nn.Module, args: Any, output: Any) -> None:
        pending = _pending(output, self._cache)
        if pending is not None:
            self._forward[_call_key(name, self._calls)] = pending

    def _on_grad(self, name: str, param: Tensor) -> None:
        grad = param.grad
        if grad is None or not self._active:
            return
        key = _call_key(name, self._calls, prefix='grad:')
        if self._grads_in_hook:
            self._grad[key] = _pending(grad)
            return
        self._grad_refs.append((key, grad))
        if not self._grads_queued:  # runs when this backward pass has finished
            self._grads_queued = True
            Variable._execution_engine.queue_callback(self._digest_grads)

    def _digest_grads(self) -> None:
        """Digest the gradients collected by :meth:`_on_grad`."""
        refs, self._grad_refs, self._grads_queued = self._grad_refs, [], False
        if refs:
            self._grad_batches.append(_batch([('grad', key) for key, _ in refs],
                                             [grad for _, grad in refs]))

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._active = False

    def _remove_grad_hooks(self) -> None:
        for handle in self._grad_handles:
            handle.remove()
        self._grad_handles = []
        self._trainable = None

    def _write(self, obj: Dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, separators=(',', ':')) + '\n')
        self._file.flush()


def _call_key(name: str, calls: Dict[str, int], prefix: str = '') -> str:
    """``name`` for the first call in an iteration, ``name#k`` for the k-th repeat."""
    count = calls.get(prefix + name, 0)
    calls[prefix + name] = count + 1
    return name if count == 0 else f'{name}#{count}'


def _losses(outputs: Any) -> Dict[str, str]:
    """Every value of the train step's ``log_vars``, exactly (``float.hex``)."""
    out: Dict[str, str] = {}
    if not isinstance(outputs, Mapping):
        return out
    for name, value in outputs.items():
        if isinstance(value, Tensor) and value.numel() == 1:
            out[name] = float(value.detach().item()).hex()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value).hex()
        else:
            hashed = digest(value)
            out[name] = 'digest:' + to_hex(hashed) if hashed is not None else repr(value)
    return out


# ------------------------------------------------------------------ reading traces
class TraceError(ValueError):
    """A trace file is missing, unreadable or not a trace."""


def read_trace(path: str) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Read a trace file: its header and its iteration lines.

    A last line cut short (the run was killed while writing) is dropped, and the
    header then has ``truncated: True``.

    Args:
        path: The ``trace.jsonl`` file.

    Returns:
        tuple: ``(header, lines)``.

    Raises:
        TraceError: The file is missing, empty, has no valid header or a corrupted
            line other than the last one (the message names the file and the line).
    """
    if not osp.isfile(path):
        raise TraceError(f'{path}: no such trace file')
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    rows = text.split('\n')
    complete = text.endswith('\n')
    if complete:
        rows = rows[:-1]
    if not rows or not rows[0].strip():
        raise TraceError(f'{path}: empty file, not an mmrepro trace')
    header: Dict[str, Any] = {}
    lines: List[Dict[str, Any]] = []
    for number, row in enumerate(rows, 1):
        try:
            obj = json.loads(row)
        except json.JSONDecodeError as err:
            if number == len(rows) and not complete and number > 1:
                header['truncated'] = True
                break
            raise TraceError(f'{path}: line {number} is not valid JSON ({err.msg} at '
                             f'column {err.colno}); the trace is corrupted') from None
        if number == 1:
            if not isinstance(obj, dict) or obj.get('format') != TRACE_FORMAT:
                raise TraceError(f'{path}: line 1 is not an mmrepro trace header '
                                 f"(expected format={TRACE_FORMAT!r})")
            header.update(obj)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get('iter'), int) or \
                not all(isinstance(obj.get(s, {}), dict) for s in (*SECTIONS, 'losses')):
            raise TraceError(f'{path}: line {number} is not a trace record (expected an '
                             'object with "iter", "losses", ' +
                             ', '.join(f'"{s}"' for s in SECTIONS) + ')')
        lines.append(obj)
    return header, lines


# ---------------------------------------------------------------- comparing traces
@dataclass
class TraceDiff:
    """How two traces compare over the iterations both recorded.

    Attributes:
        common: The iterations present in both traces, in order.
        iteration: The first common iteration that differs (None if all are equal).
        epoch: That iteration's epoch (0-based, as MMEngine counts).
        first: Per section (``losses`` and :data:`SECTIONS`), the first differing
            entry ``(name, value_a, value_b)`` at that iteration, in recorded order:
            forward outputs in the order the forward pass finished them, gradients in
            the order backward produced them, weights and buffers in module order.
        counts: Per section, how many entries differ at that iteration.
        totals: Per section, how many entries that iteration has.
        compared: The sections compared (asked for and recorded by both traces).
    """

    common: List[int] = field(default_factory=list)
    iteration: Optional[int] = None
    epoch: Optional[int] = None
    first: Dict[str, Tuple[str, Optional[str], Optional[str]]] = field(default_factory=dict)
    counts: Dict[str, int] = field(default_factory=dict)
    totals: Dict[str, int] = field(default_factory=dict)
    compared: List[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """Whether every common iteration is equal (False when none is common)."""
        return bool(self.common) and self.iteration is None

    def culprit(self) -> Optional[Tuple[str, str]]:
        """``(section, name)`` of the earliest difference in the iteration's causal order.

        A forward output precedes the gradients it produces, which precede the step
        that changes the weights: the first differing forward output is blamed, else
        the first gradient (in backward order: nearest the cause), else the weights,
        the buffers, the losses.
        """
        for section in (*SECTIONS, 'losses'):
            if section in self.first:
                return section, self.first[section][0]
        return None


def _compare_section(a: Mapping[str, str], b: Mapping[str, str]) -> Tuple[
        Optional[Tuple[str, Optional[str], Optional[str]]], int, int]:
    names = list(a) + [n for n in b if n not in a]
    differing = [n for n in names if a.get(n) != b.get(n)]
    first = (differing[0], a.get(differing[0]), b.get(differing[0])) if differing else None
    return first, len(differing), len(names)


def comparable_sections(header_a: Mapping[str, Any],
                        header_b: Mapping[str, Any]) -> Tuple[Tuple[str, ...], Optional[str]]:
    """The sections of two traces that can be compared, and why the others cannot.

    Digests of different trace versions are computed differently (every one would
    differ), so such traces are compared on their loss values only.

    Returns:
        tuple: ``(sections, reason)``; ``reason`` is None when every section compares.
    """
    version_a, version_b = header_a.get('version'), header_b.get('version')
    if version_a == version_b:
        return ('losses', *SECTIONS), None
    return ('losses',), (f'trace versions differ ({version_a} vs {version_b}: written by '
                         'different mmrepro versions, whose digests are not comparable); '
                         'comparing loss values only')


def compare_traces(lines_a: Sequence[Mapping[str, Any]],
                   lines_b: Sequence[Mapping[str, Any]],
                   sections: Sequence[str] = ('losses', *SECTIONS)) -> TraceDiff:
    """Find the first common iteration where two traces differ, and where in it.

    Args:
        lines_a: Iteration lines of trace A (:func:`read_trace`).
        lines_b: Iteration lines of trace B.
        sections: The sections compared (e.g. only ``losses`` for traces whose
            digests are not comparable, see :func:`comparable_sections`).

    Returns:
        TraceDiff: Identical when every iteration present in both is equal.
    """
    by_iter_b = {line['iter']: line for line in lines_b}
    result = TraceDiff()
    for line_a in sorted(lines_a, key=lambda line: line['iter']):
        line_b = by_iter_b.get(line_a['iter'])
        if line_b is None:
            continue
        result.common.append(line_a['iter'])
        if result.iteration is not None:
            continue
        for section in sections:
            if section not in line_a or section not in line_b:
                continue  # not recorded by both traces (forward outputs are optional)
            if section not in result.compared:
                result.compared.append(section)
            first, count, total = _compare_section(line_a[section], line_b[section])
            result.totals[section] = total
            if first is not None:
                result.first[section] = first
                result.counts[section] = count
        if result.first:
            result.iteration, result.epoch = line_a['iter'], line_a.get('epoch')
        else:
            result.totals = {}
    return result


def _loss_text(value: Optional[str]) -> str:
    if value is None:
        return 'missing'
    try:
        return f'{float.fromhex(value)!r} ({value})'
    except (TypeError, ValueError):
        return value


def _module_of(section: str, name: str, modules: Mapping[str, str]) -> str:
    """``name (Type)`` for a module, ``name (in Type)`` for a parameter or buffer."""
    base = name.split('#')[0]
    if section == 'forward':
        kind = modules.get(base)
        return f'{name} ({kind})' if kind else name
    owner = base.rsplit('.', 1)[0] if '.' in base else ROOT_NAME
    kind = modules.get(owner)
    return f'{name} (in {owner}: {kind})' if kind else name


def describe_diff(diff: TraceDiff, modules: Optional[Mapping[str, str]] = None,
                  label_a: str = 'A', label_b: str = 'B') -> List[str]:
    """Human-readable lines describing ``diff`` (see :func:`compare_traces`).

    Args:
        diff: The comparison.
        modules: Module name -> class name (the trace header's ``modules``).
        label_a: Name of the first run in the text.
        label_b: Name of the second run in the text.

    Returns:
        list[str]: Lines without trailing newlines.
    """
    modules = modules or {}
    if not diff.common:
        return ['no iteration was traced in both runs; nothing to compare']
    span = (f'iteration {diff.common[0]}' if len(diff.common) == 1 else
            f'iterations {diff.common[0]}..{diff.common[-1]} ({len(diff.common)} traced)')
    if diff.identical:
        kinds = [_SINGULARS[s] for s in diff.compared]
        kinds = ', '.join(kinds[:-1]) + ' and ' + kinds[-1] if len(kinds) > 1 else \
            ''.join(kinds) or 'recorded value'
        return [f'bit-identical over {span}: every {kinds}']
    epoch = f' (epoch {diff.epoch + 1})' if isinstance(diff.epoch, int) and diff.epoch else ''
    lines = [f'first diverging iteration: {diff.iteration}{epoch}, of {span}']
    culprit = diff.culprit()
    if culprit is not None:
        section, name = culprit
        lines.append(f'  first difference: {SECTION_TITLES[section]} of '
                     f'{_module_of(section, name, modules)}')
        if section == 'forward' and name.split('#')[0] == 'data_preprocessor':
            lines.append('    the batch itself differs: data order, augmentation or loading')
    for section in ('losses', *SECTIONS):
        if section not in diff.first:
            continue
        name, a, b = diff.first[section]
        count, total = diff.counts[section], diff.totals[section]
        if section == 'losses':
            lines.append(f'  losses differ ({count} of {total}), first {name}: '
                         f'{label_a} {_loss_text(a)} vs {label_b} {_loss_text(b)}')
        else:
            order = ' (in backward order)' if section == 'grad' else ''
            lines.append(f'  {count} of {total} {_PLURALS[section]} differ; first'
                         f'{order}: {_module_of(section, name, modules)}')
    return lines


def loss_curve(lines: Sequence[Mapping[str, Any]], key: str = 'loss') -> List[Tuple[int, float]]:
    """``(iteration, loss)`` pairs from trace lines (non-finite values kept as nan)."""
    out = []
    for line in lines:
        value = line.get('losses', {}).get(key)
        try:
            out.append((line['iter'], float.fromhex(value)))
        except (TypeError, ValueError):
            out.append((line['iter'], math.nan))
    return out
