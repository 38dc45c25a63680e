"""The run record: everything needed to compare a run with a teammate's."""
from __future__ import annotations

import hashlib
import json
import os
import os.path as osp
import platform
import sys
from importlib import metadata
from typing import Any, Dict, Iterable, Optional

import torch

#: Environment variables that change numerical results or their reproducibility.
RELEVANT_ENV = ('CUBLAS_WORKSPACE_CONFIG', 'PYTHONHASHSEED', 'CUDA_VISIBLE_DEVICES',
                'OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'NCCL_ALGO', 'NCCL_PROTO',
                'TORCH_CUDNN_V8_API_ENABLED', 'CUDA_LAUNCH_BLOCKING')
PACKAGES = ('torch', 'mmengine', 'mmcv', 'mmdet', 'numpy', 'mmrepro')
RECORD_NAME = 'run_record.json'


def versions() -> Dict[str, Optional[str]]:
    """Versions of python, the stack, CUDA and cuDNN."""
    out: Dict[str, Optional[str]] = {'python': platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out['cuda'] = torch.version.cuda
    out['cudnn'] = (str(torch.backends.cudnn.version())
                    if torch.backends.cudnn.is_available() else None)
    return out


def devices() -> Dict[str, Any]:
    """The CPU and every visible CUDA device, by name."""
    cuda = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available() else [])
    return dict(cpu=platform.processor() or platform.machine(), cuda=cuda,
                torch_threads=torch.get_num_threads())


def config_hash(cfg_text: str) -> str:
    """sha256 of the resolved config text, without the keys that only name places."""
    kept = [line for line in cfg_text.splitlines()
            if not line.startswith(('work_dir', 'launcher', 'resume', 'load_from'))]
    return hashlib.sha256('\n'.join(kept).encode()).hexdigest()


def data_fingerprint(dataset: Any) -> Dict[str, Any]:
    """sha256 of the annotation files and the image list behind ``dataset``."""
    ann_files = sorted(set(_find(dataset, 'ann_file')))
    digest = hashlib.sha256()
    for path in ann_files:
        if osp.isfile(path):
            with open(path, 'rb') as f:
                digest.update(hashlib.sha256(f.read()).digest())
    images = hashlib.sha256()
    count = 0
    for info in _data_infos(dataset):
        images.update(str(info.get('img_path', info.get('file_name', ''))).encode())
        count += 1
    return dict(ann_files=ann_files, annotations_sha256=digest.hexdigest(),
                images_sha256=images.hexdigest(), num_samples=count)


def collect_run_record(runner: Any) -> Dict[str, Any]:
    """The record of ``runner``'s run (settings from ``Runner.set_randomness``)."""
    from .patches.runner_randomness import SETTINGS_ATTR
    from .seeding import get_world_size
    settings = dict(getattr(runner, SETTINGS_ATTR, None) or {})
    backend = (torch.distributed.get_backend()
               if torch.distributed.is_available() and torch.distributed.is_initialized()
               else None)
    record = dict(
        seed=settings.get('seed'), randomness=settings, world_size=get_world_size(),
        backend=backend, launcher=runner.launcher, versions=versions(), devices=devices(),
        env={k: os.environ.get(k) for k in RELEVANT_ENV},
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        config_sha256=config_hash(runner.cfg.pretty_text),
        argv=sys.argv,
    )
    try:
        record['data'] = data_fingerprint(runner.train_dataloader.dataset)
    except Exception as err:  # a Runner without train data
        record['data'] = dict(error=f'{type(err).__name__}: {err}')
    return record


def write_run_record(runner: Any, record: Dict[str, Any]) -> str:
    """Write ``record`` as JSON into the run's log dir; return the path."""
    path = osp.join(runner.log_dir, RECORD_NAME)
    with open(path, 'w') as f:
        json.dump(record, f, indent=2, sort_keys=True, default=str)
    return path


def _find(obj: Any, attr: str, depth: int = 0) -> Iterable[str]:
    if depth > 4 or obj is None:
        return
    value = getattr(obj, attr, None)
    if isinstance(value, str):
        yield value
    for inner in [getattr(obj, 'dataset', None), *getattr(obj, 'datasets', [])]:
        yield from _find(inner, attr, depth + 1)


def _data_infos(dataset: Any) -> Iterable[dict]:
    get = getattr(dataset, 'get_data_info', None)
    if get is None:
        return
    for i in range(len(dataset)):
        info = get(i)
        if isinstance(info, dict):
            yield info
