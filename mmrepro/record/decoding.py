"""What decides the pixels a run trains on: image decoders and a decoded-sample canary.

Two runs with the same files, config and seed can still train on different pixels when
the image decoders differ (OpenCV built with another libjpeg-turbo, libpng or libtiff,
another mmcv ``imread`` backend). The record holds the decoders' versions
(:func:`decoding_versions`) and a digest of the first training samples loaded and
passed through the pipeline's deterministic prefix (:func:`decode_canary`): the same
files decoded differently give another canary.
"""
from __future__ import annotations

import copy
import hashlib
from importlib import metadata
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..data.wrappers import wrapped_datasets
from ..rng.host_state import get_host_states, set_host_states
from ..rng.owned import is_generator

#: Distributions recorded by version when installed: ``(record key, distribution)``.
DISTRIBUTIONS = (('pycocotools', 'pycocotools'), ('torchvision', 'torchvision'),
                 ('turbojpeg', 'PyTurboJPEG'), ('tifffile', 'tifffile'))
#: Transforms that draw randomness though neither marked (``cache_randomness``) nor
#: named ``Random*`` nor holding a ``prob``; a base class of this name counts too.
RANDOM_TRANSFORMS = ('Albu', 'Mosaic', 'MixUp', 'CopyPaste', 'CachedMosaic', 'CachedMixUp',
                     'YOLOXHSVRandomAug', 'PhotoMetricDistortion', 'RandomChoice',
                     'RandomApply', 'AutoAugment', 'RandAugment')
#: How deep transforms holding transforms (``KeyMapper``, ``Compose``) are searched.
_MAX_NESTING = 4


def opencv_codecs(build_info: str) -> Dict[str, str]:
    """The image codecs of ``cv2.getBuildInformation()``'s ``Media I/O`` section.

    Args:
        build_info: The text of ``cv2.getBuildInformation()``.

    Returns:
        dict: ``{'JPEG': 'build-libjpeg-turbo (ver 3.1.2-70)', 'PNG': ..., 'OpenEXR':
        'NO', ...}``: every entry one level below the section's header (details nested
        deeper, such as ``SIMD Support``, are left out); empty without the section.
    """
    codecs: Dict[str, str] = {}
    header: Optional[int] = None
    entry: Optional[int] = None
    for line in build_info.splitlines():
        indent = len(line) - len(line.lstrip())
        if header is None:
            if line.strip().startswith('Media I/O:'):
                header = indent
            continue
        if not line.strip() or indent <= header:
            break
        entry = indent if entry is None else entry
        name, sep, value = line.strip().partition(':')
        if sep and indent == entry:
            codecs[name.strip()] = value.strip()
    return codecs


def decoding_versions() -> Dict[str, Any]:
    """Versions of the libraries that decode images; those not installed are left out.

    Returns:
        dict: ``opencv`` (``cv2.__version__``), ``opencv_codecs`` (see
        :func:`opencv_codecs`), ``pillow``, ``pycocotools``, ``torchvision``,
        ``turbojpeg`` (PyTurboJPEG), ``tifffile``, and ``mmcv_imread_backend`` (the
        backend ``mmcv.imfrombytes`` decodes with unless told another).
    """
    out: Dict[str, Any] = {}
    try:
        import cv2
        out['opencv'] = cv2.__version__
        out['opencv_codecs'] = opencv_codecs(cv2.getBuildInformation())
    except Exception:  # a record without OpenCV is still a record
        pass
    try:
        import PIL
        out['pillow'] = PIL.__version__
    except Exception:
        pass
    for key, dist in DISTRIBUTIONS:
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        from mmcv.image import io as mmcv_io
        out['mmcv_imread_backend'] = mmcv_io.imread_backend
    except Exception:
        pass
    return out


def is_random(transform: Any, depth: int = 0) -> bool:
    """Whether ``transform`` may draw randomness (so stops the canary).

    Random: its class or a base carries ``_methods_with_randomness`` (mmcv's
    ``cache_randomness``), a class in its bases is named ``Random*`` or is one of
    :data:`RANDOM_TRANSFORMS`, it has a ``prob`` attribute, or a transform it holds
    (:func:`_held`) is random; or it holds a generator of its own (a ``random.Random``,
    numpy ``Generator``/``RandomState`` or ``torch.Generator`` attribute), whose draws
    differ from process to process.
    """
    cls = type(transform)
    names = [base.__name__ for base in cls.__mro__]
    if (hasattr(cls, '_methods_with_randomness') or hasattr(transform, 'prob')
            or any(n.startswith('Random') or n in RANDOM_TRANSFORMS for n in names)
            or any(is_generator(v) for v in getattr(transform, '__dict__', {}).values())):
        return True
    return depth < _MAX_NESTING and any(is_random(t, depth + 1) for t in _held(transform))


def _held(transform: Any) -> List[Any]:
    """Transforms ``transform`` holds: ``transforms`` (a list or a Compose, as in
    ``KeyMapper``) and MMDetection ``MultiBranch``'s ``branch_pipelines``."""
    held = [getattr(transform, 'transforms', None)]
    branches = getattr(transform, 'branch_pipelines', None)
    if isinstance(branches, dict):
        held += list(branches.values())
    out: List[Any] = []
    for item in held:
        item = getattr(item, 'transforms', item)  # a Compose holds a list
        if isinstance(item, (list, tuple)):
            out += [t for t in item if callable(t)]  # Albu's ``transforms`` are dicts
    return out


def _pipeline_dataset(dataset: Any) -> Optional[Tuple[Any, List[Any]]]:
    """The first (wrapped) dataset with ``get_data_info`` and a Compose, and its list."""
    for ds in wrapped_datasets(dataset):
        transforms = getattr(getattr(ds, 'pipeline', None), 'transforms', None)
        if hasattr(ds, 'get_data_info') and isinstance(transforms, list):
            return ds, transforms
    return None


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    # Through a uint8 view: numpy has no bfloat16.
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


def _number(value: Any) -> Any:
    """``value`` as a python int/float/bool (numpy scalars too), else None."""
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, np.generic) and isinstance(value.item(), (bool, int, float)):
        return value.item()
    return None


def _entry(value: Any) -> Optional[Tuple[str, Tuple[int, ...], bytes]]:
    """``(dtype, shape, bytes)`` of a value the canary digests; None to skip it."""
    tensor = getattr(value, 'tensor', None)  # mmdet box types
    if isinstance(tensor, torch.Tensor):
        value = tensor
    if isinstance(value, torch.Tensor):
        return str(value.dtype), tuple(value.shape), _tensor_bytes(value)
    if isinstance(getattr(value, 'masks', None), np.ndarray):  # mmdet BitmapMasks
        value = value.masks
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return None
        array = np.ascontiguousarray(value)
        return str(array.dtype), array.shape, array.tobytes()
    if isinstance(value, (list, tuple)) and value:
        numbers = [_number(v) for v in value]
        if all(n is not None for n in numbers):
            return 'repr', (len(numbers),), repr(tuple(numbers)).encode()
        return None
    number = _number(value)
    if number is not None:
        return 'repr', (), repr(number).encode()
    return None


#: The results the canary digests: the decoded image and its sizes. Annotations are
#: left out (the data fingerprint holds them by content), so that the canary names the
#: decoding alone.
CANARY_KEYS = ('img', 'img_shape', 'ori_shape', 'pad_shape', 'scale_factor')


def _digest_results(digest: Any, results: Dict[str, Any]) -> None:
    for key in sorted(k for k in results if k in CANARY_KEYS):
        entry = _entry(results[key])
        if entry is None:
            continue
        dtype, shape, data = entry
        digest.update(f'{key}|{dtype}|{shape}|{len(data)}|'.encode())
        digest.update(data)


def _canary(dataset: Any, count: int) -> Dict[str, Any]:
    found = _pipeline_dataset(dataset)
    if found is None:
        return {'skipped': 'no dataset with get_data_info() and a Compose pipeline'}
    ds, transforms = found
    if not getattr(ds, '_fully_initialized', True):
        ds.full_init()  # lazy_init=True: as the first fetch would
    prefix: List[Any] = []
    stopped_at = None
    for transform in transforms:
        if is_random(transform):
            stopped_at = type(transform).__name__
            break
        prefix.append(transform)
    digest = hashlib.sha256()
    dropped: List[List[Any]] = []
    samples = min(count, len(ds))
    for index in range(samples):
        results = copy.deepcopy(ds.get_data_info(index))
        digest.update(f'sample {index}\n'.encode())
        for transform in prefix:
            results = transform(results)
            if results is None:
                dropped.append([index, type(transform).__name__])
                digest.update(f'dropped by {type(transform).__name__}\n'.encode())
                break
        else:
            _digest_results(digest, results)
    out = dict(samples=samples, transforms=[type(t).__name__ for t in prefix],
               stopped_at=stopped_at, sha256=digest.hexdigest())
    if dropped:
        out['dropped'] = dropped  # [sample index, transform that returned None]
    return out


def decode_canary(dataset: Any, count: int = 2) -> Dict[str, Any]:
    """Digest of the first ``count`` samples through the pipeline's deterministic prefix.

    The first dataset in ``dataset``'s wrappers with ``get_data_info`` and a Compose
    ``pipeline`` gives samples ``0..count-1`` (its own order); each sample's data info
    (a deep copy) goes through the transforms up to the first random one
    (:func:`is_random`). The results of :data:`CANARY_KEYS` (the image as an array or
    tensor, its sizes as numbers) are hashed by key, dtype, shape and bytes, keys in
    sorted order; paths (which differ between machines) and annotations are not.
    The host RNG states (python, numpy, torch CPU) are restored afterwards.

    Args:
        dataset: The training dataset, built (wrapped or not).
        count: How many samples to digest.

    Returns:
        dict: ``samples`` (how many were digested), ``transforms`` (class names of the
        transforms applied), ``stopped_at`` (class name of the first random transform,
        None when there is none), ``sha256`` (hex) and, where a transform returned None,
        ``dropped`` (``[sample index, transform name]`` pairs). ``{'skipped': reason}``
        without such a dataset; ``{'error': 'ExcType: message'}`` where it failed.
    """
    try:
        states = get_host_states()
        try:
            return _canary(dataset, count)
        finally:
            set_host_states(states)
    except Exception as exc:  # never lose a record over its canary
        return {'error': f'{type(exc).__name__}: {exc}'}


def decoding_record(dataset: Any) -> Dict[str, Any]:
    """The decoding section of a run record.

    Args:
        dataset: The training dataset, built.

    Returns:
        dict: ``versions`` (:func:`decoding_versions`) and ``canary``
        (:func:`decode_canary` of the first two samples).
    """
    return dict(versions=decoding_versions(), canary=decode_canary(dataset))
