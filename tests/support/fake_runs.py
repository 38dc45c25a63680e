"""Hand-made work dirs for ``repro_diff``: a run record, a scalars log, optionally a trace.

The files are those a training run writes, in the same formats, with only the keys the
comparison reads; ``repro_diff`` reads them as it reads a real run's.
"""
import json
from typing import Any, Dict, Optional, Sequence


def record(seed: int = 0, final: Optional[int] = None, weights: str = 'a' * 64,
           **config: str) -> Dict[str, Any]:
    """A run record: ``seed``, ``config`` keys (``repr`` texts, as flattened configs hold
    them) and, with ``final``, the final weights' digest at that iteration."""
    out: Dict[str, Any] = dict(
        seed=seed, randomness=dict(seed=seed, deterministic=True), world_size=1,
        versions=dict(torch='2.13.0'), config_sha256=str(seed) * 64,
        env=dict(PYTHONHASHSEED=str(seed)),
        config={'randomness.seed': repr(seed), 'optim_wrapper.optimizer.lr': '0.01',
                **config})
    if final is not None:
        out['weights'] = dict(final=dict(iter=final, sha256=weights),
                              checkpoints={str(final): weights})
    return out


def fake_run(root, losses: Sequence[float], run_record: Any = None,
             trace: Optional[str] = None) -> str:
    """Write a work dir under ``root`` (a ``pathlib.Path``) with one log dir; return it.

    Args:
        root: The work dir to create.
        losses: The logged loss of iterations 1, 2, ...
        run_record: The record (a dict, or the file's text); :func:`record` by default.
        trace: The trace file's text, if any.
    """
    log_dir = root / '20260101_000000'
    (log_dir / 'vis_data').mkdir(parents=True)
    text = run_record if isinstance(run_record, str) else json.dumps(
        run_record if run_record is not None else record())
    (log_dir / 'run_record.json').write_text(text)
    rows = [dict(lr=0.01, loss=loss, loss_cls=loss / 2, iter=i + 1, step=i + 1)
            for i, loss in enumerate(losses)]
    (log_dir / 'vis_data' / 'scalars.json').write_text(
        ''.join(json.dumps(r) + '\n' for r in rows))
    if trace is not None:
        (log_dir / 'trace.jsonl').write_text(trace)
    return str(root)
