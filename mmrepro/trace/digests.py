"""The exact 64-bit digest of a tensor's bits, dtype and shape.

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
import zlib
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

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



def to_hex(value: int) -> str:
    """A digest as 16 hex digits."""
    return f'{int(value) & _MASK:016x}'

