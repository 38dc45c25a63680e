"""The training trace: exact, cheap digests of losses, activations, gradients and weights.

Every N iterations :class:`Tracer` writes one JSON line to ``<log_dir>/trace.jsonl``
with the iteration, every loss value (``float.hex``, so exact), one digest per sample
of the batch (its input and data sample), and one digest per module forward output
(in the order the forward pass finishes them), per parameter
gradient (in the order backward produces them), per parameter after the optimizer
step and per buffer. Two runs are bit-identical where their traces are equal;
:func:`compare_traces` finds the first iteration and the first module or parameter
where they are not.

The package, one concern per module:

- :mod:`.digests`: the 64-bit digest of a tensor's bits (:func:`tensor_digest`);
- :mod:`.batching`: digests of nested outputs, many tensors per device transfer;
- :mod:`.tracer`: :class:`Tracer`, the hooks that collect a trace;
- :mod:`.samples`: per-sample digests of the batch (what the model was given);
- :mod:`.fileformat`: the ``trace.jsonl`` format (:func:`read_trace`);
- :mod:`.compare`: comparing and describing two traces.
"""
from .compare import (
    TraceDiff,
    comparable_sections,
    compare_traces,
    data_verdict,
    describe_diff,
    loss_curve,
)
from .digests import tensor_digest, to_hex
from .fileformat import SECTIONS, TRACE_NAME, TRACE_VERSION, TraceError, read_trace
from .tracer import Tracer

__all__ = [
    'SECTIONS', 'TRACE_NAME', 'TRACE_VERSION', 'TraceDiff', 'TraceError', 'Tracer',
    'comparable_sections', 'compare_traces', 'data_verdict', 'describe_diff', 'loss_curve',
    'read_trace', 'tensor_digest', 'to_hex',
]
