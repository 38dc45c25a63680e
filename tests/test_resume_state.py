"""The checkpoint's mmrepro section (format 2) and its parts; format 1 still resumes."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from mmengine.runner import Runner
from repro_utils import state_digest
from support.toy_runner import runner_kwargs
from torch import nn

import mmrepro  # noqa: F401  (installs the patches, as custom_imports would)
from mmrepro.resume.checkpoint_io import CheckpointLoadError, safe_load
from mmrepro.resume.preprocessor_state import PreprocessorState
from mmrepro.resume.section import FORMAT, build_section, check_section
from mmrepro.rng.host_state import ProcessRNGs

HOOKS = [dict(type='ReproducibilityHook'),
         dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]


def _draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_rng_states_round_trip():
    rngs = ProcessRNGs()
    state = rngs.state_dict()
    first = _draws()
    rngs.load_state_dict(state)
    assert _draws() == first
    with pytest.raises(ValueError, match='lacks its python/numpy/torch entries'):
        rngs.load_state_dict(dict(state, torch=None))


class _Resize(nn.Module):
    def __init__(self):
        super().__init__()
        self._input_size = (64, 64)


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.data_preprocessor = nn.Module()
        self.data_preprocessor.resize = _Resize()


def test_preprocessor_state_round_trips():
    model = _Model()
    state = PreprocessorState(model).state_dict()
    assert state == {'resize._input_size': [64, 64]}
    other = _Model()
    other.data_preprocessor.resize._input_size = (32, 32)
    part = PreprocessorState(other)
    part.load_state_dict(state)
    assert other.data_preprocessor.resize._input_size == (64, 64)
    assert part.restored == ['resize._input_size']
    with pytest.raises(ValueError, match="data-preprocessor state 'x._input_size'"):
        part.load_state_dict({'x._input_size': [1, 1]})


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
    torch.save(checkpoint, old)
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
