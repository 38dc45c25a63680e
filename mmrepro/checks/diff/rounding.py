"""``mmrepro-diff``'s rounding-or-real verdict on two runs that are not bitwise.

Where two runs' traces differ at a step both traced with sketches, and neither the data
nor the initial weights explain it, the rounding envelope is measured on this machine:
run A's config (its config dump) is trained here through the first traced steps, once
as it is and once with every weight moved one ulp (``mmrepro-check --against A``'s two
runs, :mod:`..against.run`), and A vs B is judged against them
(:func:`~mmrepro.checks.envelope.judge_rounding`) over the steps up to
:data:`ENVELOPE_STEPS`. Where that cannot be done it says why, in one line.
"""
from __future__ import annotations

import contextlib
import io
import os.path as osp
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...trace import TRACE_NAME, read_trace
from ..against.run import AgainstOptions, run_against
from ..envelope import METRICS, Rounding, has_sketches, judge_rounding
from ..run_data import RunData
from ..runs import DEFAULT_ITERS

#: The optimizer steps the envelope covers (the first traced ones: 1, 2, 4 and 8).
ENVELOPE_STEPS = DEFAULT_ITERS


def _steps(lines: Sequence[Mapping[str, Any]]) -> List[int]:
    return [line['step'] for line in lines if has_sketches(line)]


def judgeable(a: RunData, b: RunData) -> Tuple[Optional[int], str]:
    """``(last step to judge, '')``, or ``(None, why not)``."""
    if a.trace is None or b.trace is None:
        return None, 'a run has no trace'
    common = sorted(set(_steps(a.trace[1])) & set(_steps(b.trace[1])))
    if not common:
        return None, ('the traces hold no step sketches in common (traced by an earlier '
                      'mmrepro release, or at no common step)')
    early = [step for step in common if step <= ENVELOPE_STEPS]
    if not early:
        return None, (f'the first step both traced is {common[0]}, after the '
                      f'{ENVELOPE_STEPS} steps the envelope covers; mmrepro-check --against '
                      'A --from CHECKPOINT judges from a checkpoint')
    return early[-1], ''


def diff_rounding(a: RunData, b: RunData, say: Any = print) -> Rounding:
    """Measure the envelope here (two short runs of A's config) and judge A vs B.

    Args:
        a: Run A (its config dump is trained).
        b: Run B.
        say: Where the progress lines go.
    """
    stop, why = judgeable(a, b)
    if stop is None:
        return Rounding(None, f'too little to judge rounding or real: {why}')
    begin = time.perf_counter()
    say(f"rounding envelope: A's config trained here through step {stop}, twice (as it is, "
        'and with every weight moved one ulp)', flush=True)
    with tempfile.TemporaryDirectory(prefix='mmrepro-envelope-') as tmp:
        options = AgainstOptions(config=None, baseline=a.path, steps=stop, go_on=True,
                                 work_dir=osp.join(tmp, 'check'), envelope=True)
        quiet: List[str] = []
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                result = run_against(options, say=lambda *args, **_: quiet.append(
                    ' '.join(map(str, args))))
        except (ValueError, RuntimeError, OSError) as err:
            return Rounding(None, f"too little to judge rounding or real: A's config could "
                            f'not be trained here ({err})')
        if result.nudged_dir is None:
            return Rounding(None, 'too little to judge rounding or real: '
                            + result.verdict.split(';')[0])
        here = read_trace(osp.join(result.log_dir, TRACE_NAME))[1]
        nudged = read_trace(osp.join(result.nudged_dir, TRACE_NAME))[1]
    say(f'  done in {time.perf_counter() - begin:.1f} s')
    wanted = [line for line in a.trace[1] if line.get('iter') == 1
              or line.get('step', stop + 1) <= stop]
    return judge_rounding(wanted, b.trace[1], here, nudged, a.trace[0].get('modules'))


def envelope_band(a: RunData, rounding: Optional[Rounding]) -> Tuple[
        List[Tuple[int, float]], Dict[str, List[Tuple[int, float]]]]:
    """For the plot, at A's traced steps: ``(iteration, the envelope's loss distance)``,
    and per quantity ``(iteration, distance over the envelope)``."""
    if rounding is None or not rounding.envelope or a.trace is None:
        return [], {}
    iters = {line['step']: line['iter'] for line in a.trace[1] if 'step' in line}
    band = [(iters[step], max(env.loss, env.loss_floor))
            for step, env in sorted(rounding.envelope.items()) if step in iters]
    ratios = {name: [(iters[row.step], getattr(row, name)) for row in rounding.rows
                     if row.step in iters] for name in METRICS}
    return band, ratios
