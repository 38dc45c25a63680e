"""Helpers for tests that train real detectors through tools/train.py."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import os.path as osp
import pprint
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from mmrepro.resume.checkpoint_io import safe_load
from support.mmdet_data import aug_pipeline

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
#: ``tests/``: on a training subprocess's ``PYTHONPATH``, its configs can import the
#: test plugins as ``support.<module>`` (``custom_imports``).
TESTS = osp.join(REPO, 'tests')
#: Working directory of every training subprocess: an empty directory, so that a test
#: config that lost its data override fails instead of reading the repo's data/demo.
RUN_CWD = tempfile.mkdtemp(prefix='mmrepro-tests-cwd-')
CONFIGS = {
    'retinanet': osp.join(REPO, 'configs', 'retinanet_r18_fpn_3e_tinycoco.py'),
    'faster_rcnn': osp.join(REPO, 'configs', 'faster-rcnn_r18_fpn_3e_tinycoco.py'),
}
#: The test detectors: mmdet's ResNet-18 at a quarter of its width (base_channels=16:
#: stages of 16-128 channels), a 64-channel FPN and heads. Same layers and code paths as
#: the repo configs, checkpoints of ~10 MB instead of ~160 MB, and faster iterations.
NARROW = {
    'retinanet': """model = dict(
    backbone=dict(base_channels=16), neck=dict(in_channels=[16, 32, 64, 128], out_channels=64),
    bbox_head=dict(in_channels=64, feat_channels=64))""",
    'faster_rcnn': """model = dict(
    backbone=dict(base_channels=16), neck=dict(in_channels=[16, 32, 64, 128], out_channels=64),
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(bbox_roi_extractor=dict(out_channels=64),
                  bbox_head=dict(in_channels=64, fc_out_channels=256)))""",
}
#: Random augmentations every test config uses (:func:`support.mmdet_data.aug_pipeline`
#: at the detectors' scales), as config text.
AUG_PIPELINE = pprint.pformat(aug_pipeline([(160, 128), (144, 112), (176, 144)]),
                              sort_dicts=False)


def iter_loop(sampler: str, max_iters: int, milestone: int, interval: int) -> str:
    """An ``IterBasedTrainLoop`` variant of the test configs over ``sampler``, with an lr
    step at ``milestone`` and a checkpoint every ``interval`` iterations."""
    return f"""
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={max_iters}, val_interval=100)
train_dataloader = dict(sampler=dict(_delete_=True, type='{sampler}', shuffle=True))
param_scheduler = [dict(type='MultiStepLR', by_epoch=False, milestones=[{milestone}], gamma=0.1)]
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval={interval}))
log_processor = dict(by_epoch=False)
"""


#: The iteration loop + InfiniteSampler variant of the test configs (24 iterations).
ITER_LOOP = (iter_loop('InfiniteSampler', max_iters=24, milestone=16, interval=8)
             + "custom_hooks = [dict(type='ReproducibilityHook')]\n")


def env_home() -> str:
    """Where ``tools/setup_env.sh`` keeps the test environments and its caches:
    ``$MMREPRO_ENV_HOME``, else ``${XDG_CACHE_HOME:-~/.cache}/mmrepro``."""
    return os.environ.get('MMREPRO_ENV_HOME') or osp.join(
        os.environ.get('XDG_CACHE_HOME') or osp.expanduser('~/.cache'), 'mmrepro')


def pythonpath(*first: str) -> str:
    """``first`` then the current ``PYTHONPATH`` (which may hold the stack's packages,
    e.g. on a GPU machine set up that way), for a subprocess's environment."""
    return os.pathsep.join(p for p in (*first, os.environ.get('PYTHONPATH')) if p)


def write_config(path: str, model: str, data_root: str, extra: str = '',
                 num_workers: int = 2, persistent: bool = True, validate: bool = False,
                 max_epochs: int = 3, test: bool = False) -> str:
    """Write a test config inheriting a repo config, narrowed (:data:`NARROW`), on the
    generated data.

    Two files: ``<name>_data.py`` points the repo config at ``data_root`` (every
    loader, the pipeline, the schedule) and ``path`` inherits it and adds ``extra``.
    In one file, an ``extra`` that assigns ``train_dataloader`` again would replace
    the data override (a Python assignment, not a merge) and the run would silently
    read the repo config's relative ``data/demo/``; across files MMEngine merges.
    ``extra`` can use the name ``data_root``. ``validate``: keep the validation loop;
    ``test``: keep the test loader and evaluator (the validation data), for
    ``tools/test.py``.
    """
    persistent = persistent and num_workers > 0
    root = data_root.rstrip('/') + '/'
    val = '' if validate else 'val_dataloader = None\nval_cfg = None\nval_evaluator = None\n'
    tested = ("test_dataloader = dict(dataset=dict(data_root=data_root))\n"
              "test_evaluator = dict(ann_file=data_root + 'annotations/val.json')\n"
              if test else 'test_dataloader = None\ntest_cfg = None\ntest_evaluator = None\n')
    layer = f"""_base_ = {CONFIGS[model]!r}
{NARROW[model]}
data_root = {root!r}
train_pipeline = {AUG_PIPELINE}
train_dataloader = dict(num_workers={num_workers}, persistent_workers={persistent},
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(data_root=data_root))
val_evaluator = dict(ann_file=data_root + 'annotations/val.json')
{tested}train_cfg = dict(max_epochs={max_epochs}, val_interval=1)
# Mid-epoch checkpoints next to the epoch ones (iteration 10 is batch 2 of epoch 2).
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]
{val}"""
    layer_path = osp.splitext(path)[0] + '_data.py'
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(layer_path, 'w') as f:
        f.write(layer)
    with open(path, 'w') as f:
        f.write(f'_base_ = {layer_path!r}\ndata_root = {root!r}\n{extra}\n')
    return path


def run_train(config: str, work_dir: str, *args: str, check: bool = True,
              env: Optional[Dict[str, str]] = None,
              timeout: int = 900) -> subprocess.CompletedProcess:
    """Run ``tools/train.py config --work-dir work_dir *args`` in a subprocess."""
    cmd = [sys.executable, osp.join(REPO, 'tools', 'train.py'), config, '--work-dir',
           work_dir, *args]
    proc = subprocess.run(cmd, cwd=RUN_CWD, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f'training failed ({proc.returncode}): {" ".join(cmd)}\n'
                             f'{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}')
    return proc


def checkpoint(work_dir: str, name: Optional[str] = None) -> str:
    """Path of checkpoint ``name`` in ``work_dir`` (default: the last one saved)."""
    if name is not None:
        return osp.join(work_dir, name)
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        return f.read().strip()


def prune_checkpoints(work_dir: str) -> None:
    """Delete every checkpoint of ``work_dir`` but the last (keeps the disk peak low)."""
    last = checkpoint(work_dir)
    for name in os.listdir(work_dir):
        path = osp.join(work_dir, name)
        if name.endswith('.pth') and path != last:
            os.remove(path)


def state_digest(path: str) -> str:
    """sha256 over the sorted (name, dtype, shape, bytes) of a checkpoint's state_dict."""
    state = safe_load(path, mmap=True)['state_dict']
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].contiguous()
        digest.update(name.encode())
        digest.update(str((tensor.dtype, tuple(tensor.shape))).encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes()
                      if tensor.numel() else b'')
    return digest.hexdigest()


def run_log(work_dir: str) -> str:
    """Text of the newest run's log file in ``work_dir``."""
    with open(sorted(glob.glob(osp.join(work_dir, '*', '*.log')))[-1]) as f:
        return f.read()


def train_log(work_dir: str, run: int = -1) -> List[dict]:
    """The per-iteration training scalars of the ``run``-th run in ``work_dir``."""
    files = sorted(glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json')))
    with open(files[run]) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if 'loss' in r]


def losses(rows: Sequence[dict]) -> List[tuple]:
    """(iter, every loss_* value) per logged iteration."""
    return [(r['iter'], tuple(sorted((k, v) for k, v in r.items() if k.startswith('loss'))))
            for r in rows]


def atomics(device: str) -> List[str]:
    """What ``python -m support.inductor_atomics DEVICE`` prints, as words: whether
    inductor's accumulating ``index_put`` uses atomics with and without deterministic
    mode (a fresh process: dynamo's caches and the mode stay out of this one). Two
    threads: on one, inductor's C++ code accumulates in order, without atomics."""
    proc = subprocess.run([sys.executable, '-m', 'support.inductor_atomics', device],
                          cwd=RUN_CWD, capture_output=True, text=True, timeout=600,
                          env={**os.environ, 'PYTHONPATH': pythonpath(TESTS, REPO),
                               'OMP_NUM_THREADS': '2'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()


def skip_unless_triton_kernels_run() -> None:
    """Skip the calling test module where mmrepro's Triton kernels cannot run.

    They run on CUDA, and on CPU tensors through Triton's interpreter, which
    ``tests/conftest.py`` turns on (``TRITON_INTERPRET=1``) where no GPU is visible.
    """
    import pytest
    pytest.importorskip('triton', reason='triton is not installed (tools/setup_env.sh '
                        'installs triton==3.7.1, whose interpreter runs these kernels on CPU)')
    from mmrepro.ops.csr_kernels import triton_status
    usable, why_not = triton_status()
    if not usable:
        pytest.skip(f'mmrepro\'s Triton kernels do not run here: {why_not}',
                    allow_module_level=True)
    if not torch.cuda.is_available() and not os.environ.get('TRITON_INTERPRET'):
        pytest.skip('no CUDA device and TRITON_INTERPRET is unset (tests/conftest.py sets it)',
                    allow_module_level=True)


def host_syncs(fn: Callable[[], Any]) -> int:
    """Host synchronisations CUDA reports while ``fn()`` runs (torch's sync debug mode)."""
    import warnings
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        torch.cuda.set_sync_debug_mode('warn')
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode('default')
    return sum('synchronizing' in str(w.message) for w in caught)
