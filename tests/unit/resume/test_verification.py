"""mmrepro.resume.verification: a checkpoint file against the digests saved in it, once per
file, with the one line that refuses it, the log line and the run record's entry."""
from __future__ import annotations

import logging

import pytest
import torch
from support.checkpoints import flip_bit, without_part_digests

from mmrepro.resume import verification
from mmrepro.resume.digests import seal
from mmrepro.resume.verification import (
    IntegrityError,
    check_intact,
    enforce,
    verify_file,
)
from mmrepro.rng.host_state import ProcessRNGs


def _save(path, **change) -> dict:
    """A sealed checkpoint of what a resume restores, written to ``path``."""
    torch.manual_seed(5)
    checkpoint = dict(meta=dict(epoch=1, iter=8), message_hub={},
                      state_dict={'fc.weight': torch.randn(16, 8), 'fc.bias': torch.randn(16)},
                      optimizer=dict(state={0: dict(momentum_buffer=torch.randn(16, 8))},
                                     param_groups=[dict(lr=0.1, params=[0])]),
                      mmrepro=dict(format=2, seed=1, rng=[ProcessRNGs().state_dict()]))
    seal(checkpoint)
    torch.save(checkpoint, str(path))
    return checkpoint


def test_an_intact_file_is_verified_once_per_process(tmp_path, monkeypatch):
    path = str(tmp_path / 'iter_8.pth')
    _save(path)
    calls = []
    check_parts = verification.check_parts
    monkeypatch.setattr(verification, 'check_parts',
                        lambda *args: calls.append(args[1]) or check_parts(*args))
    resumed = verify_file(path, resuming=True)
    assert resumed.verified and calls == [('weights', 'optimizer', 'param_schedulers',
                                           'mmrepro', 'meta')]
    assert verify_file(path, resuming=True) is resumed
    loaded = verify_file(path, resuming=False)  # the weights are among them
    assert loaded.verified and [c.part for c in loaded.checks] == ['weights']
    assert verify_file(path, resuming=False) is loaded and len(calls) == 1
    other = str(tmp_path / 'iter_9.pth')
    _save(other)
    assert verify_file(other, resuming=False).verified and calls[-1] == ('weights',)
    assert verify_file(other, resuming=True).verified and len(calls) == 3  # more parts
    level, line = resumed.log_line(allowed=False)
    assert level == logging.INFO and line.startswith(
        f'mmrepro: verified {path}: weights, optimizer state, mmrepro section (RNG states, '
        'data position) and training position (epoch, iteration, seed) match the digests '
        'saved with it (')
    assert resumed.record(allowed=False) == dict(file=path, verified=True, parts=dict(
        weights='matches', optimizer='matches', mmrepro='matches', meta='matches'))


def test_a_flipped_bit_is_refused_in_one_line_naming_the_digests_and_the_tensor(tmp_path):
    path = str(tmp_path / 'iter_8.pth')
    saved = _save(path)
    flip_bit(path, saved['optimizer']['state'][0]['momentum_buffer'])
    verdict = verify_file(path, resuming=True)
    (check,) = verdict.differing
    assert check.part == 'optimizer' and check.expected != check.found
    with pytest.raises(IntegrityError) as info:
        enforce(verdict, allow=False)
    assert str(info.value) == (
        f'Checkpoint {path!r} does not hold what was saved in it: optimizer state: expected '
        f"sha256 {check.expected}, found {check.found}, the first entry that differs is "
        "optimizer['state'][0]['momentum_buffer']. It was changed or damaged after it was "
        'saved (a copy, a transfer, the storage): copy it again from where it was written, '
        'or resume from another checkpoint; nothing was trained from it. To load it anyway: '
        '--no-verify-checkpoints (randomness.verify_checkpoints=False); the run record then '
        'says it was not verified.')
    assert verify_file(path, resuming=False).verified  # its weights are intact
    enforce(verdict, allow=True)  # loaded anyway: said in the log and the record
    level, line = verdict.log_line(allowed=True)
    assert level == logging.WARNING and line.startswith(
        f'mmrepro: loading {path} although it does not hold what was saved in it (optimizer '
        'state: expected sha256 ')
    record = verdict.record(allowed=True)
    assert record['verified'] is False and record['parts']['optimizer'] == 'differs'
    assert record['loaded_anyway'] == 'randomness.verify_checkpoints=False'
    with pytest.raises(IntegrityError, match=r"^--from 'x' does not hold what was saved in it: "
                       r'optimizer state: expected sha256 \w+, found \w+, the first entry '
                       r'.*; it was changed or damaged after it was saved: give another$'):
        check_intact(path, True, "--from 'x'", 'give another')


def test_files_without_digests_load_and_the_log_says_what_was_not_verified(tmp_path):
    old, plain = str(tmp_path / 'old.pth'), str(tmp_path / 'plain.pth')
    torch.save(without_part_digests(_save(old)), old)
    torch.save(without_part_digests(_save(plain), weights_too=True), plain)
    verdict = verify_file(old, resuming=True)
    enforce(verdict, allow=False)
    assert not verdict.verified and verdict.unverified == ['optimizer', 'mmrepro', 'meta']
    assert verdict.log_line(False) == (logging.WARNING, (
        f'mmrepro: {old}: weights match the digests saved with it; its optimizer state, '
        'mmrepro section (RNG states, data position) and training position (epoch, '
        'iteration, seed) could not be verified (saved without their digests, by an '
        'earlier mmrepro).'))
    verdict = verify_file(plain, resuming=False)
    assert verdict.log_line(False)[1] == (
        f'mmrepro: {plain} holds no digests (written without mmrepro, or by an earlier '
        'release): its weights could not be verified; loaded as it is.')
    assert verdict.record(False) == dict(file=plain, verified=False,
                                         parts=dict(weights='no digest'))
    odd = str(tmp_path / 'odd.pth')
    torch.save([1, 2], odd)
    assert verify_file(odd, resuming=False).log_line(False)[1] == (
        f'mmrepro: {odd} holds nothing mmrepro digests (no state dict): it was not verified.')
    url = verify_file('https://example.org/x.pth', resuming=False)
    assert not url.verified and url.log_line(False)[1] == (
        'mmrepro: https://example.org/x.pth is not a local file (MMEngine fetches it): it '
        'was not verified against its digests.')


def test_a_file_replaced_under_the_same_name_is_verified_again(tmp_path):
    path = str(tmp_path / 'epoch_1.pth')
    _save(path)
    assert verify_file(path, resuming=False).verified
    checkpoint = _save(path)
    checkpoint['state_dict']['fc.bias'][0] += 1
    torch.save(checkpoint, str(tmp_path / 'other.pth'))
    (tmp_path / 'other.pth').replace(path)  # a new inode, as a copy over it makes
    assert verify_file(path, resuming=False).differing
