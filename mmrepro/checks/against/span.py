"""The runs ``mmrepro-check --against`` trains: the baseline's steps here, and the
rounding envelope's run (the same steps, every weight moved one ulp first)."""
from __future__ import annotations

import os.path as osp
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Tuple

from ...run.layout import Layout
from .. import runs
from ..runs import Run, progress, train

#: The child config of the rounding envelope's run.
ENVELOPE_CONFIG = 'check_against_envelope.py'


@dataclass
class Span:
    """What the check trains: the config, where, with which seed, which steps."""

    options: Any
    config: str
    work_dir: str
    cfg: Any
    cfg_options: List[str]
    seed: Any
    layout: Layout
    start: int
    stop: int


def train_span(span: Span, say: Callable[..., None], nudge: bool = False) -> Tuple[str, float]:
    """Write the child config and train it with the span's seed (the config's own, or
    the baseline's where the config has none); return its log dir and the wall time.

    With ``nudge``, the rounding envelope's run: the same steps with every weight moved
    one ulp before the first (:mod:`mmrepro.trace.nudge`)."""
    options, layout, start, stop = span.options, span.layout, span.start, span.stop
    child = osp.join(span.work_dir, ENVELOPE_CONFIG if nudge else 'check_against_config.py')
    what = (f'optimizer steps {start + 1}..{stop} from {options.resume_from}'
            if options.resume_from else f'optimizer steps 1..{stop}')
    with open(child, 'w') as f:
        f.write(child_config(span.cfg, span.config, options.baseline, what, span.seed,
                             stop * layout.accumulation, nudge))
    args = ['--resume', options.resume_from] if options.resume_from else []
    if nudge:
        say(f'rounding envelope: {what} again here, every weight moved one ulp up or down '
            'first', flush=True)
    else:
        per_step = layout.accumulation
        say(f'training {what} here ({stop - start} step(s) of {per_step} '
            f'micro-batch(es)): iterations {start * per_step + 1}..{stop * per_step}',
            flush=True)
    begin = time.perf_counter()
    log_dir = train(Run('envelope' if nudge else 'against', what, args=args), child,
                    span.work_dir, span.cfg_options, options.nproc,
                    on_iteration=progress(say, stop * layout.accumulation,
                                          start * layout.accumulation))
    seconds = time.perf_counter() - begin
    say(f'  done in {seconds:.1f} s')
    return log_dir, seconds


def child_config(cfg: Any, config: str, baseline: str, what: str, seed: Any,
                 stop_iter: int, nudge: bool = False) -> str:
    """The text of the check run's config: the user's, traced at every step, stopped
    (with ``nudge``: every weight moved one ulp first, the rounding envelope's run)."""
    hook = dict(trace_interval=1, nudge_weights=True) if nudge else dict(trace_interval=1)
    nudged = '; every weight moved one ulp first (the rounding envelope)' if nudge else ''
    return runs.child_config(cfg, config, f'check_repro --against {baseline}',
                             f'{what}; every optimizer step traced{nudged}, without '
                             'validation or checkpoints.', hook, stop_iter, 10**9,
                             dict(seed=seed))
