"""mmrepro.checks.against.run: the options of a check against a baseline, checked before
anything is read or trained (the check itself: tests/e2e/test_check_against.py)."""
from __future__ import annotations

import pytest
import torch
from support.checkpoints import flip_bit

from mmrepro.checks.against.run import AgainstOptions
from mmrepro.resume.digests import seal
from mmrepro.resume.verification import IntegrityError


def test_a_from_checkpoint_that_differs_from_its_digests_is_refused(tmp_path):
    checkpoint = dict(meta=dict(epoch=1, iter=8), state_dict={'w': torch.arange(64.)},
                      mmrepro=dict(rng=[dict(torch=torch.arange(256, dtype=torch.uint8))]))
    seal(checkpoint)
    intact, path = str(tmp_path / 'epoch_1.pth'), str(tmp_path / 'copy.pth')
    torch.save(checkpoint, intact)
    AgainstOptions(config=None, baseline=str(tmp_path), resume_from=intact).validate()
    torch.save(checkpoint, path)
    flip_bit(path, checkpoint['mmrepro']['rng'][0]['torch'])
    options = AgainstOptions(config=None, baseline=str(tmp_path), resume_from=path)
    with pytest.raises(IntegrityError, match=rf"^--from {path!r} does not hold what was saved "
                       r'in it: mmrepro section \(RNG states, data position\): expected sha256 '
                       r"\w{64}, found \w{64}, the first entry that differs is "
                       r"mmrepro\['rng'\]\[0\]\['torch'\]; it was changed or damaged after it "
                       r"was saved: give an intact copy of the baseline's checkpoint$"):
        options.validate()
