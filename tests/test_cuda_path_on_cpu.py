"""A real detector trained through the CUDA code path, on CPU.

``MMREPRO_TRITON_ON_CPU=1`` with Triton's interpreter makes a CPU run take the path a
CUDA run takes: mmcv's RoIAlign forward and mmrepro's Triton backward. Faster R-CNN
(the zoo config, 16 sampled RoIs per image so that the interpreted kernels take seconds)
trains 2 iterations twice through it (``check_repro``: bit-identical), and through the
CPU path, which it must match to float rounding.
The other families with replaced ops are not trained this way yet: interpreted, they
take minutes per iteration.
"""
from __future__ import annotations

import glob
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from repro_utils import REPO, pythonpath, skip_unless_triton_kernels_run

from mmrepro.checkpoint_io import safe_load
from mmrepro.cli import support_matrix as sm

pytestmark = pytest.mark.slow
skip_unless_triton_kernels_run()

OPTIONS = ('train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
           'model.train_cfg.rcnn.sampler.num=16', 'model.train_cfg.rpn_proposal.max_per_img=32')


def _check_repro(work_dir: str, data_root: str, cuda_path: bool) -> str:
    """``check_repro``: 2 iterations twice, a checkpoint after each."""
    env = {k: v for k, v in os.environ.items() if k != 'MMREPRO_TRITON_ON_CPU'}
    env.update({sm.DATA_ENV: data_root + '/', 'OMP_NUM_THREADS': '1',
                'PYTHONPATH': pythonpath(REPO), 'TRITON_INTERPRET': '1'})
    if cuda_path:
        env['MMREPRO_TRITON_ON_CPU'] = '1'
    proc = subprocess.run(
        [sys.executable, '-m', 'mmrepro.cli.check_repro', sm.config_path('faster-rcnn'),
         '--iters', '2', '--work-dir', work_dir, '--cfg-options', *OPTIONS,
         'default_hooks.checkpoint.interval=1'], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 'result: REPRODUCIBLE: 1 comparison(s) bit-identical' in proc.stdout
    return osp.join(work_dir, 'run_a')


def _weights(run: str, name: str) -> dict:
    return safe_load(osp.join(run, name))['state_dict']


def _first_losses(run: str) -> list:
    with open(glob.glob(osp.join(run, '*', '*.log'))[0]) as f:
        return [line.split('loss: ')[1].split()[0] for line in f if 'Epoch(train)' in line]


def test_faster_rcnn_cuda_path_reruns_bit_exactly_and_matches_the_cpu_path(tmp_path,
                                                                          data_root):
    cuda = _check_repro(str(tmp_path / 'cuda'), data_root, cuda_path=True)
    cpu = _check_repro(str(tmp_path / 'cpu'), data_root, cuda_path=False)
    # The same forward (mmcv's kernel on both paths): the first loss is the same number.
    assert _first_losses(cuda)[0] == _first_losses(cpu)[0]
    # The weights after 2 iterations differ by the backward's rounding only: far less
    # than one iteration's update (float32 steps of the weights themselves included).
    before, differ = _weights(cuda, 'iter_1.pth'), 0
    for name, ours in _weights(cuda, 'iter_2.pth').items():
        theirs = _weights(cpu, 'iter_2.pth')[name]
        step = (ours - before[name]).abs().max().item()
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-2 * step + 1e-8, msg=name)
        differ += not torch.equal(ours, theirs)
    assert differ > 0  # the runs took different backward kernels
