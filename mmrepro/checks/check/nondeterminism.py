"""What a check reports as nondeterministic: PyTorch's alerts and mmcv's ops.

In deterministic mode a check's runs train with ``randomness.warn_only=True``, so
PyTorch names each operation without a deterministic implementation in the log instead
of stopping at the first; the model's mmcv ops that use atomics on CUDA are listed by
:func:`mmrepro.ops.op_audit.audit_model`.
"""
from __future__ import annotations

import re
import warnings
from typing import Any, Dict, List, Optional

from ..runs import IN_PROCESS_LOCK, deterministic

#: PyTorch's warning for an operation without a deterministic implementation.
ALERT = re.compile(r'([\w.:<>]+) does not have a deterministic implementation')


def pytorch_alerts(logs: Dict[str, str]) -> Dict[str, List[str]]:
    """Operations PyTorch warned about as nondeterministic -> the runs that hit them."""
    found: Dict[str, List[str]] = {}
    for name, path in logs.items():
        with open(path, errors='replace') as f:
            for op in ALERT.findall(f.read()):
                if name not in found.setdefault(op, []):
                    found[op].append(name)
    return found


def mmcv_op_audit(cfg: Any) -> Optional[List[Dict[str, str]]]:
    """:func:`mmrepro.ops.op_audit.audit_model` on the config's model (None if unavailable)."""
    try:
        from ...ops.op_audit import audit_model
    except ImportError:
        return None
    from mmengine.registry import MODELS, init_default_scope
    with IN_PROCESS_LOCK, warnings.catch_warnings():
        init_default_scope(cfg.get('default_scope', 'mmdet'))
        model = MODELS.build(cfg.model)
        warnings.simplefilter('ignore')
        return audit_model(model, deterministic=True, strict=False, replace=True)


def report_nondeterminism(cfg: Any, logs: Dict[str, str],
                          result: Optional[Dict[str, Any]] = None) -> List[str]:
    """The report's lines; ``result`` gets ``alerts`` and ``audit``.

    Args:
        cfg: The checked config.
        logs: Run name -> its training log.
        result: Filled with ``alerts`` (:func:`pytorch_alerts`) and ``audit``
            (:func:`mmcv_op_audit`'s entries, or an error string).
    """
    result = {} if result is None else result
    result.update(alerts={}, audit=None)
    if not deterministic(cfg):
        return ['nondeterministic operations: not reported (randomness.deterministic is '
                'False; pass --cfg-options randomness.deterministic=True to list them)']
    lines = ['nondeterministic operations (deterministic mode, warn_only=True):']
    alerts = result['alerts'] = pytorch_alerts(logs)
    if alerts:
        lines += [f'  PyTorch: {op} (in {", ".join(runs)})' for op, runs in alerts.items()]
    else:
        lines.append('  PyTorch: none reported')
    try:
        entries = result['audit'] = mmcv_op_audit(cfg)
    except Exception as err:  # the audit is informative; never fail the check on it
        result['audit'] = f'audit failed ({type(err).__name__}: {err})'
        lines.append(f"  mmcv ops: {result['audit']}")
        return lines
    if entries is None:
        lines.append('  mmcv ops: not audited (mmrepro.ops.op_audit is not available)')
    elif not entries:
        lines.append('  mmcv ops: none nondeterministic on CUDA in the model')
    for entry in entries or []:
        lines.append(f"  mmcv op: {entry['name']} ({entry['type']}: {entry['op']}), "
                     f"{entry['action']}: {entry['reason']}")
    return lines
