"""What a run leaves to be compared: its run record and the digests of its weights."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from mmengine.dist import is_main_process

from .run_record import collect_run_record, write_run_record
from .weights import RECORD_KEY, WeightsLedger


class RunRecorder:
    """Keep a run's record (rank 0): written at the start, completed by every save.

    ``ReproducibilityHook`` calls :meth:`start` before the run, :meth:`saving` for every
    checkpoint and :meth:`finish` after training.

    Args:
        fingerprint: How the record fingerprints each sample's files
            (:data:`mmrepro.record.fingerprint.MODES`).
    """

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.record: Optional[Dict[str, Any]] = None
        self.weights = WeightsLedger()

    def start(self, runner: Any) -> None:
        """Collect the run record and write it into the log dir (rank 0 only)."""
        if not is_main_process():  # only rank 0 writes the record and checkpoints
            return
        self.record = collect_run_record(runner, self.fingerprint)
        path = write_run_record(runner, self.record)
        runner.logger.info(f'mmrepro: run record written to {path}')

    def saving(self, runner: Any, checkpoint: Dict[str, Any]) -> None:
        """Put the record and the weights digest into the checkpoint being written."""
        if self.record is None:
            return
        checkpoint['meta']['run_record'] = json.loads(json.dumps(self.record, default=str))
        self.weights.saving(checkpoint)
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
        write_run_record(runner, {**self.record, RECORD_KEY: self.weights.section()})
