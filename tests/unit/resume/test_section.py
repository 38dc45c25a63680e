"""mmrepro.resume.section: the checkpoint's mmrepro section (format 2); format 1 still resumes."""
from __future__ import annotations

import pytest
import torch
from mmengine.runner import Runner
from support.checkpoints import without_part_digests
from support.repro_utils import state_digest
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.data.data_position import rank_position
from mmrepro.resume.checkpoint_io import CheckpointLoadError, safe_load
from mmrepro.resume.section import (
    CONTINUE,
    EXACT,
    FORMAT,
    REFUSE,
    ResumePlan,
    build_section,
    check_section,
    layout_of,
    plan_resume,
)
from mmrepro.rng.host_state import ProcessRNGs
from mmrepro.run.layout import Layout

HOOKS = [dict(type='ReproducibilityHook'),
         dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]


def _section(position):
    return build_section(3, dict(seed=3, deterministic=True), 1, 4, 'epoch', position,
                         [ProcessRNGs().state_dict()], {})


def test_the_section_composes_the_parts_in_format_2():
    position = dict(epoch=1, global_batches=2, global_batch=4)
    section = _section(position)
    assert FORMAT == 2 and section['format'] == 2
    assert check_section(section) == section
    for bad in (dict(epoch=1, batches=2), dict(epoch=1, global_batches=-1, global_batch=4)):
        with pytest.raises(CheckpointLoadError, match=r'malformed \(position '):
            check_section(_section(bad))


def test_a_format_1_section_reads_as_format_2_in_the_rank_s_batches():
    old = dict(_section(None), format=1, position=dict(epoch=1, batches=2))
    section = check_section(old)
    assert section['format'] == 2
    assert section['position'] == dict(epoch=1, batches=2, unit='rank')
    assert old['format'] == 1 and old['position'] == dict(epoch=1, batches=2)
    assert check_section(dict(old, position=None))['position'] is None
    with pytest.raises(CheckpointLoadError, match=r'malformed \(position '):
        check_section(dict(old, position=dict(epoch=1)))
    with pytest.raises(CheckpointLoadError, match='format 7, this mmrepro reads format 1 or 2'):
        check_section(dict(old, format=7))


def _train(work_dir, **extra):
    Runner(**runner_kwargs(work_dir, HOOKS, **extra)).train()
    return state_digest(str(work_dir / 'epoch_3.pth'))


def test_a_format_1_checkpoint_resumes_exactly(tmp_path):
    full = _train(tmp_path / 'full')
    checkpoint = safe_load(str(tmp_path / 'full' / 'iter_10.pth'))
    section = checkpoint['mmrepro']
    assert section['position'] == dict(epoch=1, global_batches=2, global_batch=4)
    # What the earlier release wrote: the position in this rank's batches (1 rank,
    # 1 micro-batch per step: one batch per global batch).
    checkpoint['mmrepro'] = dict(section, format=1, position=dict(epoch=1, batches=2))
    old = str(tmp_path / 'format_1.pth')
    torch.save(without_part_digests(checkpoint), old)
    assert _train(tmp_path / 'resumed', resume=True, load_from=old) == full
    log = open(next((tmp_path / 'resumed').glob('*/*.log'))).read()
    assert 'mmrepro: resumed RNG states and data position (sampler epoch 1, 2 batches' in log


def test_positions_under_accumulation_resume_where_they_were_saved(tmp_path):
    """accumulative_counts=2, 8 micro-batches an epoch, a checkpoint every 5 iterations.

    Iteration 10 is an optimizer-step boundary and resumes exactly. Iteration 5 is one
    micro-batch into a step: its position round trips (MMEngine's checkpoint does not
    hold the gradients accumulated so far, so its weights cannot match)."""
    hooks = [HOOKS[0], dict(HOOKS[1], interval=5)]

    def train(name, **extra):
        kwargs = runner_kwargs(tmp_path / name, hooks, **extra)
        optim = dict(kwargs['optim_wrapper'], accumulative_counts=2)
        Runner(**dict(kwargs, optim_wrapper=optim)).train()
        log = open(next((tmp_path / name).glob('*/*.log'))).read()
        return state_digest(str(tmp_path / name / 'epoch_3.pth')), log

    full, _ = train('full')
    path = str(tmp_path / 'full' / 'iter_{}.pth')
    assert safe_load(path.format(5))['mmrepro']['position'] == dict(
        epoch=0, global_batches=2, global_batch=8, micro_batches=1, micro=2)
    assert safe_load(path.format(10))['mmrepro']['position'] == dict(
        epoch=1, global_batches=1, global_batch=8)
    resumed, log = train('at_step', resume=True, load_from=path.format(10))
    assert resumed == full
    assert '(sampler epoch 1, 2 batches done)' in log
    _, log = train('mid_step', resume=True, load_from=path.format(5))
    assert '(sampler epoch 0, 5 batches done)' in log


# ------------------------------------------------------------ plan_resume, layout_of
def _written_by(batch_size, world_size=1, micro=1, position=None):
    """A section written by ``world_size`` ranks x ``batch_size`` x ``micro``, at
    ``position`` (in global batches; 2 steps into epoch 1 by default)."""
    position = dict(position or dict(epoch=1, global_batches=2))
    position.setdefault('global_batch', batch_size * world_size * micro)
    return build_section(3, dict(seed=3, deterministic=True), world_size, batch_size,
                         'epoch', position, [ProcessRNGs().state_dict()] * world_size, {})


def test_layout_of_reads_the_layout_from_the_position():
    assert layout_of(_written_by(2, world_size=2)) == Layout(2, 0, 2, 1)
    assert layout_of(_written_by(2, micro=4)) == Layout(2, 0, 1, 4)
    # a position in the rank's batches (format 1, or no global stream) says no global batch
    assert layout_of(dict(_written_by(2), position=rank_position(1, 2))) is None
    assert layout_of(dict(_written_by(2), position=None)) is None
    assert layout_of(dict(_written_by(2), batch_size=None)) is None
    assert layout_of(_written_by(3, position=dict(epoch=0, global_batches=1,
                                                  global_batch=4))) is None


def test_the_same_layout_resumes_exactly():
    plan = plan_resume(_written_by(2, micro=2), Layout(2, 0, 1, 2), global_stream=True)
    assert plan == ResumePlan(EXACT, accumulation_from=2, accumulation_to=2)
    assert plan.restores and plan.iteration(10) == 10
    assert plan_resume(_written_by(2), None, global_stream=False) == ResumePlan(EXACT)


def test_another_layout_of_the_same_global_batch_continues():
    plan = plan_resume(_written_by(2, world_size=2), Layout(2, 0, 1, 2), global_stream=True)
    assert plan.mode == CONTINUE and plan.restores and plan.reason == ''
    assert plan.changes == ['world size 2 -> 1', 'accumulative_counts 1 -> 2']
    assert (plan.accumulation_from, plan.accumulation_to) == (1, 2)
    # iteration 6 of 2 ranks (6 optimizer steps) is iteration 12 of 1 process x 2
    assert plan.iteration(6) == 12
    back = plan_resume(_written_by(2, micro=2), Layout(2, 0, 2, 1), global_stream=True)
    assert back.changes == ['world size 1 -> 2', 'accumulative_counts 2 -> 1']
    assert back.iteration(12) == 6 and back.iteration(13) == 7  # 6 steps, 1 micro-batch
    assert plan_resume(_written_by(1, micro=4), Layout(4, 0, 1, 1), True).changes == [
        'per-rank batch size 1 -> 4', 'accumulative_counts 4 -> 1']


def test_another_global_batch_is_refused_with_what_to_set():
    plan = plan_resume(_written_by(2, world_size=2), Layout(4, 0, 2, 1), global_stream=True)
    assert plan.mode == REFUSE and not plan.restores
    assert plan.changes == ['per-rank batch size 2 -> 4']
    assert plan.reason == (
        'mmrepro: cannot resume exactly: per-rank batch size 2 -> 4 between the checkpoint '
        '(2 rank(s) x batch_size 2 x accumulative_counts 1 = 4) and this run (2 rank(s) x '
        'batch_size 4 x accumulative_counts 1 = 8): the global batch differs. Set '
        'train_dataloader.batch_size x optim_wrapper.accumulative_counts to 2 for 2 rank(s).')
    odd = plan_resume(_written_by(2, world_size=2), Layout(2, 0, 3, 1), global_stream=True)
    assert odd.reason.endswith('the global batch differs. 4 is not a multiple of 3 ranks, so '
                               'no batch size gives it: launch a number of ranks that '
                               'divides 4.')


def test_a_position_in_the_ranks_batches_resumes_on_its_own_layout_only():
    section = dict(_written_by(2, world_size=2), position=rank_position(1, 2))
    assert plan_resume(section, Layout(2, 0, 2, 1), global_stream=True).mode == EXACT
    plan = plan_resume(section, Layout(4, 0, 1, 1), global_stream=True)
    assert plan.mode == REFUSE and plan.reason == (
        'mmrepro: cannot resume exactly: world size 2 -> 1, per-rank batch size 2 -> 4 '
        'between the checkpoint (2 rank(s) x batch_size 2) and this run (1 rank(s) x '
        'batch_size 4 x accumulative_counts 1 = 4): the global batch differs. Resume on 2 '
        'rank(s) with train_dataloader.batch_size 2.')


def test_continuing_needs_the_global_stream_and_a_step_boundary():
    plan = plan_resume(_written_by(2, world_size=2), Layout(2, 0, 1, 2), global_stream=False)
    assert plan.mode == REFUSE and plan.reason.endswith(
        ': this run does not draw from the global stream (randomness.global_stream or '
        'sample_seeding is off, or the sampler is not a config), so only the layout that '
        'wrote it can resume it.')
    mid_step = _written_by(2, micro=2, position=dict(epoch=0, global_batches=2,
                                                     micro_batches=1, micro=2))
    plan = plan_resume(mid_step, Layout(2, 0, 2, 1), global_stream=True)
    assert plan.mode == REFUSE and plan.reason.endswith(
        ': the checkpoint is 1 of 2 micro-batches into an optimizer step. Resume from a '
        'checkpoint saved at a step boundary.')
    assert plan_resume(mid_step, Layout(2, 0, 1, 2), global_stream=True).mode == EXACT
