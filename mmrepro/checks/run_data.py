"""One run as ``mmrepro-diff`` reads it: record, trace, logged losses and weights.

A run is given as a work dir (every log dir of a run stopped and resumed is joined), a
log dir, a ``run_record.json``, a checkpoint file, or a baseline bundle
(:mod:`mmrepro.record.bundle`); a test run (``mmrepro-test``) as its
``test_record.json``, its log dir, or a work dir holding only test runs.
"""
from __future__ import annotations

import atexit
import glob
import json
import os.path as osp
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..record.bundle import is_bundle, manifest_digests, unpack
from ..record.run_record import (
    RECORD_NAME,
    REQUIRED_KEYS,
    TEST_RECORD_NAME,
    RunRecordError,
    find_log_dir,
    load_run_record,
)
from ..record.weights_index import WeightsReadError, read_checkpoint
from ..trace import TRACE_NAME, read_trace
from .evaluations import Point, read_evaluations
from .evidence import Evidence

SCALARS = osp.join('vis_data', 'scalars.json')
CHECKPOINT_SUFFIXES = ('.pth', '.pt', '.ckpt')


@dataclass
class RunData:
    """What could be read of one run.

    Attributes:
        label: ``A`` or ``B``.
        path: The path given on the command line.
        record: The run record (None for a checkpoint written without one).
        source: The file the record was read from.
        log_dir: The log dir (None for a checkpoint).
        trace: ``(header, lines)`` of its trace, if any.
        scalars: Its logged training rows (with a ``loss``), if any.
        stitched: ``(log dir, first iteration, last iteration)`` of each log dir whose
            rows were joined (a work dir trained, stopped and resumed), else empty.
        evidence: What it can be compared on (:class:`Evidence`).
        evaluations: Its evaluations by kind and iteration
            (:func:`~mmrepro.checks.evaluations.read_evaluations`).
        kind: ``train``, or ``test`` for a run that only evaluated (``mmrepro-test``).
    """

    label: str
    path: str
    record: Optional[Dict[str, Any]]
    source: str
    log_dir: Optional[str] = None
    trace: Optional[Tuple[Dict[str, Any], List[Dict[str, Any]]]] = None
    scalars: List[Dict[str, Any]] = field(default_factory=list)
    stitched: List[Tuple[str, int, int]] = field(default_factory=list)
    evidence: Evidence = field(default_factory=lambda: Evidence('?'))
    evaluations: Dict[Point, Dict[str, Any]] = field(default_factory=dict)
    kind: str = 'train'


def read_scalars(path: str) -> List[Dict[str, Any]]:
    """The training rows (those with ``loss`` and ``iter``) of a ``scalars.json`` log.

    Raises:
        RunRecordError: A line other than a cut-short last one is not JSON.
    """
    rows: List[Dict[str, Any]] = []
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            if number >= len(lines) - 1:  # the last line, cut short by a crash
                break
            raise RunRecordError(f'{path}: line {number} is not valid JSON ({err.msg}); '
                                 'the scalars log is corrupted') from None
        if isinstance(row, dict) and 'loss' in row and isinstance(row.get('iter'), int):
            rows.append(row)
    return rows


def load_checkpoint_run(label: str, path: str) -> RunData:
    """A checkpoint file as a run: its weights, and its ``meta['run_record']`` if any.

    Raises:
        RunRecordError: The checkpoint cannot be read, or its record is incomplete.
    """
    try:
        checkpoint, iteration = read_checkpoint(path)
    except WeightsReadError as err:
        raise RunRecordError(str(err)) from None
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    record = meta.get('run_record') if isinstance(meta, dict) else None
    if record is not None and not (isinstance(record, dict)
                                   and all(k in record for k in REQUIRED_KEYS)):
        raise RunRecordError(f"{path}: meta['run_record'] is not a complete run record")
    at = iteration if iteration is not None else 0
    run = RunData(label, path, record, path)
    run.evaluations = read_evaluations([(record, None)]) if record else {}
    run.evidence = Evidence(label, checkpoint=at)
    run.evidence.weights.add_file(at, path, checkpoint)
    return run


def load_bundle_run(label: str, path: str) -> RunData:
    """A baseline bundle (``mmrepro-bundle``) as a run: unpacked into a temporary work dir
    (removed at exit), with the checkpoint digests its manifest lists.

    Raises:
        BundleError: Not a readable bundle.
    """
    into = tempfile.mkdtemp(prefix='mmrepro-bundle-')
    atexit.register(shutil.rmtree, into, True)
    manifest = unpack(path, into)
    run = load_run(label, into)
    run.path = path
    run.source = f'{path} (bundle: {osp.relpath(run.source, into)})'
    for iteration, digest in manifest_digests(manifest).items():
        run.evidence.weights.recorded.setdefault(iteration, digest)
    return run


def load_run(label: str, path: str) -> RunData:
    """Read the record, trace, scalars log and weights of one run.

    Given a work dir with several log dirs (a run stopped and resumed, each start
    writing its own ``<timestamp>/``), the traces and scalars logs of all of them are
    joined in iteration order, a later log dir's row replacing an earlier one's for the
    same iteration; the record is the newest one. The weights are those recorded in
    every log dir's record and those of the checkpoints in the work dir.

    Raises:
        RunRecordError: The record (or the scalars log) is missing or corrupted.
        TraceError: The trace exists but is corrupted.
    """
    if path.endswith(CHECKPOINT_SUFFIXES) and not osp.isdir(path):
        return load_checkpoint_run(label, path)
    if is_bundle(path):
        return load_bundle_run(label, path)
    if is_test_run(path):
        return load_test_run(label, path)
    record, source = load_run_record(path)
    run = RunData(label, path, record, source)
    run.log_dir = osp.dirname(source)
    log_dirs = [run.log_dir]
    work_dir = osp.dirname(run.log_dir) or '.'
    if osp.samefile(work_dir, path):
        log_dirs = sorted(osp.dirname(p) for p in glob.glob(
            osp.join(glob.escape(path), '*', RECORD_NAME)))
    traces = {d: read_trace(osp.join(d, TRACE_NAME)) for d in log_dirs
              if osp.isfile(osp.join(d, TRACE_NAME))}
    scalars = {d: read_scalars(osp.join(d, SCALARS)) for d in log_dirs
               if osp.isfile(osp.join(d, SCALARS))}
    if traces:
        header = traces[log_dirs[-1]][0] if log_dirs[-1] in traces else \
            list(traces.values())[-1][0]
        run.trace = (header, _join_by_iteration(
            [lines for head, lines in traces.values()
             if head.get('version') == header.get('version')]))
    run.scalars = _join_by_iteration(list(scalars.values()))
    if len(log_dirs) > 1:
        for log_dir in log_dirs:  # each dir's iterations: from its trace, else its log
            rows = traces[log_dir][1] if log_dir in traces else scalars.get(log_dir, [])
            if rows:
                run.stitched.append((osp.basename(log_dir), rows[0]['iter'],
                                     rows[-1]['iter']))
    run.evidence = Evidence(label, run.scalars, run.trace[1] if run.trace else None)
    records = [load_run_record(d)[0] for d in log_dirs[:-1]] + [record]
    run.evidence.weights.add_records(records)
    run.evidence.weights.add_work_dir(work_dir)
    run.evaluations = read_evaluations(list(zip(records, log_dirs, strict=True)))
    return run


def is_test_run(path: str) -> bool:
    """Whether ``path`` names a run that only evaluated: its ``test_record.json``, its log
    dir, or a work dir with test log dirs and no training one."""
    if osp.isfile(path):
        return osp.basename(path) == TEST_RECORD_NAME
    if not osp.isdir(path) or osp.isfile(osp.join(path, RECORD_NAME)):
        return False
    if osp.isfile(osp.join(path, TEST_RECORD_NAME)):
        return True
    pattern = osp.join(glob.escape(path), '*', '{}')
    return bool(glob.glob(pattern.format(TEST_RECORD_NAME))) and not glob.glob(
        pattern.format(RECORD_NAME))


def load_test_run(label: str, path: str) -> RunData:
    """A run that only evaluated (``mmrepro-test``): its test record and per-image
    digests (a work dir gives its newest test log dir).

    Raises:
        RunRecordError: The record is missing or corrupted.
    """
    source = path if osp.isfile(path) else osp.join(find_log_dir(path, TEST_RECORD_NAME),
                                                    TEST_RECORD_NAME)
    record, source = load_run_record(source)
    run = RunData(label, path, record, source, kind='test')
    run.log_dir = osp.dirname(source)
    run.evaluations = read_evaluations([(record, run.log_dir)])
    return run


def _join_by_iteration(parts: Sequence[Sequence[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Rows of every part by ``iter``; a later part's row wins for the same iteration."""
    joined: Dict[int, Dict[str, Any]] = {}
    for rows in parts:
        joined.update((row['iter'], row) for row in rows)
    return [joined[i] for i in sorted(joined)]


