"""Per-sample digests of a training batch: what the model was given, sample by sample.

Two runs trained on the same data have equal digests at every traced iteration, on any
machine: the digest covers each sample's input tensor and its data sample (boxes,
labels, masks, image shape, scale factor, flip...), not its file path. The first
sample whose digest differs says where two data streams part, before any numeric
difference can.
"""
from __future__ import annotations

import os.path as osp
from typing import Any, Dict, Optional, Sequence, Tuple

from .batching import digest
from .digests import to_hex
from .fileformat import DATA

__all__ = ['DATA', 'sample_digests', 'sample_name', 'global_slots']


def sample_name(data_sample: Any) -> Optional[str]:
    """The sample's image id, else its file name (None for neither)."""
    meta = getattr(data_sample, 'metainfo', None) or {}
    if meta.get('img_id') is not None:
        return f"img_id={meta['img_id']}"
    path = meta.get('img_path')
    return osp.basename(path) if isinstance(path, str) else None


def _entry(name: Optional[str], value: Any) -> str:
    hashed = digest(value)
    text = to_hex(hashed) if hashed is not None else 'no tensor'
    return f'{name} {text}' if name else text


def sample_digests(data_batch: Any) -> Dict[str, str]:
    """``{slot: 'name digest'}`` for each sample of an MMEngine batch.

    A batch of ``inputs`` and ``data_samples`` lists (MMDetection's and most OpenMMLab
    loaders', before the data preprocessor) gets one entry per sample, keyed by its
    slot in the batch (``'0'``, ``'1'``...); any other batch, one entry ``'batch'``.
    """
    if isinstance(data_batch, dict):
        inputs, samples = data_batch.get('inputs'), data_batch.get('data_samples')
        if isinstance(inputs, (list, tuple)) and isinstance(samples, (list, tuple)) and \
                len(inputs) == len(samples):
            return {str(slot): _entry(sample_name(sample), (image, sample))
                    for slot, (image, sample) in enumerate(zip(inputs, samples, strict=True))}
    return {} if data_batch is None else {'batch': _entry(None, data_batch)}


def global_slots(slices: Sequence[Tuple[int, Dict[str, str]]]) -> Dict[str, str]:
    """Merge the digests of every rank's micro-batch, keyed by place in the global batch.

    Args:
        slices: ``(slice, digests)`` per rank, where ``slice`` is the micro-batch's
            slice of the global batch (``rank x accumulative_counts + micro-batch``) and
            ``digests`` is what :func:`sample_digests` gave for it.

    Returns:
        dict: ``{str(slice x batch_size + slot): entry}``, so that a run on one process
        and a run on several ranks with the same global batch list the same keys.
    """
    merged: Dict[str, str] = {}
    for index, digests in sorted(slices, key=lambda item: item[0]):
        width = len(digests)
        for slot, entry in digests.items():
            key = str(index * width + int(slot)) if slot.isdigit() else f'{index}.{slot}'
            merged[key] = entry
    return merged
