"""mmrepro.resume.preflight: the checkpoint a run resumes or loads, checked before the
Runner exists (the real detectors' cases are in tests/e2e/test_error_contract.py)."""
from __future__ import annotations

import os

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import MODELS
from support.checkpoints import flip_bit
from torch import nn

from mmrepro.resume.digests import seal
from mmrepro.resume.preflight import (
    _saved_model_type,
    check_checkpoint_inputs,
    checkpoints_in,
)
from mmrepro.run.config import ConfigError


@MODELS.register_module(name='PreflightToyNet', force=True)
class ToyNet(nn.Module):
    """Two layers whose widths the config sets."""

    def __init__(self, width: int = 4, extra: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(3, width)
        self.bn = nn.BatchNorm1d(width)
        if extra:
            self.head = nn.Linear(width, 1)


def _cfg(work_dir, **model) -> Config:
    return Config(dict(model=dict(type='PreflightToyNet', **model), work_dir=str(work_dir),
                       resume=True, load_from=None))


def _save(path, model: nn.Module, **meta) -> str:
    torch.save(dict(state_dict=model.state_dict(), message_hub={},
                    meta=dict(epoch=1, iter=8, **meta)), str(path))
    return str(path)


def test_a_checkpoint_of_the_same_model_passes_and_nothing_is_drawn(tmp_path):
    path = _save(tmp_path / 'a.pth', ToyNet())
    state = torch.get_rng_state()
    check_checkpoint_inputs(Config(dict(_cfg(tmp_path), load_from=path)), path)
    assert torch.equal(torch.get_rng_state(), state)  # the model was built on 'meta'


def test_another_models_checkpoint_names_what_does_not_fit(tmp_path):
    path = _save(tmp_path / 'a.pth', ToyNet(width=8, extra=True),
                 cfg="model = dict(width=8, type='OtherNet')\n")
    cfg = _cfg(tmp_path)
    cfg.load_from = path
    with pytest.raises(ConfigError) as info:
        check_checkpoint_inputs(cfg, path)
    assert str(info.value) == (
        f"--resume {path!r} does not fit this config's model (PreflightToyNet; the "
        "checkpoint's is OtherNet): 2 of its 9 are not in the model (e.g. 'head.weight'); 6 have "
        "another shape (e.g. 'fc.weight': [8, 3] in it, [4, 3] in the model); expected a "
        'checkpoint of this config: resume with the config that wrote it, or pass '
        f'--cfg-options load_from={path} without --resume to start a new run from its '
        'weights')
    path = _save(tmp_path / 'b.pth', ToyNet())
    cfg = _cfg(tmp_path, extra=True)
    cfg.load_from = path
    with pytest.raises(ConfigError, match=r"model \(PreflightToyNet\): 2 of the model's 9 "
                       r"weights are not in it \(e.g. 'head.weight'\); expected "):
        check_checkpoint_inputs(cfg, None)  # resume=True in the config: named load_from


def test_auto_resume_checks_the_checkpoint_last_checkpoint_names(tmp_path):
    cfg = _cfg(tmp_path)
    check_checkpoint_inputs(cfg, 'auto')  # no last_checkpoint: MMEngine starts afresh
    gone = str(tmp_path / 'epoch_3.pth')
    (tmp_path / 'last_checkpoint').write_text(gone)
    with pytest.raises(ConfigError) as info:
        check_checkpoint_inputs(cfg, 'auto')
    assert str(info.value) == (
        f"--resume: {tmp_path / 'last_checkpoint'} names {gone!r}, which does not exist; "
        'expected the latest checkpoint of the work dir: give the one to resume, e.g. '
        '--resume WORK_DIR/epoch_N.pth')
    with pytest.raises(ConfigError, match=r'^resume=True: .*last_checkpoint names '):
        check_checkpoint_inputs(cfg, None)
    _save(gone, ToyNet(width=2))
    with pytest.raises(ConfigError, match=rf"^--resume {gone!r} does not fit "):
        check_checkpoint_inputs(cfg, 'auto')


def test_load_from_is_only_read_and_urls_are_left_to_mmengine(tmp_path):
    path = _save(tmp_path / 'a.pth', ToyNet(width=2))
    check_checkpoint_inputs(Config(dict(_cfg(tmp_path), resume=False, load_from=path)))
    check_checkpoint_inputs(Config(dict(_cfg(tmp_path), load_from='https://x/y.pth')), 'x')


def test_the_model_type_of_a_saved_config_is_read_without_running_it(tmp_path):
    marker = tmp_path / 'ran'
    text = (f"import os\nos.mkdir({str(marker)!r})\n"
            "model = dict(backbone=dict(type='ResNet'), type='RetinaNet')\n")
    assert _saved_model_type(dict(cfg=text)) == 'RetinaNet'
    assert not marker.exists()
    assert _saved_model_type(dict(cfg='model = (')) is None
    assert _saved_model_type({}) is None


def test_checkpoints_in_a_directory_end_with_the_latest(tmp_path):
    for name, when in (('iter_20.pth', 3), ('epoch_1.pth', 1), ('epoch_2.pth', 2)):
        (tmp_path / name).write_bytes(b'')
        os.utime(tmp_path / name, (when, when))
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_2.pth'))
    assert [os.path.basename(p) for p in checkpoints_in(str(tmp_path))] == [
        'epoch_1.pth', 'iter_20.pth', 'epoch_2.pth']


def test_files_torch_did_not_write_are_named_as_such(tmp_path):
    legacy = str(tmp_path / 'legacy.pth')  # torch's legacy format: read whole, not mapped
    torch.save(dict(state_dict=ToyNet().state_dict()), legacy,
               _use_new_zipfile_serialization=False)
    check_checkpoint_inputs(Config(dict(_cfg(tmp_path), resume=False, load_from=legacy)))
    for name, content, what in (('empty.pth', b'', 'is empty'),
                                ('notes.pth', b'hello', "begins with b'hell'")):
        path = tmp_path / name
        path.write_bytes(content)
        cfg = Config(dict(_cfg(tmp_path), resume=False, load_from=str(path)))
        with pytest.raises(ConfigError) as info:
            check_checkpoint_inputs(cfg)
        assert str(info.value) == (
            f"load_from {str(path)!r} is not a PyTorch checkpoint: it {what}, expected a file "
            "torch.save wrote (a zip archive, beginning with b'PK'). Check the path.")


def test_a_checkpoint_that_differs_from_its_digests_is_refused_unless_allowed(tmp_path):
    """Resuming verifies every part a resume restores; ``load_from`` the weights alone."""
    model = ToyNet()
    checkpoint = dict(state_dict=model.state_dict(), message_hub={},
                      optimizer=dict(state={0: dict(momentum_buffer=torch.randn(4, 3))}),
                      meta=dict(epoch=1, iter=8))
    seal(checkpoint)
    path = str(tmp_path / 'epoch_1.pth')
    torch.save(checkpoint, path)
    flip_bit(path, checkpoint['optimizer']['state'][0]['momentum_buffer'])
    cfg = Config(dict(_cfg(tmp_path), load_from=path))
    with pytest.raises(ConfigError, match=rf"^--resume {path!r} does not hold what was saved "
                       r"in it: optimizer state: expected sha256 \w{64}, found \w{64}, the "
                       r"first entry that differs is optimizer\['state'\]\[0\]"
                       r"\['momentum_buffer'\]\. It was changed .* resume from another "
                       r'checkpoint; nothing was written\. To load it anyway: '
                       r'--no-verify-checkpoints '):
        check_checkpoint_inputs(cfg, path)
    cfg.randomness = dict(verify_checkpoints=False)  # the Runner says it loads it anyway
    check_checkpoint_inputs(cfg, path)
    check_checkpoint_inputs(Config(dict(_cfg(tmp_path), resume=False, load_from=path)))
