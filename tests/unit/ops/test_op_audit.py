"""mmrepro.ops.op_audit on a real mmdet Faster R-CNN and on models with unsupported mmcv ops."""
from __future__ import annotations

import importlib
import os.path as osp
import warnings

import pytest
import torch
from support.doc_examples import assert_shows
from torch import nn

from mmrepro.ops import DeterministicRoIAlign
from mmrepro.ops.op_audit import NONDETERMINISTIC_MMCV_OPS, audit_model, format_audit

mmcv_ops = pytest.importorskip('mmcv.ops')
mmdet = pytest.importorskip('mmdet')

ROI_LAYERS = [f'roi_head.bbox_roi_extractor.roi_layers.{i}' for i in range(4)]


def build_faster_rcnn_r18() -> nn.Module:
    """mmdet's Faster R-CNN R-50-FPN config with a randomly initialised ResNet-18."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config

    register_all_modules()
    cfg = Config.fromfile(osp.join(osp.dirname(mmdet.__file__), '.mim', 'configs',
                                   'faster_rcnn', 'faster-rcnn_r50_fpn_1x_coco.py'))
    model = cfg.model
    model.backbone.update(depth=18, init_cfg=None)
    model.neck.update(in_channels=[64, 128, 256, 512], out_channels=32)
    # Narrow heads and few samples keep one CPU training step well under a second.
    model.rpn_head.update(in_channels=32, feat_channels=32)
    model.roi_head.bbox_roi_extractor.out_channels = 32
    model.roi_head.bbox_head.update(in_channels=32, fc_out_channels=64, num_classes=3)
    model.train_cfg.rpn.sampler.num = 64
    model.train_cfg.rpn_proposal.update(nms_pre=300, max_per_img=150)
    model.train_cfg.rcnn.sampler.num = 128
    return MODELS.build(model)


def loss_and_grads(model: nn.Module, seed: int = 0):
    """One training forward+backward on a fixed 2-image batch; (losses, a backbone grad)."""
    from mmdet.testing import demo_mm_inputs

    torch.manual_seed(seed)
    data = demo_mm_inputs(batch_size=2, image_shapes=[(3, 64, 96), (3, 64, 80)],
                          num_items=[3, 2], num_classes=3, with_mask=False)
    model.zero_grad()
    data = model.data_preprocessor(data, True)
    losses = model(**data, mode='loss')
    total = sum(v if isinstance(v, torch.Tensor) else sum(v) for v in losses.values())
    total.backward()
    return ({k: torch.stack(list(v)).detach() if isinstance(v, list) else v.detach()
             for k, v in losses.items()}, model.backbone.layer4[0].conv1.weight.grad.clone())


def test_faster_rcnn_roi_align_replaced_and_trains():
    """The 4 FPN RoIAlign layers are found and replaced; losses stay bit-identical."""
    model = build_faster_rcnn_r18().train()
    ref_losses, ref_grad = loss_and_grads(model)

    with warnings.catch_warnings():
        warnings.simplefilter('error')  # nothing left over, so no warning either
        entries = audit_model(model, deterministic=True, strict=True)
    assert [e['name'] for e in entries] == ROI_LAYERS
    assert_shows('op-audit', format_audit(entries))  # docs/gpu.md shows this table
    assert {(e['type'], e['op'], e['action']) for e in entries} == {
        ('RoIAlign', 'RoIAlign', 'replaced')}
    layers = model.roi_head.bbox_roi_extractor.roi_layers
    assert all(isinstance(m, DeterministicRoIAlign) for m in layers)
    assert [m.spatial_scale for m in layers] == [1 / 4, 1 / 8, 1 / 16, 1 / 32]
    assert audit_model(model, deterministic=True, strict=True) == []  # idempotent

    losses, grad = loss_and_grads(model)
    assert losses.keys() == ref_losses.keys()
    for key in losses:  # forward is bit-identical to mmcv's CPU kernel
        assert torch.equal(losses[key], ref_losses[key]), key
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)


def test_report_only_when_not_deterministic():
    model = nn.Sequential(mmcv_ops.RoIAlign(7), mmcv_ops.RoIPool(7))
    entries = audit_model(model, deterministic=False, strict=True)
    assert [(e['name'], e['op'], e['action']) for e in entries] == [
        ('0', 'RoIAlign', 'nondeterministic-on-cuda'),
        ('1', 'RoIPool', 'nondeterministic-on-cuda')]
    assert type(model[0]) is mmcv_ops.RoIAlign  # untouched


def test_strict_raises_for_unsupported_ops():
    model = nn.Module()
    model.head = nn.Sequential(mmcv_ops.RoIAlign(7), mmcv_ops.RoIPool(7, 0.5))
    with pytest.raises(ValueError, match=(
            r'^deterministic=True and strict=True, but 1 module\(s\) use ops that are '
            r'nondeterministic on CUDA: head\.1 \(RoIPool: RoIPool, CUDA backward '
            r'accumulates with atomicAdd at the argmax \(roi_pool_cuda_kernel\.cuh\); to '
            r"fix: use RoIAlign \(roi_layer=dict\(type='RoIAlign', \.\.\.\)\), which "
            r'mmrepro replaces\)\.$')):
        audit_model(model, deterministic=True, strict=True)


def test_unreplaceable_op_names_module_and_generic_fix():
    model = nn.Sequential(nn.Conv2d(2, 2, 1), mmcv_ops.CARAFENaive(3, 1, 2),
                          mmcv_ops.PSAMask('collect', (3, 3)))
    with pytest.raises(ValueError, match=(
            r'1 module\(s\) use ops that are nondeterministic on CUDA: 1 \(CARAFENaive: '
            r'CARAFENaive, .*; to fix: use CARAFEPack')):
        audit_model(model, deterministic=True, strict=True)
    model = nn.Sequential(mmcv_ops.BorderAlign(4))
    with pytest.raises(ValueError, match=(
            r': 0 \(BorderAlign: BorderAlign, .*; to fix: mmrepro has no deterministic '
            r'replacement: train on CPU for exact results, or accept run-to-run differences '
            r'on CUDA with strict=False \(a warning is issued\)\)\.$')):
        audit_model(model, deterministic=True, strict=True)


def test_non_strict_warns_and_subclasses_are_not_replaced():
    class MyRoIAlign(mmcv_ops.RoIAlign):
        pass

    model = nn.Sequential(MyRoIAlign(7), mmcv_ops.RoIAlign(7))
    with pytest.warns(UserWarning, match=r"1 module\(s\) .*: 0 \(MyRoIAlign: RoIAlign, .*"
                                         r'to fix: MyRoIAlign subclasses RoIAlign and may '
                                         r'change its forward, so it is not replaced; use '
                                         r'RoIAlign itself\)\.$'):
        entries = audit_model(model, deterministic=True)
    assert [e['action'] for e in entries] == ['nondeterministic-on-cuda', 'replaced']
    assert '; replaced by mmrepro.ops.DeterministicRoIAlign' in entries[1]['reason']
    assert type(model[0]) is MyRoIAlign


def test_replace_false_keeps_roi_align():
    model = nn.Sequential(mmcv_ops.RoIAlign(7))
    with pytest.raises(ValueError, match=r'0 \(RoIAlign: RoIAlign.*to fix: keep replace=True '
                                          r'\(the default\), so that it is replaced by '
                                          r'mmrepro\.ops\.DeterministicRoIAlign\)'):
        audit_model(model, deterministic=True, strict=True, replace=False)
    assert type(model[0]) is mmcv_ops.RoIAlign


def test_format_audit_and_table():
    model = nn.Sequential(mmcv_ops.RoIAlign(7), mmcv_ops.RoIPool(7))
    with pytest.warns(UserWarning, match=r'1 \(RoIPool: RoIPool'):
        text = format_audit(audit_model(model, deterministic=True))
    lines = text.splitlines()
    assert lines[0] == 'mmcv op audit: 2 module(s) backed by ops nondeterministic on CUDA'
    assert lines[1].split() == ['name', '|', 'type', '|', 'op', '|', 'action']
    assert lines[3].split(' | ') == ['0   ', 'RoIAlign', 'RoIAlign', 'replaced']
    assert lines[4].split() == ['1', '|', 'RoIPool', '|', 'RoIPool', '|',
                                'nondeterministic-on-cuda']
    assert format_audit([]).startswith('mmcv op audit: no modules')
    # Every table entry names a real mmcv.ops class (sparse ops are exported with CUDA only).
    where = {'SparseConvolution': 'mmcv.ops.sparse_conv', 'SparseMaxPool': 'mmcv.ops.sparse_pool'}
    for name in NONDETERMINISTIC_MMCV_OPS:
        assert hasattr(importlib.import_module(where.get(name, 'mmcv.ops')), name), name


def test_deformable_ops_follow_the_installed_triton():
    """Routed where mmrepro's Triton kernels run; else named, with versions, and refused
    by strict (torch 2.1 pins Triton 2.1: the floor stack takes the second branch)."""
    from mmrepro.ops.csr_kernels import triton_status
    usable, why_not = triton_status()
    model = nn.Sequential(mmcv_ops.DeformConv2dPack(4, 4, 3, padding=1))
    if usable:
        entries = audit_model(model, deterministic=True, strict=True)
        assert [(e['name'], e['action']) for e in entries] == [('0', 'replaced')]
        assert entries[0]['reason'].endswith('; routed to mmrepro.ops.deformable.deform_conv2d')
        return
    import triton
    assert why_not == (f'triton {triton.__version__} (pinned by torch {torch.__version__}) '
                       "is older than 3.0, which mmrepro's kernels need")
    with pytest.raises(ValueError, match='use a torch whose Triton is >= 3.0'):
        audit_model(model, deterministic=True, strict=True)
    with pytest.warns(UserWarning, match=r"not routed to mmrepro's Triton kernels: triton "):
        entries = audit_model(model, deterministic=True)
    assert entries[0]['action'] == 'nondeterministic-on-cuda'
    assert format_audit(entries).splitlines()[-1].endswith('| nondeterministic-on-cuda')


def test_rotated_ops_follow_the_installed_triton():
    """mmrotate's rotated layers, and R3Det's refinement module (which calls the function
    rotated_feature_align), are routed where mmrepro's Triton kernels run."""
    from mmrepro.ops.csr_kernels import triton_status
    frm = type('FRM', (nn.Module,), {'__module__': 'mmrotate.models.layers.align'})
    not_mmrotates = type('FRM', (nn.Module,), {})
    model = nn.Sequential(mmcv_ops.RoIAlignRotated(7, 0.25), mmcv_ops.RiRoIAlignRotated(7, 0.25),
                          frm(), not_mmrotates())
    usable, _ = triton_status()
    if not usable:
        with pytest.raises(ValueError, match=r'3 module\(s\) .*: 0 \(RoIAlignRotated: .*use a '
                                             r'torch whose Triton is >= 3\.0'):
            audit_model(model, deterministic=True, strict=True)
        return
    entries = audit_model(model, deterministic=True, strict=True)
    assert [(e['name'], e['op'], e['action']) for e in entries] == [
        ('0', 'RoIAlignRotated', 'replaced'), ('1', 'RiRoIAlignRotated', 'replaced'),
        ('2', 'FRM', 'replaced')]
    assert [e['reason'].split('; ')[1] for e in entries] == [
        f'routed to mmrepro.ops.rotated.{op}'
        for op in ('roi_align_rotated', 'riroi_align_rotated', 'rotated_feature_align')]
    assert entries[2]['reason'].startswith('calls rotated_feature_align: CUDA backward '
                                           'accumulates with atomicAdd')
