"""Session-wide fixtures: the generated datasets and a cache of training runs.

The suite runs in pytest's ``importlib`` import mode (pyproject.toml), so test modules
of the same name in different directories do not collide; ``tests/`` goes on
``sys.path`` here so that every test imports its helpers from the ``support`` package.

Under pytest-xdist (``tools/test.sh`` runs two workers) the datasets, the cached runs
and the layout runs are made once for the whole session, whichever worker asks first (a
file lock per item), and every worker uses the same paths.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import os.path as osp
import sys

import pytest
import torch

# Without a GPU, Triton kernels run on CPU tensors through Triton's interpreter. Read
# when a kernel is first defined (mmrepro defines them on first use), so set it here.
if not torch.cuda.is_available():
    os.environ.setdefault('TRITON_INTERPRET', '1')
# albumentations asks PyPI for a newer release at every import (every training process
# with Albu); the tests stay off the network.
os.environ.setdefault('NO_ALBUMENTATIONS_UPDATE', '1')
# Inductor compiles its C++ kernels in the compiling process, not in a pool of forked
# workers: a fork from a process whose threads hold locks can stall for minutes on 2
# cores. The generated kernels are the same either way.
os.environ.setdefault('TORCHINDUCTOR_COMPILE_THREADS', '1')
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))  # the support package
from support.layout_runs import LayoutRuns
from support.run_cache import RunCache, once


def session_dir(tmp_path_factory, name: str) -> str:
    """``name`` in a directory every xdist worker of the session shares (this process's
    own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'):
        base = base.parent  # pytest-N/, above each worker's popen-gwK/
    return str(base / name)


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


@pytest.fixture(scope='session')
def runs(tmp_path_factory, data_root) -> RunCache:
    """The session's shared training runs (one set of options per (model, tag))."""
    return RunCache(session_dir(tmp_path_factory, 'runs'), data_root)


@pytest.fixture(scope='session')
def layout_runs(tmp_path_factory, data_root) -> LayoutRuns:
    """The session's 1-epoch runs in several process layouts (``support.layout_runs``),
    shared by the tests of the layouts and of ``mmrepro-check --against``."""
    return LayoutRuns(session_dir(tmp_path_factory, 'layouts'), data_root, max_epochs=1)


@pytest.fixture(scope='session')
def base_checked(tmp_path_factory, runs):
    """``mmrepro-check CONFIG --against BASE`` on the session's RetinaNet ``base`` run, as a
    teammate checks it, from the runs' working directory: ``(work dir, exit code, what it
    printed)``. Made once for the session: test_check_against.py reads its verdict,
    test_repro_diff.py compares its run with the baseline."""
    from support.repro_utils import RUN_CWD

    from mmrepro.cli.check_repro import main
    baseline = runs.get('retinanet', 'base')
    root = session_dir(tmp_path_factory, 'base-checked')
    work_dir, printed = osp.join(root, 'check'), osp.join(root, 'printed.json')
    with once(root) as todo:
        if todo:
            os.makedirs(root, exist_ok=True)
            with pytest.MonkeyPatch.context() as patch, \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                patch.chdir(RUN_CWD)  # where the baseline trained: the same code.git (none)
                # a teammate's shell: an in-process Runner of another test may have set it
                patch.delenv('PYTHONHASHSEED', raising=False)
                code = main([runs.config('retinanet', 'base'), '--against', baseline,
                             '--work-dir', work_dir])
            with open(printed, 'w') as f:
                json.dump({'code': code, 'out': out.getvalue()}, f)
    with open(printed) as f:
        result = json.load(f)
    return work_dir, result['code'], result['out']


def pytest_collection_modifyitems(config, items):
    """Skip the ``cuda`` tier where no GPU is visible, saying why."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason='needs a CUDA device (torch.cuda.is_available() is '
                            'False); run `bash tools/test_cuda.sh` on a GPU machine')
    for item in items:
        if 'cuda' in item.keywords:
            item.add_marker(skip)
