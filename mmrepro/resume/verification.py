"""Checkpoints that prove themselves: a checkpoint is checked against its digests on load.

Every checkpoint mmrepro saves holds the digests of what a resume restores
(:mod:`.digests`). Before a checkpoint is trained from, tested or bundled, the parts
that load will use are hashed again and compared: the weights for ``load_from``, a test
or a bundle's listing; the weights, optimizer state, parameter scheduler state, the
``mmrepro`` section and the training position (``meta``'s epoch, iteration and seed)
for a resume. A file that does not match is refused with one line
(:class:`IntegrityError`: the file, each part's expected and found digest, and the first
tensor or entry that differs), unless ``randomness.verify_checkpoints=False``
(``--no-verify-checkpoints``), which loads it anyway and says so in the log and the run
record. A file without digests (written without mmrepro, or by an earlier mmrepro) loads
as before, and the log says what could not be verified.

A file is verified once per process (:func:`verify_file` remembers each verdict by the
file's path, size, inode and times), however often it is read: the training tool
checks it before anything is built, and the Runner that then peeks at it and loads it
takes that verdict.
"""
from __future__ import annotations

import logging
import os
import os.path as osp
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .checkpoint_io import CheckpointLoadError, peek
from .digests import PARTS, WEIGHTS, PartCheck, check_parts

#: What a resume verifies: every part it restores.
RESUME_PARTS = PARTS
#: What loading the weights alone (``load_from``, a test) verifies.
LOAD_PARTS = (WEIGHTS,)
#: The run record's section saying how the checkpoint it loaded was verified.
RECORD_KEY = 'checkpoint_verification'
#: How each part is named in messages.
PART_NAMES = {WEIGHTS: 'weights', 'optimizer': 'optimizer state',
              'param_schedulers': 'parameter scheduler state',
              'mmrepro': 'mmrepro section (RNG states, data position)',
              'meta': 'training position (epoch, iteration, seed)'}
#: How to load a checkpoint that does not match anyway.
ANYWAY = '--no-verify-checkpoints (randomness.verify_checkpoints=False)'


class IntegrityError(CheckpointLoadError):
    """A checkpoint does not hold what its digests say it held when it was saved."""


@dataclass(frozen=True)
class Verdict:
    """How one checkpoint file compares with the digests saved in it.

    Attributes:
        path: The file.
        parts: The parts that were asked for (a resume's or a load's).
        checks: One per part the file holds or has a digest of.
        seconds: What the check took.
        local: False for a file MMEngine fetches (a URL): not verified.
    """

    path: str
    parts: Tuple[str, ...]
    checks: Tuple[PartCheck, ...] = ()
    seconds: float = 0.0
    local: bool = True

    @property
    def differing(self) -> List[PartCheck]:
        """The parts that do not match their saved digest."""
        return [check for check in self.checks if check.differs]

    @property
    def unverified(self) -> List[str]:
        """The parts held without a saved digest."""
        return [check.part for check in self.checks if check.expected is None]

    @property
    def verified(self) -> bool:
        """Every part checked matches its saved digest, and none lacked one."""
        return self.local and bool(self.checks) and not self.differing and \
            not self.unverified

    def problem(self) -> str:
        """What differs, one clause per part: the expected and found digests and the
        first tensor or entry that differs."""
        clauses = []
        for check in self.differing:
            name = PART_NAMES.get(check.part, check.part)
            if check.found is None:
                clauses.append(f'its {name} is missing (saved with sha256 {check.expected})')
                continue
            unit = 'tensor' if check.part == WEIGHTS else 'entry'
            first = (f', the first {unit} that differs is {check.first_difference}'
                     if check.first_difference else '')
            clauses.append(f'{name}: expected sha256 {check.expected}, found {check.found}'
                           f'{first}')
        return '; '.join(clauses)

    def refusal(self, done: str = 'nothing was trained from it') -> str:
        """The one line that refuses the file.

        Args:
            done: What the line says of what happened (``nothing was written`` before
                anything is built).
        """
        return (f'Checkpoint {self.path!r} does not hold what was saved in it: '
                f'{self.problem()}. It was changed or damaged after it was saved (a copy, '
                'a transfer, the storage): copy it again from where it was written, or '
                f'resume from another checkpoint; {done}. To load it anyway: {ANYWAY}; the '
                'run record then says it was not verified.')

    def log_line(self, allowed: bool) -> Tuple[int, str]:
        """``(level, line)`` the Runner's log says about this verdict.

        Args:
            allowed: Whether a file that differs was loaded anyway.
        """
        if not self.local:
            return logging.WARNING, (f'mmrepro: {self.path} is not a local file (MMEngine '
                                     'fetches it): it was not verified against its digests.')
        if self.differing and allowed:
            return logging.WARNING, (
                f'mmrepro: loading {self.path} although it does not hold what was saved in '
                f'it ({self.problem()}), since randomness.verify_checkpoints=False; the run '
                'record says it was not verified.')
        matched = [PART_NAMES.get(c.part, c.part) for c in self.checks
                   if c.expected is not None and not c.differs]
        if not self.checks:
            return logging.WARNING, (f'mmrepro: {self.path} holds nothing mmrepro digests '
                                     '(no state dict): it was not verified.')
        if not self.unverified:
            return logging.INFO, (f'mmrepro: verified {self.path}: {_listed(matched)} match '
                                  f'the digests saved with it ({self.seconds:.2f} s).')
        missing = _listed([PART_NAMES.get(p, p) for p in self.unverified])
        if not matched:
            return logging.WARNING, (
                f'mmrepro: {self.path} holds no digests (written without mmrepro, or by an '
                f'earlier release): its {missing} could not be verified; loaded as it is.')
        return logging.WARNING, (
            f'mmrepro: {self.path}: {_listed(matched)} match the digests saved with it; its '
            f'{missing} could not be verified (saved without their digests, by an earlier '
            'mmrepro).')

    def record(self, allowed: bool) -> Dict[str, Any]:
        """The run record's :data:`RECORD_KEY` section.

        Args:
            allowed: Whether a file that differs was loaded anyway.
        """
        parts = {check.part: ('no digest' if check.expected is None else 'missing'
                              if check.found is None else 'differs' if check.differs
                              else 'matches') for check in self.checks}
        entry: Dict[str, Any] = dict(file=self.path, verified=self.verified, parts=parts)
        if not self.local:
            entry['problem'] = 'not a local file: not verified'
        elif self.differing:
            entry['problem'] = self.problem()
            entry['loaded_anyway'] = ('randomness.verify_checkpoints=False' if allowed
                                      else False)
        return entry


def _listed(names: List[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


#: Each verdict, by the identity of the file it is about (:func:`_identity`) and the
#: parts asked for.
_VERDICTS: Dict[Tuple[Any, ...], Verdict] = {}


def _identity(path: str) -> Tuple[Any, ...]:
    """What tells one file's contents from another's without reading it."""
    stat = os.stat(path)
    return (osp.realpath(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns,
            stat.st_ctime_ns)


def verify_file(path: str, resuming: bool,
                checkpoint: Optional[Dict[str, Any]] = None) -> Verdict:
    """The verdict on a checkpoint file: computed once per file and process.

    Args:
        path: A local checkpoint file, or a URL (not verified: MMEngine fetches it).
        resuming: Verify every part a resume restores (else the weights alone).
        checkpoint: The file, already read (e.g. :func:`~.checkpoint_io.peek`); read
            here (tensors memory-mapped) where None.

    Raises:
        CheckpointLoadError: The file cannot be read.
    """
    parts = RESUME_PARTS if resuming else LOAD_PARTS
    if '://' in path:
        return Verdict(path, parts, local=False)
    path = osp.expanduser(path)
    key = _identity(path)
    known = _VERDICTS.get(key + (parts,))
    if known is not None:
        return known
    wider = next((v for k, v in _VERDICTS.items() if k[:-1] == key and set(parts) <= set(
        v.parts)), None)
    if wider is not None:  # the parts asked for, of a verdict on more
        verdict = Verdict(path, parts, tuple(c for c in wider.checks if c.part in parts),
                          wider.seconds)
    else:
        if checkpoint is None:
            checkpoint = peek(path)
        start = time.perf_counter()
        checks = check_parts(checkpoint, parts) if isinstance(checkpoint, dict) else []
        verdict = Verdict(path, parts, tuple(checks), time.perf_counter() - start)
    _VERDICTS[key + (parts,)] = verdict
    return verdict


def enforce(verdict: Verdict, allow: bool, done: str = 'nothing was trained from it') -> None:
    """Refuse a checkpoint that does not match its digests, unless ``allow``.

    Raises:
        IntegrityError: It differs and ``allow`` is False (one line:
            :meth:`Verdict.refusal`, saying ``done``).
    """
    if verdict.differing and not allow:
        raise IntegrityError(verdict.refusal(done))


def check_intact(path: str, resuming: bool, what: str, fix: str) -> None:
    """Refuse a checkpoint that does not match its digests, for a tool that has no use
    for one (a comparison with a baseline, a bundle): no option loads it anyway.

    Args:
        path: The checkpoint file.
        resuming: Verify everything a resume restores, not the weights alone.
        what: How the message names it (e.g. ``--from 'x.pth'``).
        fix: What to do, for the message.

    Raises:
        IntegrityError: It does not match its digests.
        CheckpointLoadError: It cannot be read.
    """
    verdict = verify_file(path, resuming)
    if verdict.differing:
        raise IntegrityError(f'{what} does not hold what was saved in it: '
                             f'{verdict.problem()}; it was changed or damaged after it was '
                             f'saved: {fix}')
