"""The training data's fingerprint in the run record: annotation files and sample files.

Ground truth lives in annotation files (COCO JSON) for detection, but in per-sample
files for others: MMSegmentation's label maps (``seg_map_path``), panoptic PNGs, masks.
So besides the annotation files, every file a sample's data info points to (each
``*_path`` key: ``img_path``, ``seg_map_path``...) is fingerprinted, one combined hash
per key, in dataset order, by its path relative to ``data_root`` and:

- ``'labels'`` (default): the contents of ground-truth files (every key but
  ``img_path``), the size of images;
- ``'content'``: the contents of every file, images too;
- ``'stat'``: the size of every file (no file is read).

Contents are sha256 over the bytes; read cost per mode at COCO scale is measured in
``benchmarks/results/data_fingerprint_cpu.md``.
"""
from __future__ import annotations

import hashlib
import os
import os.path as osp
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..data.wrappers import wrapped_datasets

#: Accepted values of the fingerprint mode (``ReproducibilityHook(fingerprint=...)``).
MODES = ('labels', 'content', 'stat')
#: Data-info keys that name an image (fingerprinted by size in ``'labels'`` mode).
IMAGE_KEYS = ('img_path',)


def file_sha256(path: str) -> str:
    """sha256 of a file's contents, read in chunks (annotation files reach GBs)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            digest.update(chunk)
    return digest.hexdigest()


def check_mode(mode: Any) -> str:
    """Return ``mode`` if it is one of :data:`MODES`, else raise a ValueError naming it."""
    if mode not in MODES:
        raise ValueError(f'ReproducibilityHook(fingerprint={mode!r}): expected one of '
                         f'{MODES} (labels: label files by content and images by size; '
                         'content: every file by content; stat: every file by size).')
    return mode


def _relative(path: str, roots: List[str]) -> str:
    """``path`` relative to the longest of ``roots`` containing it (else unchanged)."""
    norm = osp.normpath(path)
    for root in sorted(roots, key=len, reverse=True):
        root = osp.normpath(root)
        if norm == root or norm.startswith(root + os.sep):
            return osp.relpath(norm, root)
    return path


def sample_files(info: Dict[str, Any]) -> Iterator[Tuple[str, str]]:
    """``(key, path)`` of every file a data info points to (its ``*_path`` string keys)."""
    for key in sorted(info):
        value = info[key]
        if key.endswith('_path') and isinstance(value, str) and value:
            yield key, value


def _file_term(path: str, by_content: bool) -> str:
    if not osp.isfile(path):
        return 'missing'
    return file_sha256(path) if by_content else f'size={os.stat(path).st_size}'


def data_fingerprint(dataset: Any, mode: str = 'labels') -> Dict[str, Any]:
    """Fingerprint of the annotation files and of every sample's files behind ``dataset``.

    Paths are taken relative to the dataset's ``data_root``, so the same data in
    another directory (another machine) has the same fingerprint.

    Args:
        dataset: The training dataset (wrappers are searched for ``data_root`` and
            ``ann_file``).
        mode: One of :data:`MODES` (see the module docstring). Defaults to
            ``'labels'``.

    Returns:
        dict: ``ann_files`` (relative path -> sha256 of the contents),
        ``annotations_sha256`` (over all of them), ``images_sha256`` (over the image
        paths trained on, in dataset order, after filtering), ``files`` (per data-info
        key: ``count``, ``by`` (``content`` or ``size``) and ``sha256`` over every
        file's relative path and content hash or size), ``mode``, ``num_samples`` and
        ``dataset`` (class name).
    """
    check_mode(mode)
    roots = [r for r in _find(dataset, 'data_root') if r]
    ann_files: Dict[str, Optional[str]] = {}
    for path in sorted(set(_find(dataset, 'ann_file'))):
        if osp.isfile(path):
            ann_files[_relative(path, roots)] = file_sha256(path)
        elif path:
            ann_files[_relative(path, roots)] = None
    combined = hashlib.sha256()
    for name in sorted(ann_files):
        combined.update(f'{name}\0{ann_files[name]}\n'.encode())
    images = hashlib.sha256()
    files: Dict[str, Dict[str, Any]] = {}
    digests: Dict[str, Any] = {}
    count = 0
    for info in _data_infos(dataset):
        path = str(info.get('img_path', info.get('file_name', '')))
        images.update(_relative(path, roots).encode() + b'\n')
        count += 1
        for key, path in sample_files(info):
            by_content = mode == 'content' or (mode == 'labels' and key not in IMAGE_KEYS)
            if key not in files:
                files[key] = dict(count=0, by='content' if by_content else 'size')
                digests[key] = hashlib.sha256()
            files[key]['count'] += 1
            term = _file_term(path, by_content)
            digests[key].update(f'{_relative(path, roots)}\0{term}\n'.encode())
    for key, digest in digests.items():
        files[key]['sha256'] = digest.hexdigest()
    return dict(dataset=type(dataset).__name__, ann_files=ann_files,
                annotations_sha256=combined.hexdigest(), images_sha256=images.hexdigest(),
                files=files, mode=mode, num_samples=count)


def _find(dataset: Any, attr: str) -> Iterable[str]:
    """The string values of ``attr`` on ``dataset`` and the datasets it wraps."""
    for inner in wrapped_datasets(dataset):
        value = getattr(inner, attr, None)
        if isinstance(value, str):
            yield value


def _data_infos(dataset: Any) -> Iterable[dict]:
    get = getattr(dataset, 'get_data_info', None)
    if get is None:
        return
    for i in range(len(dataset)):
        info = get(i)
        if isinstance(info, dict):
            yield info
