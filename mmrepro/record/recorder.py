"""What a run leaves to be compared: its run record and the digests of its weights."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from mmengine.dist import is_main_process

from ..resume.digests import section_names, weights_digest
from ..resume.verification import RECORD_KEY as VERIFICATION
from .evaluation import RECORD_KEY as EVALUATION
from .evaluation import Image, write_predictions
from .initial_weights import SECTION as INITIAL
from .initial_weights import initial_files, model_digest
from .run_record import collect_run_record, write_run_record
from .weights import RECORD_KEY, WeightsLedger


class RunRecorder:
    """Keep a run's record (rank 0): written at the start, completed by every save.

    ``ReproducibilityHook`` calls :meth:`start` before the run, :meth:`resumed` when a
    checkpoint is resumed, :meth:`starting` right before the first step, :meth:`saving`
    for every checkpoint, :meth:`evaluated` after every evaluation and :meth:`finish`
    after training; a run that only evaluates gets :meth:`loaded` for its checkpoint, and
    a run that loads one :meth:`verified`.

    Args:
        fingerprint: How the record fingerprints each sample's files
            (:data:`mmrepro.record.fingerprint.MODES`).
    """

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.record: Optional[Dict[str, Any]] = None
        self.weights = WeightsLedger()
        self._resumed: Optional[Dict[str, Any]] = None  # the continued run's section
        self._resuming = False

    def start(self, runner: Any, kind: str = 'train') -> None:
        """Collect the run record and write it into the log dir (rank 0 only).

        Args:
            runner: The Runner.
            kind: ``train``, or ``val``/``test`` for a run that only evaluates (its
                record is ``test_record.json``).
        """
        if not is_main_process():  # only rank 0 writes the record and checkpoints
            return
        self.record = collect_run_record(runner, self.fingerprint, kind)
        path = write_run_record(runner, self.record)
        runner.logger.info(f'mmrepro: run record written to {path}')

    def loaded(self, runner: Any, checkpoint: Dict[str, Any]) -> None:
        """A run that only evaluates: record the weights it evaluates (``checkpoint``)."""
        if self.record is None or self.record.get('run', 'train') == 'train':
            return
        meta = checkpoint.get('meta') or {}
        source = meta.get('run_record') if isinstance(meta.get('run_record'), dict) else {}
        self.record['checkpoint'] = dict(
            file=getattr(runner, '_load_from', None), iter=meta.get('iter'),
            epoch=meta.get('epoch'),
            weights_sha256=weights_digest(checkpoint), covers=section_names(checkpoint),
            seed=meta.get('seed'), config_sha256=source.get('config_sha256'))
        self._write(runner)

    def evaluated(self, runner: Any, entry: Dict[str, Any], images: List[Image]) -> None:
        """Add one evaluation to the record; its per-image digests to the log dir."""
        if self.record is None:
            return
        if entry['iter'] is None:  # a run that only evaluates: its checkpoint's point
            checkpoint = self.record.get('checkpoint') or {}
            entry.update(iter=checkpoint.get('iter'), epoch=checkpoint.get('epoch'))
        self.record.setdefault(EVALUATION, []).append(entry)
        write_predictions(runner.log_dir, entry, images)
        self._write(runner)

    def resumed(self, checkpoint: Dict[str, Any]) -> None:
        """Keep the ``initial`` section of the run a resumed checkpoint continues."""
        section = ((checkpoint.get('meta') or {}).get('run_record') or {}).get(INITIAL)
        self._resumed = dict(section) if isinstance(section, dict) else None
        self._resuming = True

    def starting(self, runner: Any) -> None:
        """Complete the ``initial`` section right before the first step: the digest of the
        weights the model starts from (after initialisation and ``load_from``), or, for
        a resumed run, the section of the run it continues (where its checkpoint holds
        one: a checkpoint written before this section leaves the files read here)."""
        if self.record is None:
            return
        if self._resuming and self._resumed is not None:  # the checkpoint's weights now
            self.record[INITIAL] = self._resumed
        else:  # read now: MMEngine has read (and downloaded) every file by this point
            files = initial_files(runner.model, getattr(runner, '_load_from', None),
                                  self._resuming)
            self.record[INITIAL] = dict(files=files) if self._resuming else dict(
                files=files, model_sha256=model_digest(runner.model))
        self._write(runner)

    def saving(self, runner: Any, checkpoint: Dict[str, Any],
               digest: Optional[str] = None) -> None:
        """Put the record and the weights digest into the checkpoint being written.

        Args:
            runner: The Runner.
            checkpoint: The checkpoint being written.
            digest: Its weights digest where already computed; computed here otherwise.
        """
        if self.record is None:
            return
        checkpoint['meta']['run_record'] = json.loads(json.dumps(self.record, default=str))
        self.weights.saving(checkpoint, digest)
        self._write(runner)

    def verified(self, runner: Any, entry: Dict[str, Any]) -> None:
        """Record how the checkpoint this run resumed or loaded compared with its digests
        (:data:`mmrepro.resume.verification.RECORD_KEY`)."""
        if self.record is None:
            return
        self.record[VERIFICATION] = entry
        self._write(runner)

    def finish(self, runner: Any) -> None:
        """Log the digest of the weights training ended with; add it to the record."""
        if self.record is None:
            return
        final = self.weights.final(runner)
        self._write(runner)
        runner.logger.info(f"mmrepro: weights sha256 after iteration {final['iter']}: "
                           f"{final['sha256']} ({final['covers']}; compare with "
                           'mmrepro-digest CHECKPOINT)')

    def _write(self, runner: Any) -> None:
        """The run record, with the weights digests so far, into the log dir."""
        trained = self.record.get('run', 'train') == 'train'
        write_run_record(runner, {**self.record, RECORD_KEY: self.weights.section()}
                         if trained else self.record)
