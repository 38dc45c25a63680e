"""mmcv layers, ``point_sample`` and the rotated ops routed to mmrepro's ops, only where
asked.

Routing applies on CUDA; here ``DEVICES`` gains ``'cpu'`` (with Triton's interpreter,
set by ``tests/conftest.py``) so the real layers run through the real routers. Each
test compares a routed model with an untouched copy of it.
"""
from __future__ import annotations

import copy

import pytest
import torch
from support.repro_utils import skip_unless_triton_kernels_run
from torch import nn

from mmrepro.ops import DeterministicAdaptiveAvgPool2d, deformable, routing
from mmrepro.ops.op_audit import audit_model
from mmrepro.ops.rotated import functions as rotated_functions

skip_unless_triton_kernels_run()
mmcv_ops = pytest.importorskip('mmcv.ops', reason='mmcv with compiled ops is not installed')
#: Imported by name before any router is installed, as mmrotate's R3Det does.
mmcv_rotated_feature_align = mmcv_ops.rotated_feature_align


class _Net(nn.Module):
    """One of each routed layer, plus point_sample and an adaptive pool."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.dcn = mmcv_ops.DeformConv2dPack(4, 4, 3, padding=1)
        self.dcn2 = mmcv_ops.ModulatedDeformConv2dPack(4, 8, 3, padding=1)
        for conv in (self.dcn.conv_offset, self.dcn2.conv_offset):
            nn.init.normal_(conv.weight, std=0.3)  # mmcv starts offsets at zero
        self.attn = mmcv_ops.MultiScaleDeformableAttention(8, num_heads=2, num_levels=1,
                                                           num_points=2, batch_first=True,
                                                           dropout=0.0)
        self.pool = nn.AdaptiveAvgPool2d((2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feat = self.dcn2(self.dcn(x))
        n, c, h, w = feat.shape
        query = feat.flatten(2).transpose(1, 2)
        ys, xs = torch.meshgrid(torch.linspace(0.1, 0.9, h), torch.linspace(0.1, 0.9, w),
                                indexing='ij')
        ref = torch.stack([xs, ys], -1).view(1, h * w, 1, 2).expand(n, -1, -1, -1)
        attended = self.attn(query, value=query, reference_points=ref,
                             spatial_shapes=torch.tensor([[h, w]]),
                             level_start_index=torch.tensor([0]))
        feat = attended.transpose(1, 2).reshape(n, c, h, w)
        points = torch.rand(n, 5, 2, generator=torch.Generator().manual_seed(1))
        sampled = mmcv_ops.point_sample(feat, points)
        return torch.cat([self.pool(feat).flatten(1), sampled.flatten(1)], 1)


@pytest.fixture
def on_cpu(monkeypatch):
    monkeypatch.setattr(routing, 'DEVICES', {'cuda', 'cpu'})


@pytest.fixture
def calls(monkeypatch):
    """Counts of calls into mmrepro's ops (spies around the real functions)."""
    counts = {}
    for name in ('deform_conv2d', 'ms_deform_attn', 'grid_sample'):
        real = getattr(deformable, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            counts[_name] = counts.get(_name, 0) + 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(deformable, name, spy)
    return counts


def _run(model: nn.Module) -> list:
    x = torch.randn(2, 4, 5, 6, generator=torch.Generator().manual_seed(2))
    out = model(x)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    (out * weight).sum().backward()
    return [out.detach()] + [p.grad for p in model.parameters()]


def test_routed_model_matches_original_and_keeps_its_state_dict(on_cpu, calls):
    original = _Net()
    model = copy.deepcopy(original)
    entries = audit_model(model, deterministic=True, strict=True)
    assert [(e['name'], e['action']) for e in entries] == [
        ('dcn', 'replaced'), ('dcn2', 'replaced'), ('attn', 'replaced'), ('pool', 'replaced')]
    assert entries[2]['reason'].endswith('; routed to mmrepro.ops.deformable.ms_deform_attn')
    assert type(model.pool) is DeterministicAdaptiveAvgPool2d
    state, state0 = model.state_dict(), original.state_dict()
    assert list(state) == list(state0)
    assert all(torch.equal(state[k], state0[k]) for k in state)

    ours, theirs = _run(model), _run(original)
    assert calls == {'deform_conv2d': 2, 'ms_deform_attn': 1, 'grid_sample': 1}
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert _run(copy.deepcopy(original)) and calls['deform_conv2d'] == 2  # copy: not routed


def test_no_routing_outside_the_model_forward_or_without_grad(on_cpu, calls):
    model = _Net()
    audit_model(model, deterministic=True)
    x = torch.randn(1, 4, 5, 6, requires_grad=True)
    offset = torch.zeros(1, 18, 5, 6, requires_grad=True)
    mmcv_ops.deform_conv2d(x, offset, model.dcn.weight, 1, 1)
    with torch.no_grad():
        model(x)
    assert calls == {}
    model(x)
    assert calls['deform_conv2d'] == 2


def test_no_routing_off_the_listed_devices(calls):
    model = _Net()
    audit_model(model, deterministic=True)
    model(torch.randn(1, 4, 5, 6))
    assert calls == {}


def test_point_sample_keeps_autocast_float32(on_cpu, calls):
    feat = torch.randn(2, 3, 6, 7, requires_grad=True)
    points = torch.rand(2, 5, 2, generator=torch.Generator().manual_seed(4))

    class Head(nn.Module):
        def forward(self, x):
            return mmcv_ops.point_sample(x.bfloat16(), points)

    head = Head()
    routing.activate(head)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        ours, theirs = head(feat), mmcv_ops.point_sample(feat.bfloat16(), points)
    assert calls == {'grid_sample': 1}
    assert ours.dtype == theirs.dtype == torch.float32
    torch.testing.assert_close(ours, theirs)


class _Call(nn.Module):
    """A model whose forward makes one call (so that the routers are active in it)."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _error(fn, *args):
    with pytest.raises(Exception) as info:
        fn(*args)
    # mmcv's 4D message holds a source line's indentation; the words are compared.
    return type(info.value), ' '.join(str(info.value).split())


@pytest.mark.parametrize('case', ['im2col_step', '3d input', 'bias', 'input below kernel'])
def test_routed_deform_conv_keeps_mmcvs_checks(on_cpu, calls, case):
    """The routed call raises what mmcv's op raises, on the same arguments."""
    batch, dims, bias, size = {'im2col_step': (3, 4, False, (5, 6)),
                               '3d input': (2, 3, False, (5, 6)),
                               'bias': (2, 4, True, (5, 6)),
                               'input below kernel': (2, 4, False, (5, 2))}[case]
    x = torch.randn(batch, 4, *size, requires_grad=True)
    x = x[0] if dims == 3 else x
    offset = torch.zeros(batch, 18, *size, requires_grad=True)
    weight = torch.randn(4, 4, 3, 3, requires_grad=True)

    def call(*t):
        return mmcv_ops.deform_conv2d(*t, 1, 1, 1, 1, 1, bias, 2)
    routing.activate(model := _Call(call))
    theirs = _error(call, x, offset, weight)
    assert _error(model, x, offset, weight) == theirs
    assert theirs[0] in (AssertionError, ValueError, RuntimeError) and calls == {}


def test_routed_ms_deform_attn_checks_im2col_step(on_cpu, calls):
    value = torch.randn(3, 4, 2, 4, requires_grad=True)
    loc = torch.rand(3, 5, 2, 1, 2, 2, requires_grad=True)
    weights = torch.rand(3, 5, 2, 1, 2, requires_grad=True)
    shapes, starts = torch.tensor([[2, 2]]), torch.tensor([0])
    module = mmcv_ops.multi_scale_deform_attn
    model = _Call(lambda *t: module.MultiScaleDeformableAttnFunction.apply(*t, 2))
    routing.activate(model)
    assert _error(model, value, shapes, starts, loc, weights) == (
        RuntimeError, 'batch(3) must divide im2col_step(2)')
    assert model(value[:2], shapes, starts, loc[:2], weights[:2]).shape == (2, 5, 8)
    assert calls == {'ms_deform_attn': 1}


def _probe_devices(**env):
    import os
    import subprocess
    import sys
    code = ('import torch\nfrom mmrepro.ops import routing\n'
            'from mmrepro.ops.roi_align.layer import deterministic_roi_align\n'
            'x = torch.randn(1, 2, 6, 6, requires_grad=True)\n'
            'out = deterministic_roi_align(x, torch.tensor([[0, 1., 1., 4., 4.]]), 2)\n'
            'print(sorted(routing.DEVICES), type(out.grad_fn).__name__)')
    clean = {k: v for k, v in os.environ.items()
             if k not in ('TRITON_INTERPRET', routing.CPU_ENV)}
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env={**clean, **env})


@pytest.fixture
def rotated_calls(monkeypatch):
    """Counts of mmrepro's rotated backward passes (spies around the real functions)."""
    counts = {}
    for op in ('roi_align_rotated', 'riroi_align_rotated', 'rotated_feature_align'):
        name = f'{op}_backward'
        real = getattr(rotated_functions, name)

        def spy(*args, _real=real, _op=op):
            counts[_op] = counts.get(_op, 0) + 1
            return _real(*args)
        monkeypatch.setattr(rotated_functions, name, spy)
    return counts


class _RotatedNet(nn.Module):
    """mmrotate's uses: R3Det's refinement (``rotated_feature_align`` called by name) and
    Oriented R-CNN's ``RoIAlignRotated`` layer."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.roi = mmcv_ops.RoIAlignRotated((2, 2), 0.5, 2, True, True)

    def forward(self, x, rois, boxes):
        feat = self.conv(x)
        return self.roi(feat + mmcv_rotated_feature_align(feat, boxes, 0.5, 5), rois)


def _run_rotated(model: nn.Module) -> list:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 5, 6, generator=g)
    rois = torch.tensor([[0, 4.0, 3.0, 5.0, 3.0, 0.4], [1, 7.0, 6.0, 6.0, 4.0, -2.0]])
    boxes = torch.rand(2, 5, 6, 5, generator=g) * torch.tensor([10, 12, 6, 4, 6.0]) - 1
    out = model(x, rois, boxes)
    (out * torch.randn(out.shape, generator=g)).sum().backward()
    return [out.detach()] + [p.grad for p in model.parameters()]


def test_rotated_ops_routed_in_the_model_only(on_cpu, rotated_calls):
    original = _RotatedNet()
    model = copy.deepcopy(original)
    entries = audit_model(model, deterministic=True, strict=True)
    assert [(e['name'], e['action']) for e in entries] == [('roi', 'replaced')]
    assert entries[0]['reason'].endswith('; routed to mmrepro.ops.rotated.roi_align_rotated')
    ours, theirs = _run_rotated(model), _run_rotated(original)
    assert rotated_calls == {'roi_align_rotated': 1, 'rotated_feature_align': 1}
    assert torch.equal(ours[0], theirs[0])  # mmcv's forward
    for a, b in zip(ours[1:], theirs[1:], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    model.zero_grad(set_to_none=True)
    again = _run_rotated(model)
    assert rotated_calls == {'roi_align_rotated': 2, 'rotated_feature_align': 2}
    assert all(torch.equal(a, b) for a, b in zip(again, ours, strict=True))


def test_routed_riroi_align_keeps_mmcvs_out_size_check(on_cpu, rotated_calls):
    """mmcv's RiRoIAlignRotated has no CPU kernel; routed, it runs on mmrepro's path."""
    layer = mmcv_ops.RiRoIAlignRotated((2, 2), 0.5, 2, 4)
    routing.activate(model := _Call(layer))
    feat = torch.randn(1, 8, 5, 6, requires_grad=True)
    rois = torch.tensor([[0, 4.0, 3.0, 5.0, 3.0, 0.4]])
    model(feat, rois).sum().backward()
    assert rotated_calls == {'riroi_align_rotated': 1} and feat.grad.abs().sum() > 0
    layer.out_size = [2, 2]  # mmcv takes an int or a tuple
    theirs = _error(mmcv_ops.riroi_align_rotated, feat, rois, [2, 2], 0.5)
    assert _error(model, feat, rois) == theirs and theirs[0] is TypeError


def test_cpu_takes_the_cuda_path_only_when_asked_and_interpreted():
    """``MMREPRO_TRITON_ON_CPU=1`` with ``TRITON_INTERPRET=1``: RoIAlign and the routers
    use the Triton kernels on CPU, as on CUDA; without it, the CPU paths."""
    plain = _probe_devices()
    assert plain.stdout.split() == ["['cuda']", '_RoIAlignFunctionBackward'], \
        plain.stderr[-2000:]
    widened = _probe_devices(TRITON_INTERPRET='1', MMREPRO_TRITON_ON_CPU='1')
    assert widened.stdout.split() == ["['cpu',", "'cuda']", 'TritonRoIAlignFunctionBackward']
    alone = _probe_devices(MMREPRO_TRITON_ON_CPU='1')
    assert alone.returncode == 1
    assert ('RuntimeError: MMREPRO_TRITON_ON_CPU=1 needs TRITON_INTERPRET=1 (Triton runs its '
            'kernels on CPU tensors only when interpreted); set both, or unset '
            'MMREPRO_TRITON_ON_CPU.') in alone.stderr
