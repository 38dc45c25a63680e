"""The weights a run holds evidence of: digests by iteration.

A run's weights are known at an iteration from a checkpoint at hand (hashed with
:func:`mmrepro.resume.digests.weights_digest`, whatever wrote it) or from the run
record's ``weights`` section (the digests ``ReproducibilityHook`` recorded when it
saved, so a run whose checkpoints were deleted still compares). A checkpoint at hand
is hashed again rather than trusted: when its recorded digest disagrees, that is said.
"""
from __future__ import annotations

import glob
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..resume.checkpoint_io import CheckpointLoadError, peek
from ..resume.digests import META_KEY, WeightsError, section_names, weights_digest
from .weights import RECORD_KEY


class WeightsReadError(ValueError):
    """A checkpoint given to compare cannot be read or holds no weights."""


def read_checkpoint(path: str) -> Tuple[Any, Optional[int]]:
    """``(checkpoint, iteration)`` of a checkpoint file (tensors memory-mapped).

    Raises:
        WeightsReadError: The file is missing or cannot be loaded safely.
    """
    if not osp.isfile(path):
        raise WeightsReadError(f'{path}: no such file; expected a checkpoint file (.pth)')
    try:
        checkpoint = peek(path)
    except CheckpointLoadError as err:
        raise WeightsReadError(str(err)) from None
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) else None
    iteration = meta.get('iter') if isinstance(meta, Mapping) else None
    return checkpoint, iteration if isinstance(iteration, int) else None


@dataclass
class CheckpointWeights:
    """The weights of one checkpoint file.

    Attributes:
        digest: Digest of its weights, computed now.
        recorded: The digest recorded in its meta when it was saved (None if none).
        iteration: The iteration its meta names (None if none).
        covers: What the digest covers (``state_dict + ema_state_dict``).
    """

    digest: str
    recorded: Optional[str]
    iteration: Optional[int]
    covers: str


def checkpoint_weights(path: str) -> CheckpointWeights:
    """Hash a checkpoint file's weights.

    Raises:
        WeightsReadError: The file cannot be loaded, or holds no weights.
    """
    return weights_of(path, *read_checkpoint(path))


def weights_of(path: str, checkpoint: Any, iteration: Optional[int]) -> CheckpointWeights:
    """Hash the weights of a checkpoint already read from ``path`` (:func:`read_checkpoint`).

    Raises:
        WeightsReadError: It holds no weights.
    """
    try:
        digest = weights_digest(checkpoint)
    except WeightsError as err:
        raise WeightsReadError(f'{path}: {err}; not a model checkpoint') from None
    meta = checkpoint.get('meta') if isinstance(checkpoint.get('meta'), Mapping) else {}
    return CheckpointWeights(digest, meta.get(META_KEY), iteration, section_names(checkpoint))


@dataclass
class WeightsIndex:
    """Where one run's weights are known, by iteration.

    Attributes:
        recorded: Iteration -> digest, from the run records.
        files: Iteration -> checkpoint file at hand.
        final: The iteration the run ended at, if a record says so.
        notes: What could not be used, and recorded digests that disagree with the
            weights of their file.
    """

    recorded: Dict[int, str] = field(default_factory=dict)
    files: Dict[int, str] = field(default_factory=dict)
    final: Optional[int] = None
    notes: List[str] = field(default_factory=list)
    _hashed: Dict[int, str] = field(default_factory=dict)
    #: Checkpoints read when indexed (tensors memory-mapped), until their weights are hashed.
    _read: Dict[int, Any] = field(default_factory=dict)

    def iterations(self) -> List[int]:
        """Every iteration whose weights are known, in order."""
        return sorted(set(self.recorded) | set(self.files))

    def digest(self, iteration: int) -> Optional[str]:
        """The digest at ``iteration``: its checkpoint's weights hashed, else recorded."""
        if iteration in self._hashed:
            return self._hashed[iteration]
        path = self.files.get(iteration)
        if path is None:
            return self.recorded.get(iteration)
        weights = (weights_of(path, self._read.pop(iteration), iteration)
                   if iteration in self._read else checkpoint_weights(path))
        digest = weights.digest
        expected = self.recorded.get(iteration, weights.recorded)
        if expected is not None and expected != digest:
            self.notes.append(f'{path}: its weights do not match the digest recorded when '
                              f'it was saved ({expected[:12]} vs {digest[:12]}): the file '
                              'was changed since; its weights are compared')
        self._hashed[iteration] = digest
        return digest

    def add_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Take the ``weights`` sections of run records (a later record wins)."""
        for record in records:
            section = record.get(RECORD_KEY)
            if not isinstance(section, Mapping):
                continue
            for key, digest in (section.get('checkpoints') or {}).items():
                if str(key).isdigit() and isinstance(digest, str):
                    self.recorded[int(key)] = digest
            final = section.get('final')
            if isinstance(final, Mapping) and isinstance(final.get('iter'), int):
                self.final = final['iter']
                if isinstance(final.get('sha256'), str):
                    self.recorded[final['iter']] = final['sha256']

    def add_file(self, iteration: int, path: str, checkpoint: Any) -> None:
        """Index a checkpoint read from ``path``; its weights are hashed when compared."""
        self.files[iteration], self._read[iteration] = path, checkpoint

    def add_work_dir(self, work_dir: str) -> None:
        """Index the checkpoints in a work dir by the iteration their meta names."""
        for path in sorted(glob.glob(osp.join(glob.escape(work_dir), '*.pth'))):
            try:
                checkpoint, iteration = read_checkpoint(path)
            except WeightsReadError as err:
                self.notes.append(f'skipped: {err}')
                continue
            if iteration is not None:
                self.add_file(iteration, path, checkpoint)


def compare_weights(a: WeightsIndex, b: WeightsIndex) -> Tuple[
        List[int], Optional[Tuple[int, str, str]]]:
    """Compare the weights at every iteration both runs know.

    Returns:
        tuple: ``(iterations compared, (first differing iteration, digest A, digest
        B) or None)``.
    """
    common = sorted(set(a.iterations()) & set(b.iterations()))
    compared: List[int] = []
    for iteration in common:
        digest_a, digest_b = a.digest(iteration), b.digest(iteration)
        if digest_a is None or digest_b is None:
            continue
        compared.append(iteration)
        if digest_a != digest_b:
            return compared, (iteration, digest_a, digest_b)
    return compared, None
