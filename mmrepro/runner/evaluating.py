"""``val`` and ``test``: a run that only evaluates says so, in its state and its record."""
from __future__ import annotations

from typing import Any, Dict

from ..run.state import find_state


class EvaluatingMixin:
    """``Runner.val()`` and ``Runner.test()`` mark the run as one that only evaluates.

    ``ReproducibilityHook`` then writes ``test_record.json`` (not ``run_record.json``, so a
    training work dir's newest record stays the training run's): the evaluated data's
    fingerprint, the checkpoint's weights digest, the metrics and the predictions digest
    (:mod:`mmrepro.record.evaluation`).
    """

    def val(self) -> Dict[str, Any]:
        """MMEngine's ``Runner.val``, recorded as a run that only validates."""
        self._entering('val')
        return super().val()  # type: ignore[misc]

    def test(self) -> Dict[str, Any]:
        """MMEngine's ``Runner.test``, recorded as a test run."""
        self._entering('test')
        return super().test()  # type: ignore[misc]

    def _entering(self, entry: str) -> None:
        state = find_state(self)
        if state is not None:
            state.entry = entry
