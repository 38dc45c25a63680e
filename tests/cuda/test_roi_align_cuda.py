"""DeterministicRoIAlign on CUDA: run-to-run bits and agreement with mmcv's CUDA op.

The ``cuda`` tier (``bash tools/test_cuda.sh``); skipped without a GPU.
"""
from __future__ import annotations

import pytest
import torch

from mmrepro.ops import DeterministicRoIAlign

pytestmark = pytest.mark.cuda
mmcv_ops = pytest.importorskip('mmcv.ops')


def _fpn_case(dtype=torch.float32, seed=0, n_rois=512):
    """A 2-image level of a 1333x800 FPN (stride 8) and boxes in and out of it."""
    g = torch.Generator().manual_seed(seed)
    feat = torch.randn((2, 256, 100, 168), generator=g).to('cuda', dtype)
    wh = torch.exp(torch.rand(n_rois, 2, generator=g) * 4 + 2.5)
    xy = torch.rand(n_rois, 2, generator=g) * 1400 - 60
    batch = torch.randint(0, 2, (n_rois, 1), generator=g).float()
    rois = torch.cat([batch, xy, xy + wh], 1)
    rois[:4, 3:] = rois[:4, 1:3]  # zero-size boxes
    rois[4:8, 1:] += 2000  # wholly outside
    return feat, rois.to('cuda', dtype)


def _run(layer, feat, rois, seed=1):
    x = feat.clone().requires_grad_(True)
    out = layer(x, rois)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    out.backward(g.to(out.device, out.dtype))
    return out.detach(), x.grad


@pytest.mark.parametrize('aligned', [True, False])
@pytest.mark.parametrize('sampling_ratio', [0, 2])
def test_bitwise_run_to_run_and_close_to_mmcv(aligned, sampling_ratio):
    feat, rois = _fpn_case()
    mine = DeterministicRoIAlign(7, 0.125, sampling_ratio, 'avg', aligned)
    ref = mmcv_ops.RoIAlign(7, 0.125, sampling_ratio, 'avg', aligned)
    out, grad = _run(mine, feat, rois)
    for _ in range(3):
        again = _run(mine, feat, rois)
        assert torch.equal(again[0], out) and torch.equal(again[1], grad)
    ref_out, ref_grad = _run(ref, feat, rois)
    assert torch.equal(out, ref_out)  # mmcv's own forward
    scale = ref_grad.abs().max().item()
    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-5 * scale)


def test_empty_level_and_half_precision():
    feat, rois = _fpn_case(torch.float16)
    mine = DeterministicRoIAlign(7, 0.125, 0, 'avg', True)
    out, grad = _run(mine, feat, rois[:0])
    assert out.shape == (0, 256, 7, 7) and not grad.any()
    out, grad = _run(mine, feat, rois)
    ref_out, ref_grad = _run(mmcv_ops.RoIAlign(7, 0.125, 0, 'avg', True), feat, rois)
    assert grad.dtype == torch.float16 and torch.equal(out, ref_out)
    torch.testing.assert_close(grad.float(), ref_grad.float(), rtol=2e-3, atol=2e-3)


def test_bfloat16_matches_float32_within_bf16_rounding():
    feat, rois = _fpn_case(torch.float32, n_rois=128)
    mine = DeterministicRoIAlign(7, 0.125, 2, 'avg', True)
    out32, grad32 = _run(mine, feat, rois)
    out16, grad16 = _run(mine, feat.bfloat16(), rois.bfloat16())
    assert grad16.dtype == torch.bfloat16
    assert torch.equal(_run(mine, feat.bfloat16(), rois.bfloat16())[1], grad16)
    torch.testing.assert_close(grad16.float(), grad32, rtol=2e-2, atol=2e-2)


def test_max_mode_is_deterministic_on_cuda():
    feat, rois = _fpn_case(n_rois=64)
    mine = DeterministicRoIAlign(7, 0.125, 2, 'max', True)
    first = _run(mine, feat, rois)
    second = _run(mine, feat, rois)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
def test_one_host_sync_in_the_forward_and_one_in_the_backward(dtype):
    from support.repro_utils import host_syncs
    feat, rois = _fpn_case(dtype)
    layer = DeterministicRoIAlign(7, 0.125, 0, 'avg', True)
    x = feat.clone().requires_grad_(True)
    _run(layer, feat, rois)  # warm: Triton compiles on the first call
    out = []
    assert host_syncs(lambda: out.append(layer(x, rois))) == 1  # the RoI checks
    assert host_syncs(lambda: out[0].backward(torch.ones_like(out[0]))) == 1  # entry count
