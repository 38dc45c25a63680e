"""mmrepro.resume.preprocessor_state: the data preprocessor's state a resume restores."""
import pytest
from mmengine.model import BaseModel
from mmengine.registry import init_default_scope
from torch import nn

from mmrepro.resume.preprocessor_state import PreprocessorState, capture, restore


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


class _Detector(BaseModel):
    """A model with MMDetection's data preprocessor and its BatchSyncRandomResize."""

    def __init__(self) -> None:
        init_default_scope('mmdet')
        super().__init__(data_preprocessor=dict(
            type='DetDataPreprocessor', batch_augments=[dict(
                type='BatchSyncRandomResize', random_size_range=(64, 128), size_divisor=32,
                interval=1)]))

    def forward(self, inputs, data_samples=None, mode='tensor'):
        return inputs


def test_batch_sync_random_resize_size_is_captured_and_restored():
    pytest.importorskip('mmdet')
    model = _Detector()
    resize = model.data_preprocessor.batch_augments[0]
    assert capture(model) == {'batch_augments.0._input_size': None}  # nothing drawn yet
    resize._input_size = (96, 128)
    state = PreprocessorState(model).state_dict()
    assert state == {'batch_augments.0._input_size': [96, 128]}
    other = _Detector()
    part = PreprocessorState(other)
    part.load_state_dict(state)
    assert other.data_preprocessor.batch_augments[0]._input_size == (96, 128)
    assert part.restored == ['batch_augments.0._input_size']
    assert restore(other, {'batch_augments.0._input_size': None}) == [
        'batch_augments.0._input_size']
    assert other.data_preprocessor.batch_augments[0]._input_size is None


def test_a_model_without_preprocessor_state_has_none_and_takes_none():
    model = nn.Linear(2, 2)  # no data_preprocessor at all
    assert capture(model) == {} and restore(model, {}) == []
    with pytest.raises(ValueError, match=r"^mmrepro: the checkpoint holds data-preprocessor "
                       r"state 'batch_augments\.0\._input_size', which this model's "
                       r'data_preprocessor lacks; resume with the config that wrote it\.$'):
        restore(model, {'batch_augments.0._input_size': [64, 64]})
    with pytest.raises(ValueError, match="state 'resize._other'"):  # not a state attribute
        restore(_Model(), {'resize._other': [1, 1]})
