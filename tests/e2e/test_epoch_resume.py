"""Resume at every epoch and mid-epoch across RTMDet's PipelineSwitchHook: identical (YOLOX:
test_epoch_resume_yolox.py).

The full tier (marker ``full``): a sweep over every epoch of the zoo's mixing families;
CI's default run proves the pipeline switch and EMA across a mid-epoch resume
(``test_resume.py::test_stateful_hooks_correct_after_resume``) and resume from epoch and
iteration checkpoints (``test_resume.py::test_resume_from_every_checkpoint_is_exact``).
"""
import pytest
from support.epoch_resume import resumed_from_every_epoch_the_end_is_identical


@pytest.mark.slow
@pytest.mark.full
def test_rtmdet_resumed_from_every_epoch_the_end_is_identical(data_root, tmp_path,
                                                              monkeypatch):
    resumed_from_every_epoch_the_end_is_identical(
        'rtmdet', 'PipelineSwitchHook at epoch 2', data_root, tmp_path, monkeypatch)
