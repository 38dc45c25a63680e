"""Comparing two traces: the first differing iteration and what differs in it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .fileformat import DATA, ROOT_NAME, SECTIONS

SECTION_TITLES = dict(forward='forward output', grad='gradient', weight='weight after the step',
                      buffer='buffer', losses='loss value', data='data')
_SINGULARS = dict(losses='loss', forward='forward output', grad='gradient', weight='weight',
                  buffer='buffer', data='sample')
_PLURALS = dict(forward='forward outputs', grad='gradients', weight='weights after the step',
                buffer='buffers', losses='loss values', data='samples')
#: Every section, in the order a difference is blamed (data first, losses last).
_CAUSAL = (DATA, *SECTIONS, 'losses')


@dataclass
class TraceDiff:
    """How two traces compare over the iterations both recorded.

    Attributes:
        common: The iterations present in both traces, in order.
        iteration: The first common iteration that differs (None if all are equal).
        epoch: That iteration's epoch (0-based, as MMEngine counts).
        first: Per section (``losses`` and :data:`SECTIONS`), the first differing
            entry ``(name, value_a, value_b)`` at that iteration, in recorded order:
            forward outputs in the order the forward pass finished them, gradients in
            the order backward produced them, weights and buffers in module order.
        counts: Per section, how many entries differ at that iteration.
        totals: Per section, how many entries that iteration has.
        compared: The sections compared (asked for and recorded by both traces).
        data_checked: Common iterations whose per-sample data digests both traces hold.
        data_iteration: The first of those whose data differ (None if none does).
        data_first: Its first differing sample ``(slot, value_a, value_b)``.
    """

    common: List[int] = field(default_factory=list)
    iteration: Optional[int] = None
    epoch: Optional[int] = None
    first: Dict[str, Tuple[str, Optional[str], Optional[str]]] = field(default_factory=dict)
    counts: Dict[str, int] = field(default_factory=dict)
    totals: Dict[str, int] = field(default_factory=dict)
    compared: List[str] = field(default_factory=list)
    data_checked: List[int] = field(default_factory=list)
    data_iteration: Optional[int] = None
    data_first: Optional[Tuple[str, Optional[str], Optional[str]]] = None

    @property
    def identical(self) -> bool:
        """Whether every common iteration is equal (False when none is common)."""
        return bool(self.common) and self.iteration is None

    def culprit(self) -> Optional[Tuple[str, str]]:
        """``(section, name)`` of the earliest difference in the iteration's causal order.

        A forward output precedes the gradients it produces, which precede the step
        that changes the weights: the first differing forward output is blamed, else
        the first gradient (in backward order: nearest the cause), else the weights,
        the buffers, the losses.
        """
        for section in _CAUSAL:
            if section in self.first:
                return section, self.first[section][0]
        return None


def _compare_section(a: Mapping[str, str], b: Mapping[str, str]) -> Tuple[
        Optional[Tuple[str, Optional[str], Optional[str]]], int, int]:
    names = list(a) + [n for n in b if n not in a]
    differing = [n for n in names if a.get(n) != b.get(n)]
    first = (differing[0], a.get(differing[0]), b.get(differing[0])) if differing else None
    return first, len(differing), len(names)


def comparable_sections(header_a: Mapping[str, Any],
                        header_b: Mapping[str, Any]) -> Tuple[Tuple[str, ...], Optional[str]]:
    """The sections of two traces that can be compared, and why the others cannot.

    Digests of different trace versions are computed differently (every one would
    differ), so such traces are compared on their loss values only.

    Returns:
        tuple: ``(sections, reason)``; ``reason`` is None when every section compares.
    """
    version_a, version_b = header_a.get('version'), header_b.get('version')
    if version_a == version_b:
        return ('losses', DATA, *SECTIONS), None
    return ('losses',), (f'trace versions differ ({version_a} vs {version_b}: written by '
                         'different mmrepro versions, whose digests are not comparable); '
                         'comparing loss values only')


def compare_traces(lines_a: Sequence[Mapping[str, Any]],
                   lines_b: Sequence[Mapping[str, Any]],
                   sections: Sequence[str] = ('losses', DATA, *SECTIONS)) -> TraceDiff:
    """Find the first common iteration where two traces differ, and where in it.

    Args:
        lines_a: Iteration lines of trace A (:func:`read_trace`).
        lines_b: Iteration lines of trace B.
        sections: The sections compared (e.g. only ``losses`` for traces whose
            digests are not comparable, see :func:`comparable_sections`).

    Returns:
        TraceDiff: Identical when every iteration present in both is equal.
    """
    by_iter_b = {line['iter']: line for line in lines_b}
    result = TraceDiff()
    for line_a in sorted(lines_a, key=lambda line: line['iter']):
        line_b = by_iter_b.get(line_a['iter'])
        if line_b is None:
            continue
        result.common.append(line_a['iter'])
        _compare_data(result, line_a, line_b, sections)
        if result.iteration is not None:
            continue
        for section in sections:
            if section not in line_a or section not in line_b:
                continue  # not recorded by both traces (forward outputs are optional)
            if section not in result.compared:
                result.compared.append(section)
            first, count, total = _compare_section(line_a[section], line_b[section])
            result.totals[section] = total
            if first is not None:
                result.first[section] = first
                result.counts[section] = count
        if result.first:
            result.iteration, result.epoch = line_a['iter'], line_a.get('epoch')
        else:
            result.totals = {}
    return result


def step_lines(lines: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """A trace's whole-step records (:mod:`.steps`) as trace lines keyed by step.

    Each has ``iter`` = the optimizer step, the step's samples as ``data``, every
    micro-batch's losses as ``losses``, the applied gradients as ``grad`` and the
    weights and buffers after the step; ``run_iter`` keeps the run's own iteration.
    """
    out = []
    for line in lines:
        if 'step' not in line:
            continue
        out.append(dict(iter=line['step'], run_iter=line['iter'], epoch=line.get('epoch'),
                        data=line.get('step_data', {}), losses=line.get('step_losses', {}),
                        grad=line.get('step_grad', {}), weight=line.get('weight', {}),
                        buffer=line.get('buffer', {})))
    return out


def compare_steps(lines_a: Sequence[Mapping[str, Any]],
                  lines_b: Sequence[Mapping[str, Any]]) -> TraceDiff:
    """:func:`compare_traces` over whole optimizer steps (:func:`step_lines`).

    Two runs of different layouts with the same global batch (ranks, per-rank batch,
    ``accumulative_counts``) compare here step by step: ``common`` and ``iteration``
    count optimizer steps.
    """
    return compare_traces(step_lines(lines_a), step_lines(lines_b),
                          ('losses', DATA, 'grad', 'weight', 'buffer'))


def _compare_data(result: TraceDiff, line_a: Mapping[str, Any], line_b: Mapping[str, Any],
                  sections: Sequence[str]) -> None:
    """Follow the data digests past the first difference, to the first data difference."""
    if DATA not in sections or DATA not in line_a or DATA not in line_b:
        return
    result.data_checked.append(line_a['iter'])
    if result.data_iteration is None:
        first = _compare_section(line_a[DATA], line_b[DATA])[0]
        if first is not None:
            result.data_iteration, result.data_first = line_a['iter'], first


def data_verdict(diff: TraceDiff, label_a: str = 'A', label_b: str = 'B') -> Optional[str]:
    """One line: were the runs given the same samples (None if no data was traced)?"""
    if not diff.data_checked:
        return None
    if diff.data_iteration is None:
        checked = diff.data_checked
        span = (f'iteration {checked[0]}' if len(checked) == 1 else
                f'every traced iteration ({checked[0]}..{checked[-1]}, {len(checked)})')
        return f'data: identical samples in {span}'
    slot, a, b = diff.data_first
    return (f'data: differ from iteration {diff.data_iteration}, sample {slot} of the batch: '
            f'{label_a} {a or "missing"} vs {label_b} {b or "missing"}')


def _loss_text(value: Optional[str]) -> str:
    if value is None:
        return 'missing'
    try:
        return f'{float.fromhex(value)!r} ({value})'
    except (TypeError, ValueError):
        return value


def _module_of(section: str, name: str, modules: Mapping[str, str]) -> str:
    """``name (Type)`` for a module, ``name (in Type)`` for a parameter or buffer."""
    base = name.split('#')[0]
    if section == 'forward':
        kind = modules.get(base)
        return f'{name} ({kind})' if kind else name
    owner = base.rsplit('.', 1)[0] if '.' in base else ROOT_NAME
    kind = modules.get(owner)
    return f'{name} (in {owner}: {kind})' if kind else name


def describe_diff(diff: TraceDiff, modules: Optional[Mapping[str, str]] = None,
                  label_a: str = 'A', label_b: str = 'B') -> List[str]:
    """Human-readable lines describing ``diff`` (see :func:`compare_traces`).

    Args:
        diff: The comparison.
        modules: Module name -> class name (the trace header's ``modules``).
        label_a: Name of the first run in the text.
        label_b: Name of the second run in the text.

    Returns:
        list[str]: Lines without trailing newlines.
    """
    modules = modules or {}
    if not diff.common:
        return ['no iteration was traced in both runs; nothing to compare']
    span = (f'iteration {diff.common[0]}' if len(diff.common) == 1 else
            f'iterations {diff.common[0]}..{diff.common[-1]} ({len(diff.common)} traced)')
    if diff.identical:
        kinds = [_SINGULARS[s] for s in diff.compared]
        kinds = ', '.join(kinds[:-1]) + ' and ' + kinds[-1] if len(kinds) > 1 else \
            ''.join(kinds) or 'recorded value'
        return [f'bit-identical over {span}: every {kinds}']
    epoch = f' (epoch {diff.epoch + 1})' if isinstance(diff.epoch, int) and diff.epoch else ''
    lines = [f'first diverging iteration: {diff.iteration}{epoch}, of {span}']
    culprit = diff.culprit()
    if culprit is not None:
        section, name = culprit
        where = (f'sample {name} of the batch' if section == DATA else
                 _module_of(section, name, modules))
        lines.append(f'  first difference: {SECTION_TITLES[section]} of {where}')
        if section == DATA or (section == 'forward'
                               and name.split('#')[0] == 'data_preprocessor'):
            lines.append('    the batch itself differs: data order, augmentation or loading')
    for section in ('losses', DATA, *SECTIONS):
        if section not in diff.first:
            continue
        name, a, b = diff.first[section]
        count, total = diff.counts[section], diff.totals[section]
        if section == 'losses':
            lines.append(f'  losses differ ({count} of {total}), first {name}: '
                         f'{label_a} {_loss_text(a)} vs {label_b} {_loss_text(b)}')
        elif section == DATA:
            lines.append(f'  {count} of {total} samples differ')
        else:
            order = ' (in backward order)' if section == 'grad' else ''
            lines.append(f'  {count} of {total} {_PLURALS[section]} differ; first'
                         f'{order}: {_module_of(section, name, modules)}')
    verdict = data_verdict(diff, label_a, label_b)
    if verdict is not None:
        lines.append(verdict)
    return lines


def loss_curve(lines: Sequence[Mapping[str, Any]], key: str = 'loss') -> List[Tuple[int, float]]:
    """``(iteration, loss)`` pairs from trace lines (non-finite values kept as nan)."""
    out = []
    for line in lines:
        value = line.get('losses', {}).get(key)
        try:
            out.append((line['iter'], float.fromhex(value)))
        except (TypeError, ValueError):
            out.append((line['iter'], math.nan))
    return out

