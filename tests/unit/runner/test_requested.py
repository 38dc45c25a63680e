"""runner.requested: whether a config entry asks for one of MMEngine's classes."""
from __future__ import annotations

import pytest
from mmengine.hooks import CheckpointHook, ParamSchedulerHook
from mmengine.runner.loops import EpochBasedTrainLoop, ValLoop

from mmrepro.runner.requested import asks_for_class, type_name


class OwnCheckpointHook(CheckpointHook):
    """A team's checkpoint hook: a subclass is not MMEngine's class."""


@pytest.mark.parametrize('kind', ['CheckpointHook', 'mmengine.CheckpointHook', CheckpointHook])
def test_the_name_the_scoped_name_or_the_class_ask_for_it(kind):
    assert asks_for_class(kind, CheckpointHook)


@pytest.mark.parametrize('kind', [None, 'ParamSchedulerHook', 'mmdet.CheckpointHook',
                                  ParamSchedulerHook, OwnCheckpointHook,
                                  'ReproCheckpointHook'])
def test_anything_else_does_not(kind):
    assert not asks_for_class(kind, CheckpointHook)


def test_type_names_for_messages():
    assert type_name(EpochBasedTrainLoop) == 'EpochBasedTrainLoop'
    assert type_name('mmengine.ValLoop') == 'mmengine.ValLoop' and type_name(None) == 'None'
    assert asks_for_class('ValLoop', ValLoop)
