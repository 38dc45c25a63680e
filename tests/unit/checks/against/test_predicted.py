"""mmrepro.checks.against.predicted: what will keep a run here from reproducing a baseline,
from two run records (written by hand), most decisive first."""
from __future__ import annotations

import pytest

from mmrepro.checks.against.predicted import (
    BLOCKING,
    INITIAL_FIX,
    KINDS,
    Obstacle,
    layout_obstacle,
    layout_of_record,
    obstacles,
    rank_averaging_module,
    training_environment,
)
from mmrepro.determinism.cpu import CPU_ISA_ENV
from mmrepro.run.layout import Layout


def _record(**changes):
    """A run record of 1 process x batch 2 (the parts the comparison reads)."""
    record = dict(
        seed=0, randomness=dict(seed=0, deterministic=True), world_size=1,
        versions=dict(torch='2.13.0', mmcv='2.1.0'), devices=dict(torch_threads=2, host='a'),
        env=dict(OMP_NUM_THREADS=None, CUBLAS_WORKSPACE_CONFIG=None),
        config={'optim_wrapper.optimizer.lr': '0.01', 'train_dataloader.batch_size': '2',
                'data_root': "'/data/a/'", 'randomness.seed': '0',
                'custom_hooks.0.type': "'ReproducibilityHook'",
                'custom_hooks.0.trace_interval': '50'},
        data=dict(annotations_sha256='aaa', num_samples=16),
        layout=dict(batch_size=2, world_size=1, accumulative_counts=1),
        timestamp='20260101_000000', work_dir='/work/a')
    for key, value in changes.items():
        section, _, name = key.partition('__')
        if name:
            record[section] = dict(record[section], **{name: value})
        else:
            record[key] = value
    return record


def _initial(sha256, **more):
    return dict(files={'model.backbone.init_cfg': dict(
        name='checkpoints/r18.pth', resolved='/home/a/checkpoints/r18.pth', how='local file',
        size=100, sha256=sha256, tensors_sha256=sha256[::-1], loaded=10, missing=0,
        unexpected=2, mismatched=0)}, **more)


def test_another_pretrained_file_is_the_first_obstacle_and_blocks():
    baseline = _record(initial=_initial('a' * 64, model_sha256='c' * 64))
    here = _record(initial=_initial('b' * 64), config__data_root="'/elsewhere/'")
    found = obstacles(baseline, here, Layout(2, 0, 1, 1), pinned_seed=False)
    assert [(o.kind, o.text, o.fix) for o in found] == [(
        'initial weights', 'model.backbone.init_cfg checkpoints/r18.pth, sha256 aaaaaaaaaaaa '
        'vs bbbbbbbbbbbb', INITIAL_FIX)]
    assert found[0].blocking
    # the same file elsewhere (another path, no digest of the model before training yet)
    moved = _record(initial=_initial('a' * 64))
    moved['initial']['files']['model.backbone.init_cfg']['resolved'] = '/elsewhere/r18.pth'
    assert obstacles(baseline, moved, Layout(2, 0, 1, 1), pinned_seed=False) == []
    # a check from one of the baseline's checkpoints predicts no initial files
    assert obstacles(baseline, _record(), Layout(2, 0, 1, 1), pinned_seed=False) == []
    # a baseline recorded before the section: nothing to compare
    assert obstacles(_record(), here, Layout(2, 0, 1, 1), pinned_seed=False) == []


def test_the_same_record_elsewhere_has_no_obstacle():
    baseline = _record()
    here = _record(devices__host='b', work_dir='/work/b', timestamp='20260202_000000',
                   config__data_root="'/elsewhere/'",  # where the data lie: not what
                   **{'config__custom_hooks.0.trace_interval': '1'})  # the hook's options
    assert obstacles(baseline, here, Layout(2), pinned_seed=False) == []


def test_obstacles_are_sorted_most_decisive_first():
    baseline = _record()
    here = _record(versions__torch='2.12.0', devices__torch_threads=1,
                   data__annotations_sha256='bbb',
                   **{'config__optim_wrapper.optimizer.lr': '0.02'})
    found = obstacles(baseline, here, Layout(2, 0, 1, 2), pinned_seed=False)
    assert [o.kind for o in found] == ['config', 'data', 'library versions',
                                       'CPU/GPU numerics', 'layout']
    assert found[0].text == ("the config: config.optim_wrapper.optimizer.lr: '0.01' in the "
                             "baseline, '0.02' here")
    assert found[1].text == ("the data files (fingerprint): data.annotations_sha256: 'aaa' in "
                             "the baseline, 'bbb' here")
    assert found[2].text == ("library versions: versions.torch: '2.13.0' in the baseline, "
                             "'2.12.0' here")
    assert found[3].text == ('the intra-op thread count: devices.torch_threads: 2 in the '
                             'baseline, 1 here')
    assert found[4].text == 'the global batch differs: 2 in the baseline, 4 here'
    assert [o.blocking for o in found] == [True, True, False, False, False]
    assert BLOCKING == KINDS[:3]


def test_a_pinned_seed_is_not_an_obstacle():
    baseline = _record(seed=5, randomness=dict(seed=5, deterministic=True),
                       config=dict(_record()['config'], **{'randomness.seed': '5'}))
    here = _record(seed=None, randomness=dict(seed=None, deterministic=True),
                   config=dict(_record()['config'], **{'randomness.seed': 'None'}))
    assert obstacles(baseline, here, Layout(2), pinned_seed=True) == []
    seeds = obstacles(baseline, here, Layout(2), pinned_seed=False)
    assert [o.kind for o in seeds] == ['config']
    # one cause, said once: randomness.seed and config.randomness.seed follow the seed
    assert seeds[0].text == 'the seed or randomness settings: seed: 5 in the baseline, None here'


def test_thread_variables_count_only_where_the_thread_count_differs():
    baseline = _record()
    here = _record(env__OMP_NUM_THREADS='2')  # the count itself is recorded equal
    assert obstacles(baseline, here, Layout(2), pinned_seed=False) == []
    both = _record(env__OMP_NUM_THREADS='1', devices__torch_threads=1)
    assert [o.text for o in obstacles(baseline, both, Layout(2), pinned_seed=False)] == [
        'the intra-op thread count: devices.torch_threads: 2 in the baseline, 1 here',
        "the intra-op thread count: env.OMP_NUM_THREADS: None in the baseline, '1' here"]


def test_a_compiled_baseline_checked_eagerly_is_named_and_does_not_block():
    """The check trains on: the numbers then differ by rounding, which it judges."""
    baseline = _record(compile=dict(enabled=True, backend='inductor'),
                       config=dict(_record()['config'], **{'compile': 'True'}))
    found = obstacles(baseline, _record(), Layout(2), pinned_seed=False)
    assert [(o.kind, o.blocking) for o in found] == [('compile', False)] * 3
    assert [o.text for o in found] == [
        "compiled vs eager: config.compile: 'True' in the baseline, '<missing>' here",
        "compiled vs eager: compile.enabled: True in the baseline, '<missing>' here",
        "compiled vs eager: compile.backend: 'inductor' in the baseline, '<missing>' here"]
    assert found[1].fix == "compile as the baseline did: its config's compile setting " \
        '(config.compile in its run record)'


def test_layout_of_record_reads_its_layout_section_else_its_config():
    assert layout_of_record(_record()) == Layout(2, 0, 1, 1)
    record = _record(layout=dict(batch_size=1, world_size=2, accumulative_counts=2))
    assert layout_of_record(record) == Layout(1, 0, 2, 2)
    old = _record(world_size=2, **{'config__optim_wrapper.accumulative_counts': '2'})
    del old['layout']
    assert layout_of_record(old) == Layout(2, 0, 2, 2)
    del old['config']['train_dataloader.batch_size']
    assert layout_of_record(old) is None


@pytest.mark.parametrize('baseline, here, sync_bn, text', [
    (Layout(2, 0, 2, 1), Layout(2, 0, 1, 2), False, ''),  # 2 ranks x 2 == 1 x 2 x acc 2
    (None, Layout(4), False, ''),
    (Layout(2, 0, 2, 1), Layout(2, 0, 2, 1), True, ''),
    (Layout(2, 0, 2, 1), Layout(2, 0, 1, 1), False,
     'the global batch differs: 4 in the baseline, 2 here'),
    (Layout(2, 0, 2, 1), Layout(4, 0, 1, 1), False,
     'per-rank batch 2 in the baseline, 4 here: each micro-batch normalises its loss over '
     'other images (float-close, not bitwise)'),
    (Layout(2, 0, 2, 1), Layout(2, 0, 1, 2), True,
     'SyncBN over 2 rank(s) in the baseline, 1 here: BatchNorm statistics cover other '
     'images'),
    (Layout(1, 0, 4, 1), Layout(1, 0, 1, 4), False,
     '4 micro-batches per optimizer step: their gradients add in another order on 4 '
     'rank(s) x 1 than on 1 x 4 (float-close, not bitwise)'),
])
def test_layout_obstacle(baseline, here, sync_bn, text):
    assert layout_obstacle(baseline, here, sync_bn) == text


def test_heads_that_average_over_ranks_are_named():
    assert layout_obstacle(Layout(2, 0, 2, 1), Layout(2, 0, 1, 2), False, 'FCOSHead') == (
        'FCOSHead averages its loss normaliser over 2 rank(s) in the baseline, 1 here: one '
        'process normalises each micro-batch alone (float-close, not bitwise)')
    assert layout_obstacle(Layout(2, 0, 2, 1), Layout(2, 0, 1, 2), False, '') == ''


@pytest.mark.parametrize('model, found', [
    (dict(type='RetinaNet', backbone=dict(type='ResNet', depth=18),
          bbox_head=dict(type='RetinaHead')), ''),
    (dict(type='FasterRCNN', rpn_head=dict(type='RPNHead'),
          roi_head=dict(type='StandardRoIHead', bbox_head=dict(type='Shared2FCBBoxHead'))), ''),
    (dict(type='FCOS', bbox_head=dict(type='FCOSHead')), 'FCOSHead'),
    (dict(type='GFL', bbox_head=dict(type='GFLHead')), 'GFLHead'),
    (dict(type='DETR', bbox_head=dict(type='DETRHead')), 'DETRHead'),
    (dict(type='DeformableDETR', bbox_head=dict(type='DeformableDETRHead')),
     'DeformableDETRHead'),  # inherits DETRHead's loss
    (dict(type='RTMDet', bbox_head=dict(type='RTMDetSepBNHead')), 'RTMDetSepBNHead'),
])
def test_heads_that_average_over_ranks_are_found_in_the_model_config(model, found):
    assert rank_averaging_module(model) == found


def test_the_prediction_runs_with_the_cpu_isa_variables_train_sets(monkeypatch):
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    env = training_environment(1, 'avx2')
    assert {k: env[k] for k in CPU_ISA_ENV['avx2']} == dict(CPU_ISA_ENV['avx2'])
    assert 'OMP_NUM_THREADS' not in env
    assert training_environment(2)['OMP_NUM_THREADS'] == '1'  # as torchrun sets it


def test_another_num_workers_is_no_obstacle():
    """The data stream is keyed per sample: the worker count cannot change training."""
    workers = {'train_dataloader.num_workers': '0',
               'train_dataloader.persistent_workers': 'False'}
    baseline = _record(config=dict(_record()['config'], **{
        'train_dataloader.num_workers': '2', 'train_dataloader.persistent_workers': 'True'}))
    here = _record(config=dict(_record()['config'], **workers))
    assert obstacles(baseline, here, Layout(2), pinned_seed=False) == []


def test_mmrepro_in_custom_imports_is_not_a_config_difference():
    """tools/train.py adds it where a config enables mmrepro by its hook alone."""
    enabled = {'custom_imports.imports': "['mmdet.models', 'mmrepro']",
               'custom_imports.allow_failed_imports': 'False'}
    baseline = _record(config=dict(_record()['config'], **enabled))
    here = _record(config=dict(_record()['config'],
                               **{'custom_imports.imports': "['mmdet.models']"}))
    assert obstacles(baseline, here, Layout(2), pinned_seed=False) == []
    here['config']['custom_imports.imports'] = "['mmdet.models', 'my_project']"
    assert [o.text for o in obstacles(baseline, here, Layout(2), pinned_seed=False)] == [
        'the config: config.custom_imports.imports: "[\'mmdet.models\']" in the baseline, '
        '"[\'mmdet.models\', \'my_project\']" here']


def test_an_obstacle_blocks_only_for_initial_weights_config_and_data():
    assert all(Obstacle(kind, 'x').blocking for kind in ('initial weights', 'config', 'data'))
    assert not any(Obstacle(kind, 'x').blocking for kind in KINDS[3:])


def test_every_obstacle_comes_with_its_fix():
    baseline = _record()
    here = _record(versions__torch='2.12.0', devices__torch_threads=1,
                   data__annotations_sha256='bbb',
                   **{'config__optim_wrapper.optimizer.lr': '0.02'})
    found = obstacles(baseline, here, Layout(2, 0, 1, 2), pinned_seed=False)
    assert [o.fix for o in found] == [
        "set the baseline's value: --cfg-options optim_wrapper.optimizer.lr=0.01, or check "
        "against the baseline's own config (leave out CONFIG)",
        "train on the baseline's data files (those named above differ): copy them from the "
        "baseline's machine, or point the config at the same files",
        "pip install torch==2.13.0 (the baseline's version)",
        "pin the baseline's thread count: --cfg-options randomness.threads=2 (or export "
        'OMP_NUM_THREADS=2 before the check and the training)',
        "train on the baseline's layout, without --launcher and --cfg-options "
        'train_dataloader.batch_size=2 optim_wrapper.accumulative_counts=1']


def test_randomness_threads_counts_only_through_the_thread_count_it_sets():
    """Pinning the baseline's count here with randomness.threads is the fix, not a
    config difference."""
    pinned = dict(_record()['randomness'], threads=2)
    here = _record(randomness=pinned, config=dict(_record()['config'],
                                                  **{'randomness.threads': '2'}))
    assert obstacles(_record(), here, Layout(2), pinned_seed=False) == []
    other = _record(randomness=dict(pinned, threads=1), devices__torch_threads=1)
    assert [o.text for o in obstacles(_record(), other, Layout(2), pinned_seed=False)] == [
        'the intra-op thread count: devices.torch_threads: 2 in the baseline, 1 here']
