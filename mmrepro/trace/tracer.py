"""The hooks that collect a trace: :class:`Tracer`."""
from __future__ import annotations

import json
import os.path as osp
from functools import partial
from typing import Any, Dict, List, Mapping, Tuple

from torch import Tensor, nn
from torch.autograd import Variable

from ..determinism.compile import compiling, outside_graphs
from ..run.layout import step_and_slice
from ..run.state import find_state
from .batching import _Batch, _batch, _DigestCache, _Pending, _pending, _resolve, digest
from .digests import to_hex
from .fileformat import (
    FORWARD_SKETCH,
    ROOT_NAME,
    SECTIONS,
    TRACE_FORMAT,
    TRACE_NAME,
    TRACE_VERSION,
)
from .samples import DATA, global_slots, sample_digests
from .sketch import read_back, sketch_of
from .steps import POINTS, StepRecorder, traced_step


class Tracer:
    """Record losses and digests at the first optimizer steps and every ``interval`` steps.

    The traced steps are 1, 2, 4, ... below ``interval``, then every ``interval``
    (:func:`~mmrepro.trace.steps.traced_step`); every micro-batch of a traced step is
    traced, and the line of its last micro-batch also holds the step as a whole, the same
    for every layout with the same global batch (:mod:`~mmrepro.trace.steps`).

    Its hooks exist only during traced iterations: forward hooks (on every module, with
    ``forward``) and post-accumulate-grad hooks (on every trainable parameter) are added
    in :meth:`before_train_iter` and removed in :meth:`after_train_iter`. (Hooks kept
    from one traced iteration to the next would be called on every parameter of every
    untraced iteration: 81 calls of a few microseconds on the demo RetinaNet, the largest
    part of the trace's cost between traced steps.) Gradients are read once backward has
    accumulated them (before clipping, the step and the optimizer wrapper's
    ``zero_grad``): on a plain model all of them at the end of the backward pass (an
    autograd engine callback); in a model wrapper
    (``DistributedDataParallel``...) each in its hook, before the wrapper's
    all-reduce can write to it. A module called several times in one iteration gets
    one entry per call (``name``, ``name#1``...). Weights and buffers are digested
    after the step.

    The modules are those of the model when the tracer is made (the start of the
    run); their parameters and buffers are read at every traced iteration.

    Under MMEngine's ``compile`` the forward runs inside a compiled graph, where a
    forward hook would run traced (or split the graph, and change what the graph
    computes): the trace then adds none, and records no module outputs and no forward
    sketches (:attr:`forward` is False, :attr:`compiled` True). Its gradient hooks, its
    autograd-engine callback and its optimizer step pre-hook run between graphs; they are
    excluded from compilation (:func:`~mmrepro.determinism.compile.outside_graphs`), so
    they run eagerly and leave every graph as it was.

    On several processes, rank 0 writes ``trace.jsonl`` and rank ``r`` writes
    ``trace_rank{r}.jsonl``; gradients are those of the rank's own backward (before
    the all-reduce of ``DistributedDataParallel`` finishes). The per-sample data
    digests are gathered from every rank and listed by place in the global batch, so
    they compare with a run of the same global batch on another number of ranks.

    Args:
        runner: The MMEngine Runner (``runner.model``, ``runner.log_dir``).
        interval: Trace optimizer steps ``s`` (1-based) with ``s % interval == 0``, and
            the powers of two below it.
        filename: Trace file name in ``runner.log_dir``.
        forward: Also digest every module's forward output, to name the first module
            whose output differs (``tools/check_repro.py`` turns it on). Off by
            default: it reads every activation and adds a Python call per module call,
            which more than doubles the trace's cost (``benchmarks/results/trace_cpu.md``).
        sketches: Sketch the first steps' gradients and weights and the first
            iteration's module outputs, for the rounding envelope
            (:mod:`~mmrepro.trace.sketch`). On by default; a check that compares its own
            runs bit for bit turns it off.
    """

    def __init__(self, runner: Any, interval: int, filename: str = TRACE_NAME,
                 forward: bool = False, sketches: bool = True) -> None:
        from mmengine.dist import get_dist_info
        from mmengine.model import is_model_wrapper
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(f'Tracer(interval={interval!r}): expected an int >= 1.')
        if not isinstance(forward, bool):
            raise TypeError(f'Tracer(forward={forward!r}): expected True or False.')
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self.interval = interval
        #: Whether ``train_step`` runs compiled: no forward hooks (see the class).
        self.compiled = compiling(runner)
        self.forward = forward and not self.compiled
        self.model: nn.Module = model
        self._grads_in_hook = is_model_wrapper(runner.model)
        self._grad_refs: List[Tuple[str, Tensor]] = []
        self._grad_batches: List[_Batch] = []
        self._grads_queued = False
        self._grad_handles: List[Any] = []
        rank, world_size = get_dist_info()
        self._rank, self._world_size = rank, world_size
        state = find_state(runner)
        layout = state.layout if state is not None else None
        #: Micro-batches per optimizer step (``accumulative_counts``).
        self.accumulation = layout.accumulation if layout is not None else 1
        self.sketches = sketches
        self._steps = StepRecorder(model, getattr(runner, 'optim_wrapper', None), rank,
                                   world_size, sketches, compiled=self.compiled)
        if self.compiled:  # run eagerly wherever the compiled train_step calls them
            self._on_grad = outside_graphs(self._on_grad)  # type: ignore[method-assign]
            self._digest_grads = outside_graphs(  # type: ignore[method-assign]
                self._digest_grads)
        if rank:
            filename = f'{osp.splitext(filename)[0]}_rank{rank}.jsonl'
        self.path = osp.join(runner.log_dir, filename)
        named = list(model.named_modules())
        self._modules = [(name or ROOT_NAME, module) for name, module in named]
        # (prefix, module) pairs to list parameters and buffers without walking the tree
        self._prefixes = [(f'{name}.' if name else '', module) for name, module in named]
        self._handles: List[Any] = []
        self._forward: Dict[str, _Pending] = {}
        self._sketches: Dict[str, Tensor] = {}
        self._sketch_calls: Dict[str, int] = {}
        self._grad: Dict[str, _Pending] = {}
        self._calls: Dict[str, int] = {}
        self._data: Dict[str, str] = {}
        self._local: Dict[str, str] = {}
        self._cache = _DigestCache()
        self._active = False
        self._file = open(self.path, 'w')
        header = dict(format=TRACE_FORMAT, version=TRACE_VERSION, interval=interval,
                      points=POINTS, micro=self.accumulation,
                      global_batch=layout.global_batch if layout is not None else None,
                      rank=rank, world_size=world_size, forward=self.forward,
                      compiled=self.compiled,
                      modules={name: type(module).__name__ for name, module in self._modules})
        self._write(header)

    # ----------------------------------------------------------------- runner calls
    def traced(self, iteration: int) -> bool:
        """Whether the 0-based ``iteration`` is traced: every micro-batch of a traced
        optimizer step (:func:`~mmrepro.trace.steps.traced_step`)."""
        return traced_step(iteration // self.accumulation + 1, self.interval)

    def before_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None) -> None:
        """Digest the batch's samples and install the hooks when this iteration is traced."""
        if not self.traced(runner.iter) or self._file is None:
            return
        self._active = True
        self._steps.begin(runner.iter // self.accumulation + 1)
        self._local = sample_digests(data_batch)
        self._data = self._local
        if self._world_size > 1:  # every rank traces this iteration: list the global batch
            from mmengine.dist import all_gather_object
            place = step_and_slice(runner.iter, self._rank, self.accumulation)[1]
            self._data = global_slots(all_gather_object((place, self._data)))
        for name, module in self._modules if self.forward else ():
            self._handles.append(module.register_forward_hook(partial(self._on_forward, name)))
        first = runner.iter == 0 and not self._rank and self.sketches and not self.compiled
        for name, module in self._modules if first else ():
            self._handles.append(module.register_forward_hook(partial(self._on_sketch, name)))
        self._grad_handles = [
            param.register_post_accumulate_grad_hook(partial(self._on_grad, name))
            for name, param in self._named('_parameters') if param.requires_grad]

    def after_train_iter(self, runner: Any, batch_idx: int, outputs: Any = None) -> None:
        """Remove the hooks and write this iteration's line."""
        if not self._active:
            return
        self._remove_hooks()
        self._remove_grad_hooks()
        self._digest_grads()  # a backward that ended without running the callback
        state = [(('weight', name), tensor) for name, tensor in self._named('_parameters')] \
            + [(('buffer', name), tensor) for name, tensor in self._named('_buffers')]
        batches = self._grad_batches + [_batch([key for key, _ in state],
                                               [tensor for _, tensor in state])]
        line: Dict[str, Any] = dict(iter=runner.iter + 1, epoch=runner.epoch,
                                    batch_idx=batch_idx, losses=_losses(outputs))
        if self._data:
            line[DATA] = self._data
        if self._sketches:  # the run's first iteration (rank 0's micro-batch)
            line[FORWARD_SKETCH] = read_back(self._sketches)
            self._sketches, self._sketch_calls = {}, {}
        line.update({s: {} for s in (SECTIONS if self.forward else SECTIONS[1:])})
        step, place = step_and_slice(runner.iter, self._rank, self.accumulation)
        self._steps.add(place, self._local, line['losses'])
        if (runner.iter + 1) % self.accumulation == 0:  # the step's last micro-batch
            fields, grads = self._steps.finish(step + 1)
            line.update(fields, step_grad={})
            if grads is not None:
                batches.append(grads)
        pending = [(section, name, value)
                   for section, values in (('forward', self._forward), ('grad', self._grad))
                   for name, value in values.items()]
        values = _resolve([value for _, _, value in pending])
        for (section, name, _), value in zip(pending, values, strict=True):
            line[section][name] = to_hex(value)
        for keys, metas, bits in batches:
            for (section, name), meta, value in zip(keys, metas, bits.tolist(), strict=True):
                line[section][name] = to_hex(value + meta)
        self._write(line)
        self._forward, self._grad, self._calls, self._grad_batches = {}, {}, {}, []
        self._data = {}
        self._cache.clear()

    def close(self) -> None:
        """Remove any hooks and close the file."""
        self._remove_hooks()
        self._remove_grad_hooks()
        self._steps.close()
        if self._file is not None:
            self._file.close()
            self._file = None

    def _named(self, store: str) -> List[Tuple[str, Tensor]]:
        """``named_parameters()`` (``store='_parameters'``) or ``named_buffers()``.

        The same names, order and de-duplication, read from each module's own dict
        (what it holds now) without walking the module tree again.
        """
        seen = set()
        out = []
        for prefix, module in self._prefixes:
            for key, tensor in getattr(module, store).items():
                if tensor is not None and id(tensor) not in seen:
                    seen.add(id(tensor))
                    out.append((prefix + key, tensor))
        return out

    # ----------------------------------------------------------------------- hooks
    def _on_forward(self, name: str, module: nn.Module, args: Any, output: Any) -> None:
        pending = _pending(output, self._cache)
        if pending is not None:
            self._forward[_call_key(name, self._calls)] = pending

    def _on_sketch(self, name: str, module: nn.Module, args: Any, output: Any) -> None:
        self._sketches[_call_key(name, self._sketch_calls)] = sketch_of(output)

    def _on_grad(self, name: str, param: Tensor) -> None:
        grad = param.grad
        if grad is None or not self._active:
            return
        key = _call_key(name, self._calls, prefix='grad:')
        if self._grads_in_hook:
            self._grad[key] = _pending(grad)
            return
        self._grad_refs.append((key, grad))
        if not self._grads_queued:  # runs when this backward pass has finished
            self._grads_queued = True
            Variable._execution_engine.queue_callback(self._digest_grads)

    def _digest_grads(self) -> None:
        """Digest the gradients collected by :meth:`_on_grad`."""
        refs, self._grad_refs, self._grads_queued = self._grad_refs, [], False
        if refs:
            self._grad_batches.append(_batch([('grad', key) for key, _ in refs],
                                             [grad for _, grad in refs]))

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._active = False

    def _remove_grad_hooks(self) -> None:
        for handle in self._grad_handles:
            handle.remove()
        self._grad_handles = []

    def _write(self, obj: Dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, separators=(',', ':')) + '\n')
        self._file.flush()


def _call_key(name: str, calls: Dict[str, int], prefix: str = '') -> str:
    """``name`` for the first call in an iteration, ``name#k`` for the k-th repeat."""
    count = calls.get(prefix + name, 0)
    calls[prefix + name] = count + 1
    return name if count == 0 else f'{name}#{count}'


def _losses(outputs: Any) -> Dict[str, str]:
    """Every value of the train step's ``log_vars``, exactly (``float.hex``)."""
    out: Dict[str, str] = {}
    if not isinstance(outputs, Mapping):
        return out
    for name, value in outputs.items():
        if isinstance(value, Tensor) and value.numel() == 1:
            out[name] = float(value.detach().item()).hex()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value).hex()
        else:
            hashed = digest(value)
            out[name] = 'digest:' + to_hex(hashed) if hashed is not None else repr(value)
    return out

