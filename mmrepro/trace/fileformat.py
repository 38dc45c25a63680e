"""The trace file: ``trace.jsonl``, a header line then one line per traced iteration."""
from __future__ import annotations

import json
import os.path as osp
from typing import Any, Dict, List, Tuple

#: File name of the trace inside the run's log dir.
TRACE_NAME = 'trace.jsonl'
#: ``format`` field of the trace's header line.
TRACE_FORMAT = 'mmrepro-trace'
TRACE_VERSION = 2  # 2: 256-word rows (version 1 digests used 65536)
#: Name under which the model itself (the root module) appears in the trace.
ROOT_NAME = '(model)'
#: Sections of a trace line holding digests, in the order a difference is blamed.
SECTIONS = ('forward', 'grad', 'weight', 'buffer')
#: Section of per-sample digests of the batch (:mod:`.samples`): before every other.
DATA = 'data'
#: Key of the run's first iteration line holding a sketch of every module's forward
#: output (:mod:`.sketch`), in the order the forward pass finished them (rank 0).
FORWARD_SKETCH = 'forward_sketch'


class TraceError(ValueError):
    """A trace file is missing, unreadable or not a trace."""


def read_trace(path: str) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Read a trace file: its header and its iteration lines.

    A last line cut short (the run was killed while writing) is dropped, and the
    header then has ``truncated: True``.

    Args:
        path: The ``trace.jsonl`` file.

    Returns:
        tuple: ``(header, lines)``.

    Raises:
        TraceError: The file is missing, empty, has no valid header or a corrupted
            line other than the last one (the message names the file and the line).
    """
    if not osp.isfile(path):
        raise TraceError(f'{path}: no such trace file')
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    rows = text.split('\n')
    complete = text.endswith('\n')
    if complete:
        rows = rows[:-1]
    if not rows or not rows[0].strip():
        raise TraceError(f'{path}: empty file, not an mmrepro trace')
    header: Dict[str, Any] = {}
    lines: List[Dict[str, Any]] = []
    for number, row in enumerate(rows, 1):
        try:
            obj = json.loads(row)
        except json.JSONDecodeError as err:
            if number == len(rows) and not complete and number > 1:
                header['truncated'] = True
                break
            raise TraceError(f'{path}: line {number} is not valid JSON ({err.msg} at '
                             f'column {err.colno}); the trace is corrupted') from None
        if number == 1:
            if not isinstance(obj, dict) or obj.get('format') != TRACE_FORMAT:
                raise TraceError(f'{path}: line 1 is not an mmrepro trace header '
                                 f"(expected format={TRACE_FORMAT!r})")
            header.update(obj)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get('iter'), int) or \
                not all(isinstance(obj.get(s, {}), dict) for s in (*SECTIONS, 'losses', DATA)):
            raise TraceError(f'{path}: line {number} is not a trace record (expected an '
                             'object with "iter", "losses", ' +
                             ', '.join(f'"{s}"' for s in SECTIONS) + ')')
        lines.append(obj)
    return header, lines

