"""Two runs' evaluations compared: metrics, predictions, the first image that differs.

A run's evaluations are those its records list (every validation of a training run,
every log dir of a resumed one joined; the test of a run that only evaluates), each
with its per-image digests from ``predictions.jsonl`` where the log dir holds them
(:mod:`mmrepro.record.evaluation`). Two evaluations pair up by kind and iteration.
"""
from __future__ import annotations

import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..record.evaluation import PREDICTIONS_NAME, RECORD_KEY, read_predictions

#: ``(kind, iteration)`` of one evaluation.
Point = Tuple[str, Optional[int]]


def read_evaluations(records: Sequence[Tuple[Dict[str, Any], Optional[str]]]
                     ) -> Dict[Point, Dict[str, Any]]:
    """Every evaluation of a run, by ``(kind, iteration)``; a later one wins.

    Args:
        records: ``(record, its log dir or None)``, oldest first.

    Returns:
        dict: The record's entry, with ``per_image`` (``[key, name, digest]`` in dataset
        order) where the log dir's ``predictions.jsonl`` holds that evaluation.
    """
    out: Dict[Point, Dict[str, Any]] = {}
    for record, log_dir in records:
        lines = read_predictions(osp.join(log_dir, PREDICTIONS_NAME)) if log_dir else []
        images = {(row.get('kind'), row.get('predictions_sha256')): row['images']
                  for row in lines}
        for entry in record.get(RECORD_KEY) or []:
            if not isinstance(entry, dict):
                continue
            found = images.get((entry.get('kind'), entry.get('predictions_sha256')))
            out[(str(entry.get('kind')), entry.get('iter'))] = {**entry,
                                                                'per_image': found}
    return out


@dataclass
class EvaluationDiff:
    """How two runs' evaluations compare.

    Attributes:
        common: The evaluations both runs hold, in order.
        first: The first of them whose predictions differ (None: none does).
        image: ``(position, key, name)`` of the first image whose predictions differ in
            it (None where the per-image digests are not both at hand).
        metrics: ``(name, A, B)`` of the metrics that differ in it.
        only: Evaluations one run holds and the other does not (information).
    """

    common: List[Point] = field(default_factory=list)
    first: Optional[Point] = None
    image: Optional[Tuple[int, str, str]] = None
    metrics: List[Tuple[str, Any, Any]] = field(default_factory=list)
    only: List[Point] = field(default_factory=list)


def first_image(images_a: Sequence[Sequence[str]],
                images_b: Sequence[Sequence[str]]) -> Optional[Tuple[int, str, str]]:
    """``(position in A's dataset order, key, name)`` of the first image whose digest
    differs or that B lacks; then the first B holds and A lacks."""
    digests_b = {image[0]: image[2] for image in images_b}
    for position, (key, name, digest) in enumerate(images_a):
        if digests_b.get(key) != digest:
            return position, key, name
    keys_a = {image[0] for image in images_a}
    for position, (key, name, _) in enumerate(images_b):
        if key not in keys_a:
            return position, key, name
    return None


def compare_evaluations(a: Dict[Point, Dict[str, Any]],
                        b: Dict[Point, Dict[str, Any]]) -> EvaluationDiff:
    """Pair the evaluations by kind and iteration; find the first that differs."""
    order = sorted(set(a) | set(b), key=lambda p: (p[1] is None, p[1] or 0, p[0]))
    diff = EvaluationDiff(common=[p for p in order if p in a and p in b],
                          only=[p for p in order if (p in a) != (p in b)])
    for point in diff.common:
        entry_a, entry_b = a[point], b[point]
        if entry_a.get('predictions_sha256') == entry_b.get('predictions_sha256'):
            continue
        diff.first = point
        if entry_a.get('per_image') is not None and entry_b.get('per_image') is not None:
            diff.image = first_image(entry_a['per_image'], entry_b['per_image'])
        metrics_a, metrics_b = entry_a.get('metrics') or {}, entry_b.get('metrics') or {}
        diff.metrics = [(k, metrics_a.get(k), metrics_b.get(k))
                        for k in list(metrics_a) + [k for k in metrics_b if k not in metrics_a]
                        if metrics_a.get(k) != metrics_b.get(k)]
        break
    return diff


def _point(point: Point) -> str:
    kind, iteration = point
    what = 'validation' if kind == 'val' else kind
    return f'{what} after iteration {iteration}' if iteration is not None else what


def image_phrase(image: Tuple[int, str, str]) -> str:
    """``image 4 in dataset order (val_003.png, img_id 4)``."""
    position, key, name = image
    named = f'{name}, img_id {key}' if name and name != key else key
    return f'image {position + 1} in dataset order ({named})'


def evaluation_lines(diff: EvaluationDiff) -> List[str]:
    """What to print about the evaluations (nothing where neither run has one)."""
    if not diff.common:
        return ([f'evaluations: none in common ({len(diff.only)} in one run only)']
                if diff.only else [])
    if diff.first is None:
        return [f'evaluations: predictions and metrics equal at every evaluation in common '
                f'({len(diff.common)}: {", ".join(_point(p) for p in diff.common)})']
    lines = [f'evaluations: predictions differ at the {_point(diff.first)}']
    if diff.image is not None:
        lines.append(f'  first differing image: {image_phrase(diff.image)}')
    else:
        lines.append('  per-image digests: not in both runs (predictions.jsonl), so the '
                     'first differing image is not named')
    if diff.metrics:
        lines.append('  metrics: ' + ', '.join(f'{k} {a} vs {b}' for k, a, b in diff.metrics[:4])
                     + (f' (and {len(diff.metrics) - 4} more)' if len(diff.metrics) > 4 else ''))
    else:
        lines.append('  metrics: equal (the predictions differ below what they show)')
    return lines
