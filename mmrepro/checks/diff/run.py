"""``mmrepro-diff A B``: do two training runs (or two test runs) match, and if not, why?

Compares two runs (work dirs, log dirs, ``run_record.json`` files, checkpoints or
bundles, :func:`load_pair`):

1. their run records (:mod:`mmrepro.record.run_record`): seed, randomness, world size,
   backend, versions, devices, environment, PyTorch flags, every config key, the
   training data fingerprint (keys that cannot change training listed apart, as
   information: :mod:`mmrepro.checks.causes`);
2. everything both runs hold (:mod:`mmrepro.checks.evidence`): every logged iteration's
   losses (``vis_data/scalars.json``; not where the runs log with other
   ``log_processor`` settings, which average other windows), every traced iteration
   (:mod:`mmrepro.trace`: first differing module, whether the samples were the same),
   and the weights at every checkpoint both know, the final ones included; two
   checkpoint files compare by their weights (:mod:`.report`);
3. every validation both runs recorded (:mod:`mmrepro.checks.evaluations`): metrics and
   predictions, the first image whose predictions differ;
4. a verdict (:mod:`.verdict`): a data or a numeric difference and the recorded
   differences that explain it, ranked, each with the setting or command that removes
   it; identical only when all of it agrees, and only "through iteration k" when the
   runs cover different spans; "same weights, different validation" where training
   agrees; where only the numbers differ, rounding or real (:mod:`.rounding`).

Two test runs (``mmrepro-test``: their ``test_record.json`` or log dirs) compare by their
settings, their checkpoints' weights digests and their predictions, image by image
(:func:`diff_test_runs`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

from ...record.run_record import RunRecordError
from ..envelope import Rounding, say_rounding
from ..eval_verdict import checkpoint_lines, compare_test_runs
from ..evaluations import compare_evaluations, evaluation_lines
from ..evidence import compare_evidence, weights_lines
from ..run_data import RunData, load_run
from .report import LOG_SETTINGS, describe_records, logged_lines, trace_lines
from .rounding import diff_rounding
from .verdict import (
    DIFFERENT,
    IDENTICAL,
    INCONCLUSIVE,
    judge_runs,
    numeric,
    with_rounding,
)


@dataclass
class DiffResult:
    """What comparing two training runs found.

    Attributes:
        status: The exit status (:mod:`.verdict`'s statuses).
        verdict: The verdict lines.
        first: The first iteration where anything differs (None: nothing does).
        rounding: Where only the numbers differ: rounding or real, with the evidence.
    """

    status: int
    verdict: List[str] = field(default_factory=list)
    first: Optional[int] = None
    rounding: Optional[Rounding] = None


def load_pair(path_a: str, path_b: str) -> Tuple[RunData, RunData]:
    """Read runs A and B, both training runs or both test runs.

    Raises:
        RunRecordError: A run cannot be read, or one is a test run and the other a
            training run.
        TraceError, WeightsReadError, BundleError: A trace, a checkpoint or a bundle
            cannot be read.
    """
    a, b = load_run('A', path_a), load_run('B', path_b)
    if a.kind != b.kind:
        test, train = (a, b) if a.kind == 'test' else (b, a)
        raise RunRecordError(f'{test.path} is a test run (test_record.json) and {train.path} '
                             'a training run; give two test runs, or two training runs (their '
                             'validations are compared)')
    return a, b


def diff_test_runs(a: RunData, b: RunData, say: Callable[..., None] = print) -> int:
    """Compare two test runs (``mmrepro-test``); report through ``say``; return the exit
    status."""
    settings = describe_records(a, b, places=('config.load_from',))
    checkpoints, same_weights = checkpoint_lines(a.record or {}, b.record or {})
    diff, verdict, identical = compare_test_runs(a.evaluations, b.evaluations, same_weights,
                                                settings.kept)
    for line in (*settings.lines, *checkpoints, *evaluation_lines(diff), *verdict):
        say(line)
    if not diff.common:
        return INCONCLUSIVE
    return IDENTICAL if identical else DIFFERENT


def diff_runs(a: RunData, b: RunData, say: Callable[..., None] = print,
              bitwise: bool = False, envelope: bool = True) -> DiffResult:
    """Compare two training runs; report through ``say``; return what was found.

    Args:
        a: Run A.
        b: Run B.
        say: Where the lines go.
        bitwise: Require bit for bit: runs equivalent within rounding differ.
        envelope: Where only the numbers differ, measure the rounding envelope here (two
            short runs of A's config) to say whether that is rounding or real.
    """
    settings = describe_records(a, b)
    traced, trace_diff = trace_lines(a, b)
    logged = not any(key.startswith(LOG_SETTINGS) for key, _, _ in settings.inert)
    result = compare_evidence(a.evidence, b.evidence, trace_diff, logged=logged)
    notes = a.evidence.weights.notes + b.evidence.weights.notes
    evaluations = compare_evaluations(a.evaluations, b.evaluations)
    verdict, status = judge_runs(a, b, settings.kept, result, evaluations)
    for line in (*settings.lines, *traced, *logged_lines(a, b, result),
                 *weights_lines(result, notes), *evaluation_lines(evaluations)):
        say(line)
    rounding = None
    if status == DIFFERENT and numeric(a, b, trace_diff) and envelope:
        rounding = diff_rounding(a, b, say)
        say_rounding(rounding, say, 'of A and B')
        verdict, status = with_rounding(verdict, rounding, bitwise)
    for line in verdict:
        say(line)
    return DiffResult(status, verdict, result.first, rounding)
