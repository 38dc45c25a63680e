"""What an evaluation leaves to be compared: its metrics and a digest of its predictions.

Every validation during training and every test run gives one entry:

- in the run record's ``evaluation`` list (and so in every later checkpoint's
  ``meta['run_record']``): ``kind`` (``val`` or ``test``), ``iter``, ``epoch``, the
  ``metrics`` as logged, the number of ``images`` and ``predictions_sha256``, a digest of
  every image's predictions in dataset order;
- in ``<log_dir>/predictions.jsonl``, one line per evaluation: each image's key (its
  ``img_id``, else its file name), file name and predictions digest, in dataset order, so
  that two runs name the first image whose predictions differ.

An image's digest covers the values of every ``pred_*`` field of its data sample
(``pred_instances``' boxes, scores, labels and masks; ``pred_sem_seg``...), by name,
dtype, shape and bytes: equal digests mean equal predictions, bit for bit. Not the
``.pkl`` of ``--out``, whose bytes differ on every run (``torch.save`` writes an id).

Each rank digests the images it evaluated; the digests are gathered on every rank
(padding repeats of MMEngine's ``DefaultSampler`` counted once) and put in dataset order.
"""
from __future__ import annotations

import hashlib
import json
import os.path as osp
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..resume.digests import update_digest

#: The run record's list of evaluations.
RECORD_KEY = 'evaluation'
#: Per-image digests, one JSON line per evaluation, in the log dir.
PREDICTIONS_NAME = 'predictions.jsonl'
#: One image: ``(key, file name, predictions digest)``.
Image = Tuple[str, str, str]


def _update(digest: Any, name: str, value: Any) -> None:
    """Hash one prediction field; data elements by their fields, in sorted order."""
    if hasattr(value, 'keys') and hasattr(value, 'metainfo_keys'):  # a BaseDataElement
        for key in sorted(value.keys()):
            _update(digest, f'{name}.{key}', getattr(value, key))
    elif isinstance(value, np.ndarray):
        update_digest(digest, name, torch.from_numpy(np.ascontiguousarray(value)))
    elif hasattr(value, 'to_tensor') and hasattr(value, 'masks'):  # mmdet's mask types
        update_digest(digest, name, torch.from_numpy(np.ascontiguousarray(value.masks)))
    else:
        update_digest(digest, name, value)


def predictions_digest(sample: Any) -> str:
    """sha256 (hex) of the values of a data sample's ``pred_*`` fields."""
    digest = hashlib.sha256()
    for key in sorted(k for k in sample.keys() if k.startswith('pred')):
        _update(digest, key, getattr(sample, key))
    return digest.hexdigest()


def image_key(sample: Any) -> Tuple[str, str]:
    """``(key, file name)`` of a data sample's image: the key is its ``img_id`` where it
    has one, else its file name (which names it to a person in either case)."""
    meta = sample.metainfo if hasattr(sample, 'metainfo') else {}
    path = meta.get('img_path') or meta.get('filename') or ''
    name = osp.basename(str(path)) if path else ''
    key = meta.get('img_id')
    return (str(key) if key is not None else name), name


def dataset_order(dataset: Any) -> Dict[str, int]:
    """``{image key: dataset index}`` (the first index of each key)."""
    order: Dict[str, int] = {}
    for index in range(len(dataset)):
        info = dataset.get_data_info(index)
        key = info.get('img_id')
        if key is None:
            key = osp.basename(str(info.get('img_path') or ''))
        order.setdefault(str(key), index)
    return order


def ordered(parts: Iterable[Sequence[Image]], order: Dict[str, int]) -> List[Image]:
    """Every rank's images in dataset order, each once (images the dataset does not
    list go last, in the order they came)."""
    seen: Dict[str, Image] = {}
    for part in parts:
        for image in part:
            seen.setdefault(image[0], tuple(image))  # type: ignore[arg-type]
    known = sorted((k for k in seen if k in order), key=order.__getitem__)
    return [seen[k] for k in known] + [seen[k] for k in seen if k not in order]


def overall_digest(images: Sequence[Image]) -> str:
    """sha256 of the images' keys and digests, in their order."""
    digest = hashlib.sha256()
    for key, _, value in images:
        digest.update(f'{key}\0{value}\n'.encode())
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    """A metric value as JSON holds it (numbers stay numbers)."""
    if isinstance(value, (np.generic, torch.Tensor)) and np.size(value) == 1:
        return value.item()
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


class EvaluationLedger:
    """The predictions of the evaluation under way, on this rank.

    ``ReproducibilityHook`` calls :meth:`begin` before an evaluation, :meth:`add` after
    every batch and :meth:`finish` (every rank: it gathers) after it.
    """

    def __init__(self) -> None:
        self._images: List[Image] = []
        self._orders: Dict[int, Dict[str, int]] = {}

    def begin(self) -> None:
        """Start an evaluation."""
        self._images = []

    def add(self, outputs: Optional[Sequence[Any]]) -> None:
        """Digest the predictions of one batch (data samples; other outputs hold no
        images to name, and are left out)."""
        if not isinstance(outputs, (list, tuple)):  # a model that returns tensors
            return
        for sample in outputs:
            if hasattr(sample, 'keys') and hasattr(sample, 'metainfo'):
                self._images.append((*image_key(sample), predictions_digest(sample)))

    def finish(self, kind: str, dataset: Any, metrics: Optional[Dict[str, Any]],
               iteration: Optional[int],
               epoch: Optional[int]) -> Tuple[Dict[str, Any], List[Image]]:
        """Gather every rank's digests; return ``(record entry, images in dataset order)``.

        Args:
            kind: ``val`` or ``test``.
            dataset: The evaluated dataset (for the order), or None.
            metrics: The metrics the evaluator returned.
            iteration: The Runner's iteration (training iterations done); None in a run
                that only evaluates (the record fills in its checkpoint's).
            epoch: The Runner's epoch, or None likewise.
        """
        from mmengine.dist import all_gather_object, get_world_size
        parts = (all_gather_object(self._images) if get_world_size() > 1
                 else [self._images])
        order: Dict[str, int] = {}
        if dataset is not None and hasattr(dataset, 'get_data_info'):
            order = self._orders.get(id(dataset)) or self._orders.setdefault(
                id(dataset), dataset_order(dataset))
        images = ordered(parts, order)
        self._images = []
        entry = dict(kind=kind, iter=iteration, epoch=epoch,
                     metrics={str(k): _plain(v) for k, v in (metrics or {}).items()},
                     images=len(images), predictions_sha256=overall_digest(images))
        return entry, images


def write_predictions(log_dir: str, entry: Dict[str, Any], images: Sequence[Image]) -> str:
    """Append one evaluation's per-image digests to ``<log_dir>/predictions.jsonl``."""
    path = osp.join(log_dir, PREDICTIONS_NAME)
    line = dict(kind=entry['kind'], iter=entry['iter'], epoch=entry['epoch'],
                predictions_sha256=entry['predictions_sha256'],
                images=[list(image) for image in images])
    with open(path, 'a', encoding='utf-8') as f:
        f.write(json.dumps(line) + '\n')
    return path


def read_predictions(path: str) -> List[Dict[str, Any]]:
    """The evaluations of a ``predictions.jsonl`` (a cut-short last line is skipped)."""
    out: List[Dict[str, Any]] = []
    if not osp.isfile(path):
        return out
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get('images'), list):
                out.append(row)
    return out
