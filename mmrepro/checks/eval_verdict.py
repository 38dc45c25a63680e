"""The verdict on evaluations: two test runs, or the validations of two training runs.

- Two test runs (``mmrepro-test``): the same predictions (every image's digest) and
  metrics, or not; where not, whether the checkpoints held the same weights (then the
  difference is in evaluation: the settings that differ are named) or not (then it is
  in training: compare the training runs).
- Two training runs whose training agrees but whose validations differ: "same weights,
  different validation", and what makes validation differ where weights do not.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .evaluations import EvaluationDiff, Point, compare_evaluations, image_phrase

Diff = Tuple[str, Any, Any]
#: Settings shown by name as possible causes, at most.
_NAMED = 6


def _at(diff: EvaluationDiff) -> str:
    return (f' (first differing image: {image_phrase(diff.image)})'
            if diff.image is not None else '')


def _settings(differences: Sequence[Diff]) -> str:
    keys = [key for key, _, _ in differences]
    more = f' and {len(keys) - _NAMED} more' if len(keys) > _NAMED else ''
    return ', '.join(keys[:_NAMED]) + more


def latest_test(evaluations: Dict[Point, Dict[str, Any]]) -> Dict[Point, Dict[str, Any]]:
    """A test run's last test, keyed to pair with another test run's whatever the
    checkpoint's iteration."""
    tests = [entry for (kind, _), entry in evaluations.items() if kind == 'test']
    return {('test', None): tests[-1]} if tests else {}


def checkpoint_lines(record_a: Dict[str, Any],
                     record_b: Dict[str, Any]) -> Tuple[List[str], Optional[bool]]:
    """Lines on the two test runs' checkpoints; whether their weights are the same
    (None: a record lacks the digest)."""
    a, b = record_a.get('checkpoint') or {}, record_b.get('checkpoint') or {}
    digest_a, digest_b = a.get('weights_sha256'), b.get('weights_sha256')
    if not (digest_a and digest_b):
        return ['checkpoints: no weights digest in both test records'], None
    if digest_a == digest_b:
        return [f"checkpoints: the same weights ({digest_a[:12]}, iteration "
                f"{a.get('iter')})"], True
    return [f"checkpoints: different weights (A {digest_a[:12]} at iteration {a.get('iter')}, "
            f"B {digest_b[:12]} at iteration {b.get('iter')})"], False


def compare_test_runs(evaluations_a: Dict[Point, Dict[str, Any]],
                     evaluations_b: Dict[Point, Dict[str, Any]],
                     same_weights: Optional[bool],
                     differences: Sequence[Diff]) -> Tuple[EvaluationDiff, List[str], bool]:
    """Compare two test runs' tests; return the comparison, the verdict lines and whether
    the predictions are identical."""
    diff = compare_evaluations(latest_test(evaluations_a), latest_test(evaluations_b))
    if not diff.common:
        return diff, ['verdict: inconclusive: a test record holds no test (was the test '
                      'interrupted?)', '  next: run mmrepro-test to the end in both'], False
    if diff.first is None:
        entry = latest_test(evaluations_a)[('test', None)]
        return diff, [f"verdict: identical predictions ({entry.get('images')} images, bit "
                      'for bit) and metrics'], True
    if same_weights is False:
        return diff, [f'verdict: different predictions{_at(diff)}, from different weights: '
                      'the checkpoints differ, so the difference is in training',
                      '  next: compare the two training runs (mmrepro-diff WORK_DIR_A '
                      'WORK_DIR_B)'], False
    causes = (f'the evaluation settings that differ: {_settings(differences)}' if differences
              else 'no recorded setting differs: an operation of evaluation is '
              'nondeterministic here')
    what = 'same weights' if same_weights else 'weights not recorded in both'
    return diff, [f'verdict: {what}, different predictions{_at(diff)}: {causes}'], False


def validation_verdict(diff: EvaluationDiff, same_weights: bool,
                       world_sizes: Tuple[Any, Any]) -> List[str]:
    """The verdict where training agrees but a validation differs."""
    assert diff.first is not None
    iteration = diff.first[1]
    ranks = ('; the runs validate on other numbers of ranks '
             f'({world_sizes[0]} vs {world_sizes[1]})'
             if world_sizes[0] != world_sizes[1] else '')
    what = 'same weights, different validation' if same_weights else \
        'training agrees where compared, different validation'
    return [f'verdict: {what} after iteration {iteration}{_at(diff)}: the difference is in '
            "evaluation: BatchNorm buffers (each rank's own running statistics where rank "
            "0's are not broadcast before validation, as mmrepro does), the validation "
            f'batches or the evaluation settings{ranks}',
            f'  next: mmrepro-test on the checkpoint of iteration {iteration} of both runs, '
            'then mmrepro-diff the two test records']
