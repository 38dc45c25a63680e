"""Every family with replaced ops trained through the CUDA code path, on CPU.

``MMREPRO_TRITON_ON_CPU=1`` with Triton's interpreter puts CPU among the Triton devices,
so a CPU run takes the path a CUDA run takes: mmrepro's Triton RoIAlign backward, its
bilinear-primitive ops (deformable convolution, multi-scale deformable attention,
``point_sample``) and its adaptive pooling, inside the real mmdet models of the zoo
configs (made small: ``tests/support/cuda_path_training.py``). Two processes train every family
2 iterations through that path at the same time; this process trains each through the
CPU path (mmcv's and PyTorch's ops). Then, per family:

- the two CUDA-path runs are bit-identical: losses, gradients, final ``state_dict``
  (sha256 of their bytes; one worker also keeps its first gradients for the next check);
- their Triton kernels (for RTMDet, the matrix-product pooling) really ran, and the
  CPU path ran none;
- losses and first-iteration gradients match the CPU path to float rounding (at one
  thread each: the thread count changes CPU rounding).

CI's default run trains one family per kind of kernel: DCN Faster R-CNN (RoIAlign and the
bilinear primitives of deformable convolution), Deformable DETR (multi-scale deformable
attention) and RTMDet (the pooling); the other families are the full tier (marker
``full``), and the workers train only the families the session selected.
"""
from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from support.cuda_path_training import FAMILIES, train
from support.repro_utils import REPO, pythonpath, skip_unless_triton_kernels_run

pytestmark = pytest.mark.slow
skip_unless_triton_kernels_run()


#: One family per kind of kernel, in CI's default run; the others in the full tier.
DEFAULT_TIER = ('dcn-faster-rcnn', 'deformable-detr', 'rtmdet')


class CudaPathRuns:
    """Two worker processes training ``families`` through the CUDA path."""

    def __init__(self, root: str, data_root: str, families: list) -> None:
        env = {**os.environ, 'MMREPRO_TRITON_ON_CPU': '1', 'TRITON_INTERPRET': '1',
               'OMP_NUM_THREADS': '1', 'PYTHONPATH': pythonpath(REPO)}
        self.dirs = [osp.join(root, name) for name in ('a', 'b')]
        self.procs = []
        for out, mode in zip(self.dirs, ('values', 'digests'), strict=True):
            os.makedirs(out)
            with open(osp.join(out, 'output.log'), 'w') as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, osp.join(REPO, 'tests', 'support', 'cuda_path_training.py'),
                     data_root, out, mode, *families], env=env, cwd=REPO, stdout=log,
                    stderr=subprocess.STDOUT))

    def load(self, family: str) -> list:
        for proc, out in zip(self.procs, self.dirs, strict=True):
            if proc.wait(timeout=1800) != 0:
                with open(osp.join(out, 'output.log')) as log:
                    raise AssertionError(f'CUDA-path worker failed ({proc.returncode}):\n'
                                         + log.read()[-5000:])
        loaded = []
        for out in self.dirs:  # read once, then removed (the disk holds all families)
            path = osp.join(out, f'{family}.pt')
            loaded.append(torch.load(path, weights_only=True))
            os.remove(path)
        return loaded


@pytest.fixture(scope='module')
def cuda_runs(request, tmp_path_factory, data_root) -> CudaPathRuns:
    families = [item.callspec.params['family'] for item in request.session.items
                if item.originalname == TEST_NAME]  # the selected ones (-m, -k)
    runs = CudaPathRuns(str(tmp_path_factory.mktemp('cuda-path')), data_root, families)
    yield runs
    for proc in runs.procs:
        proc.kill()


def _assert_identical(a: dict, b: dict) -> None:
    assert a['losses'] == b['losses'] and a['launches'] == b['launches']
    assert len(a['grads']) == 2 and a['grads'] == b['grads']  # sha256 of every byte
    assert a['state'] == b['state']


TEST_NAME = 'test_cuda_path_trains_bit_exactly_and_matches_the_cpu_path'


@pytest.mark.parametrize('family', [
    family if family in DEFAULT_TIER else pytest.param(family, marks=pytest.mark.full)
    for family in FAMILIES])
def test_cuda_path_trains_bit_exactly_and_matches_the_cpu_path(family, data_root, cuda_runs,
                                                                monkeypatch):
    from mmrepro.ops import routing
    monkeypatch.setattr(routing, 'DEVICES', {'cuda'})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers: the thread count changes CPU rounding
    try:
        cpu = train(family, data_root)
    finally:
        torch.set_num_threads(threads)
    cuda, again = cuda_runs.load(family)
    _assert_identical(cuda, again)
    assert sorted(cuda['launches']) == sorted(FAMILIES[family][1]), cuda['launches']
    assert cpu['launches'] == {}
    for i, (ours, theirs) in enumerate(zip(cuda['losses'], cpu['losses'], strict=True)):
        for key, value in theirs.items():
            assert ours[key] == pytest.approx(value, rel=1e-5, abs=1e-7), (i, key)
    assert cuda['first_grads'].keys() == cpu['grads'][0].keys()
    for name, theirs in cpu['grads'][0].items():
        scale = theirs.abs().max().item()
        torch.testing.assert_close(cuda['first_grads'][name], theirs, rtol=0,
                                   atol=1e-5 * scale + 1e-12, msg=name)
