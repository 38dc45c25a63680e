"""Resume at every epoch and mid-epoch across YOLOX's YOLOXModeSwitchHook: identical
(RTMDet: test_epoch_resume.py).

The full tier (marker ``full``), as RTMDet's: YOLOXModeSwitchHook switches the pipeline at
an epoch as PipelineSwitchHook does, whose switch CI's default run proves across a resume
(``test_resume.py::test_stateful_hooks_correct_after_resume``).
"""
import pytest
from support.epoch_resume import resumed_from_every_epoch_the_end_is_identical


@pytest.mark.slow
@pytest.mark.full
def test_yolox_resumed_from_every_epoch_the_end_is_identical(data_root, tmp_path,
                                                             monkeypatch):
    resumed_from_every_epoch_the_end_is_identical(
        'yolox', 'YOLOXModeSwitchHook at epoch 2', data_root, tmp_path, monkeypatch)
