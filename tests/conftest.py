"""Session-wide fixtures: the generated datasets and a cache of training runs.

The suite runs in pytest's ``importlib`` import mode (pyproject.toml), so test modules
of the same name in different directories do not collide; ``tests/`` goes on
``sys.path`` here so that every test imports its helpers from the ``support`` package.

Under pytest-xdist (``tools/test.sh`` runs two workers) the datasets and the cached
runs are made once for the whole session, whichever worker asks first (a file lock per
item), and every worker uses the same paths.
"""
from __future__ import annotations

import contextlib
import os
import os.path as osp
import sys
from typing import Dict, Iterator, Tuple

import pytest
import torch

# Without a GPU, Triton kernels run on CPU tensors through Triton's interpreter. Read
# when a kernel is first defined (mmrepro defines them on first use), so set it here.
if not torch.cuda.is_available():
    os.environ.setdefault('TRITON_INTERPRET', '1')
# albumentations asks PyPI for a newer release at every import (every training process
# with Albu); the tests stay off the network.
os.environ.setdefault('NO_ALBUMENTATIONS_UPDATE', '1')
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))  # the support package
from support.repro_utils import checkpoint, prune_checkpoints, run_train, state_digest, write_config


def session_dir(tmp_path_factory, name: str) -> str:
    """``name`` in a directory every xdist worker of the session shares (this process's
    own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'):
        base = base.parent  # pytest-N/, above each worker's popen-gwK/
    return str(base / name)


@contextlib.contextmanager
def once(path: str) -> Iterator[bool]:
    """Hold the session's lock on ``path``; yield whether it still has to be made."""
    from filelock import FileLock
    os.makedirs(osp.dirname(path), exist_ok=True)
    with FileLock(path + '.lock'):
        done = path + '.done'
        yield not osp.exists(done)
        open(done, 'w').close()


@pytest.fixture(scope='session')
def data_root(tmp_path_factory) -> str:
    """The tiny COCO-format dataset (16 train / 8 val PNGs)."""
    from mmrepro.demo import make_tiny_coco
    root = session_dir(tmp_path_factory, 'data')
    with once(root) as todo:
        if todo:
            make_tiny_coco(root)
    return root


@pytest.fixture(scope='session')
def seg_data_root(tmp_path_factory) -> str:
    """The tiny segmentation dataset (8 train / 4 val label maps); copy it to edit it."""
    from mmrepro.demo import make_tiny_seg
    root = session_dir(tmp_path_factory, 'seg')
    with once(root) as todo:
        if todo:
            make_tiny_seg(root)
    return root


#: Tags of the cached runs that tests resume from: they keep every checkpoint.
RESUMED_FROM = ('base', 'iterloop', 'iterloop-finite', 'hooks', 'bsr')


class RunCache:
    """Train each distinct (model, options) once per session; tests share the runs.

    Runs that no test resumes from keep only their last checkpoint."""

    def __init__(self, root: str, data_root: str) -> None:
        self.root, self.data_root = root, data_root
        self._done: Dict[Tuple, str] = {}

    def get(self, model: str, tag: str = 'base', *args: str, **config_kw) -> str:
        """Work dir of the run ``(model, tag)``, training it on first use."""
        key = (model, tag)
        if key not in self._done:
            work_dir = osp.join(self.root, f'{model}-{tag}')
            with once(work_dir) as todo:
                if todo:
                    config = write_config(osp.join(work_dir + '-cfg', f'{model}_{tag}.py'),
                                          model, self.data_root, **config_kw)
                    run_train(config, work_dir, *args)
                    if tag not in RESUMED_FROM:
                        prune_checkpoints(work_dir)
            self._done[key] = work_dir
        return self._done[key]

    def digest(self, model: str, tag: str = 'base', *args: str, **config_kw) -> str:
        """state_dict digest of the final checkpoint of run ``(model, tag)``."""
        return state_digest(checkpoint(self.get(model, tag, *args, **config_kw)))


@pytest.fixture(scope='session')
def runs(tmp_path_factory, data_root) -> RunCache:
    """The session's shared training runs."""
    return RunCache(session_dir(tmp_path_factory, 'runs'), data_root)


def pytest_collection_modifyitems(config, items):
    """Skip the ``cuda`` tier where no GPU is visible, saying why."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason='needs a CUDA device (torch.cuda.is_available() is '
                            'False); run `bash tools/test_cuda.sh` on a GPU machine')
    for item in items:
        if 'cuda' in item.keywords:
            item.add_marker(skip)
