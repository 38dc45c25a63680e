"""Rounding or real: is a run that is not bitwise still a faithful reproduction?

Two runs of one config on other hardware (another CPU kernel set, thread count, GPU or
cuDNN) round differently, and training carries that noise further with every step.
Whether their distance is only that noise is measured, not guessed: the same steps are
trained here twice, once as they are and once with every weight moved one ulp before
the first step (:mod:`mmrepro.trace.nudge`). The distance of those two runs at each
traced step is the **rounding envelope**: how far pure rounding noise carries this
machine's training over those steps.

At each traced step both distances are taken over the same quantities
(:func:`step_distances`): the step's loss values, the applied gradients and the weights
after the step (L2 norms of the differences, estimated from the trace's sketches,
:mod:`mmrepro.trace.sketch`, and exactly 0 where the digests are equal). Their ratio
(:func:`ratios`) says how many envelopes apart the runs are. Runs whose gradients and
weights lie within the envelope (:data:`THRESHOLD`) at every step compared are
**equivalent within rounding**; beyond it at any step, they **differ beyond rounding**
from the first such step. The losses are shown, not judged: a loss is one float32
number, which rounding moves by whole ulps (its envelope is shown at least
:data:`LOSS_ULPS` ulps), and the gradients and weights it produces are measured
finely. A module whose forward output at the run's first iteration lies
:data:`FORWARD_THRESHOLD` envelopes away differs beyond rounding too: there both runs
start from the same weights and samples, so only the computation can differ, and a real
change to it (code, a loss weight) stands out before training carries any noise. The
first such module is named, else the module whose gradients (else weights) lie furthest
beyond.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..trace.fileformat import FORWARD_SKETCH, ROOT_NAME
from ..trace.sketch import distance, size

#: How many envelopes apart two runs may be and still be equivalent within rounding.
#: On the demo, another thread count or CPU kernel set measured at most 0.002x the
#: envelope over 8 steps, small real changes (an lr 0.1 % higher, a neck output scaled by
#: 1 + 1e-3) 29x to 66x (``benchmarks/results/envelope_cpu.md``).
THRESHOLD = 1.0
#: How many envelopes apart a module's forward output must be to be named as the first
#: differing module: single modules' outputs that cancel in their sums measured up to
#: 14x under a mere CPU kernel set change, the neck scaled by 1 + 1e-3 at 4e3x.
FORWARD_THRESHOLD = 100.0
#: The least loss envelope, in float32 ulps of each loss value.
LOSS_ULPS = 16
#: The quantities compared at each step, in the order they are shown.
METRICS = ('loss', 'grad', 'weight')


@dataclass
class StepDistance:
    """How far apart two runs are at one optimizer step.

    Attributes:
        step: The optimizer step (1-based).
        loss: L2 norm of the difference of the step's loss values.
        grad: Estimated L2 norm of the difference of the applied gradients.
        weight: Estimated L2 norm of the difference of the weights after the step.
        modules: Per module, the estimated L2 norm of its gradients' difference.
        weight_modules: Per module, that of its weights' difference.
        loss_floor: :data:`LOSS_ULPS` float32 ulps of the loss values (L2 over them).
    """

    step: int
    loss: float = 0.0
    grad: float = 0.0
    weight: float = 0.0
    modules: Dict[str, float] = field(default_factory=dict)
    weight_modules: Dict[str, float] = field(default_factory=dict)
    loss_floor: float = 0.0


@dataclass
class StepRatio:
    """Distance to the baseline over the envelope at one step, per quantity."""

    step: int
    loss: float
    grad: float
    weight: float

    @property
    def worst(self) -> float:
        """The larger of the gradients' and the weights' (the loss is evidence only)."""
        return max(self.grad, self.weight)


@dataclass
class Rounding:
    """The rounding-or-real verdict and its evidence.

    Attributes:
        equivalent: True within rounding, False beyond it, None too little to judge.
        text: The verdict, e.g. ``equivalent within rounding (distance 0.8x the envelope
            at step 8)``.
        table: The evidence: one line per compared step.
        rows: The ratios behind the table.
        envelope: The envelope's distances per step (for the plot's band).
    """

    equivalent: Optional[bool]
    text: str
    table: List[str] = field(default_factory=list)
    rows: List[StepRatio] = field(default_factory=list)
    envelope: Dict[int, StepDistance] = field(default_factory=dict)

    def passes(self, bitwise: bool) -> bool:
        """Whether the run passes: equivalent within rounding, unless ``bitwise``."""
        return bool(self.equivalent) and not bitwise

    def clause(self, bitwise: bool) -> str:
        """The verdict's rounding-or-real part, as ``mmrepro-check`` and ``mmrepro-diff``
        say it (``--bitwise`` named where it fails an equivalent run)."""
        if not self.equivalent:
            return self.text
        required = '; --bitwise requires bit for bit' if bitwise else ''
        return f'not bitwise, but {self.text}{required}'


def _values(losses: Mapping[str, str]) -> Dict[str, float]:
    out = {}
    for name, value in losses.items():
        try:
            out[name] = float.fromhex(value)
        except (TypeError, ValueError):
            continue  # a digest: not a number
    return out


def _owner(name: str) -> str:
    return name.rsplit('.', 1)[0] if '.' in name else ROOT_NAME


def _tensor_distances(digests_a: Mapping[str, str], digests_b: Mapping[str, str],
                      sketches_a: Mapping[str, Sequence[float]],
                      sketches_b: Mapping[str, Sequence[float]]) -> Dict[str, float]:
    """Per tensor: 0 where the digests are equal, else the sketches' distance."""
    out = {}
    for name, sketch_a in sketches_a.items():
        sketch_b = sketches_b.get(name)
        if sketch_b is None:
            continue
        same = name in digests_a and digests_a.get(name) == digests_b.get(name)
        out[name] = 0.0 if same else distance(sketch_a, sketch_b)
    return out


def _ulp32(value: float) -> float:
    """One float32 ulp at ``value``."""
    if not math.isfinite(value) or value == 0:
        return 0.0
    return 2.0 ** (math.frexp(abs(value))[1] - 24)


def _norm(values: Sequence[float]) -> float:
    return math.sqrt(sum(v * v for v in values))


def _by_module(distances: Mapping[str, float]) -> Dict[str, float]:
    """Per-parameter distances combined per module (its parameters' L2 norm)."""
    modules: Dict[str, float] = {}
    for name, value in distances.items():
        modules[_owner(name)] = math.hypot(modules.get(_owner(name), 0.0), value)
    return modules


def has_sketches(line: Mapping[str, Any]) -> bool:
    """Whether a trace line's whole-step record holds sketches (this release's)."""
    return 'step' in line and isinstance(line.get('sketch'), Mapping)


def step_distances(lines_a: Sequence[Mapping[str, Any]],
                   lines_b: Sequence[Mapping[str, Any]]) -> Dict[int, StepDistance]:
    """The distance of two traces at every optimizer step both traced with sketches."""
    by_step = {line['step']: line for line in lines_b if has_sketches(line)}
    out = {}
    for line_a in lines_a:
        line_b = by_step.get(line_a.get('step'))
        if line_b is None or not has_sketches(line_a):
            continue
        loss_a, loss_b = _values(line_a.get('step_losses', {})), _values(
            line_b.get('step_losses', {}))
        grads = _tensor_distances(line_a.get('step_grad', {}), line_b.get('step_grad', {}),
                                  line_a['sketch'].get('grad', {}),
                                  line_b['sketch'].get('grad', {}))
        weights = _tensor_distances(line_a.get('weight', {}), line_b.get('weight', {}),
                                    line_a['sketch'].get('weight', {}),
                                    line_b['sketch'].get('weight', {}))
        common = [k for k in loss_a if k in loss_b]
        out[line_a['step']] = StepDistance(
            line_a['step'], _norm([loss_a[k] - loss_b[k] for k in common]),
            _norm(list(grads.values())), _norm(list(weights.values())), _by_module(grads),
            _by_module(weights), _norm([LOSS_ULPS * _ulp32(loss_a[k]) for k in common]))
    return out


def ratio(value: float, envelope: float) -> float:
    """``value / envelope``: 0 where both are 0, infinite where only the envelope is."""
    if value == 0:
        return 0.0
    return value / envelope if envelope > 0 else math.inf


def ratios(base: Mapping[int, StepDistance],
           envelope: Mapping[int, StepDistance]) -> List[StepRatio]:
    """Distance over envelope at every step both hold, in step order."""
    out = []
    for step in sorted(base):
        if step not in envelope:
            continue
        env = envelope[step]
        out.append(StepRatio(step, ratio(base[step].loss, max(env.loss, env.loss_floor)),
                             ratio(base[step].grad, env.grad),
                             ratio(base[step].weight, env.weight)))
    return out


def forward_distances(line_a: Mapping[str, Any],
                      line_b: Mapping[str, Any]) -> List[Tuple[str, float]]:
    """Per module call, in the order the forward pass finished them (``line_a``'s), the
    distance of the forward outputs at the run's first iteration ([] where the two
    lines were not given the same samples, or hold no forward sketches)."""
    first_a, first_b = line_a.get(FORWARD_SKETCH), line_b.get(FORWARD_SKETCH)
    if not first_a or not first_b or line_a.get('data') != line_b.get('data'):
        return []
    return [(name, distance(value, first_b[name])) for name, value in first_a.items()
            if name in first_b]


def forward_envelope(line: Mapping[str, Any], nudged: Mapping[str, Any]) -> Dict[str, float]:
    """Per module call, the envelope of its forward output at the first iteration: the
    distance to the nudged run, at least :data:`LOSS_ULPS` float32 ulps of its size (a
    scalar output, a loss, moves by whole ulps)."""
    sizes = {name: size(value) for name, value in (line.get(FORWARD_SKETCH) or {}).items()}
    return {name: max(value, LOSS_ULPS * _ulp32(sizes.get(name, 0.0)))
            for name, value in forward_distances(line, nudged)}


def first_module(base: Sequence[Tuple[str, float]], envelope: Mapping[str, float],
                 threshold: float = FORWARD_THRESHOLD) -> Optional[Tuple[str, float]]:
    """The first module call whose forward output lies beyond ``threshold`` envelopes,
    with its ratio (None if none does)."""
    for name, value in base:
        times = ratio(value, envelope.get(name, 0.0))
        if times > threshold:
            return name, times
    return None


def times(value: float) -> str:
    """A ratio as the verdict shows it: ``0.8x``, ``29x``, ``4e3x``, ``infinitely``."""
    if math.isinf(value):
        return 'infinitely (the envelope is 0)'
    if value >= 999.5:  # shown as 1000 or more
        return f'{value:.0e}'.replace('e+0', 'e').replace('e+', 'e') + 'x'
    return f'{value:.0f}x' if value >= 10 else f'{value:.2g}x'


def _first_lines(lines: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The run's first iteration line (where the forward sketches are), or {}."""
    return next((line for line in lines if FORWARD_SKETCH in line), {})


def _module_text(name: str, modules: Mapping[str, str]) -> str:
    base = name.split('#')[0]
    kind = modules.get(base)
    return f'{base} ({kind})' if kind else base


def judge_rounding(base: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]],
                   here: Sequence[Mapping[str, Any]], nudged: Sequence[Mapping[str, Any]],
                   modules: Optional[Mapping[str, str]] = None) -> Rounding:
    """Is ``base`` vs ``other`` within the envelope ``here`` vs ``nudged``?

    Args:
        base: The baseline's (or run A's) trace lines.
        other: The trace lines of the run compared with it.
        here: The trace lines of the same steps trained on this machine (``other``
            itself for ``mmrepro-check --against``).
        nudged: The trace lines of those steps trained here again with every weight
            moved one ulp (:mod:`mmrepro.trace.nudge`).
        modules: Module name -> class name (a trace header's ``modules``).
    """
    modules = modules or {}
    distances, envelope = step_distances(base, other), step_distances(here, nudged)
    if not distances:
        why = ('their traces hold no sketches (written by an earlier mmrepro release)'
               if not any(has_sketches(line) for line in base) else
               'no step was traced with sketches in both runs')
        return Rounding(None, f'too little to judge rounding or real: {why}')
    rows = ratios(distances, envelope)
    if not rows:
        return Rounding(None, 'too little to judge rounding or real: the envelope run '
                        'traced none of the compared steps')
    if all(getattr(envelope[r.step], m) == 0 for r in rows for m in METRICS):
        return Rounding(None, 'too little to judge rounding or real: the envelope run '
                        'did not differ from this run (the model has no floating weights)')
    table = ['  step  ' + ''.join(f'{m:>12}' for m in ('loss', 'gradients', 'weights'))]
    table += [f'  {r.step:>4}  ' + ''.join(f'{times(getattr(r, m)):>12}' for m in METRICS)
              for r in rows]
    forward = forward_distances(_first_lines(base), _first_lines(other))
    forward_env = forward_envelope(_first_lines(here), _first_lines(nudged))
    table += _forward_line(forward, forward_env, modules)
    named = first_module(forward, forward_env)
    beyond = next((r for r in rows if r.worst > THRESHOLD), None)
    if beyond is None and named is None:
        worst = max(rows, key=lambda r: r.worst)
        return Rounding(True, f'equivalent within rounding (distance {times(worst.worst)} '
                        f'the envelope at step {worst.step})', table, rows, envelope)
    if named is not None:  # the computation itself differs, before any step
        return Rounding(False, f'differs beyond rounding from step 1 (distance '
                        f'{times(named[1])} the envelope), first module '
                        f'{_module_text(named[0], modules)}: its forward output at the first '
                        'iteration', table, rows, envelope)
    where = _furthest(distances[beyond.step], envelope[beyond.step], modules)
    return Rounding(False, f'differs beyond rounding from step {beyond.step} (distance '
                    f'{times(beyond.worst)} the envelope), {where}', table, rows, envelope)


def _forward_line(forward: Sequence[Tuple[str, float]], envelope: Mapping[str, float],
                  modules: Mapping[str, str]) -> List[str]:
    """The evidence of the first iteration's forward outputs (none: no line)."""
    spread = [(name, ratio(value, envelope.get(name, 0.0))) for name, value in forward]
    if not spread:
        return []
    name, worst = max(spread, key=lambda item: item[1])
    if worst == 0:
        return ['  first iteration, forward outputs: all equal (the same computation)']
    return [f'  first iteration, forward outputs: at most {times(worst)} the envelope '
            f'({_module_text(name, modules)}; beyond {FORWARD_THRESHOLD:.0f}x the '
            'computation differs)']


def _furthest(base: StepDistance, envelope: StepDistance, modules: Mapping[str, str]) -> str:
    """The module whose gradients (else weights) lie furthest beyond the envelope."""
    for kind, attr in (('gradient', 'modules'), ('weight', 'weight_modules')):
        env = getattr(envelope, attr)
        spread = {m: ratio(v, env.get(m, 0.0)) for m, v in getattr(base, attr).items()}
        top = max(spread, key=spread.get) if spread else None
        if top is not None and spread[top] > 0:
            return (f'largest {kind} difference in {_module_text(top, modules)} '
                    f'({times(spread[top])} the envelope)')
    return 'no module named'


def say_rounding(rounding: Rounding, say: Callable[..., None],
                 apart: str = 'to the baseline') -> None:
    """The envelope's evidence: the runs' distance over the envelope, per step."""
    if rounding.table:
        say(f'distance {apart} / the rounding envelope, per traced step (equivalent within '
            'rounding up to 1x):')
        for line in rounding.table:
            say(line)
