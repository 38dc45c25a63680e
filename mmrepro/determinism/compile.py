"""``torch.compile`` under mmrepro: MMEngine's ``compile`` setting, what mmrepro sets or
refuses for it, what the run record keeps of it, and how mmrepro's hooks stay out of it.

MMEngine 0.10 reads ``compile=True`` or ``compile=dict(backend=..., mode=...,
dynamic=..., fullgraph=..., options=...)`` from the config and wraps the model's
``train_step`` in ``torch.compile`` (``Runner._maybe_compile``, from ``train()``): the
data preprocessor, the forward, the loss, the backward and the optimizer update all run
under it. Dynamo evaluates every Python frame that runs while the compiled function
runs, hooks that the autograd engine or the optimizer calls included, and traces them
into graphs of their own.

- :func:`compile_options`: the setting, normalised (None: the run is eager).
- :func:`requirements`: what mmrepro sets for inductor, each with its reason in one
  line, and what it refuses (:func:`apply_settings` sets them before MMEngine compiles).
- :func:`compile_record`: the run record's ``compile`` section: the settings, and the
  inductor and dynamo settings in force that change numerics or randomness.
- :func:`outside_graphs`: a hook of mmrepro's that runs while ``train_step`` runs (the
  trace's gradient hooks, its autograd-engine callback, its optimizer step pre-hook)
  is excluded from compilation, so it runs eagerly and never inside a graph. These run
  between graphs (the backward and the optimizer's hooks), so excluding them splits no
  graph of the model. Module forward hooks would run inside the forward's graph: under
  ``compile`` the trace adds none (:class:`mmrepro.trace.Tracer`).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

import torch

__all__ = ['INDUCTOR_KEYS', 'DYNAMO_KEYS', 'Requirements', 'apply_settings', 'backend_name',
           'check_compile', 'compile_options', 'compile_record', 'compiling', 'outside_graphs',
           'requirements']

#: Inductor settings that change numerics or randomness, recorded where torch has them
#: (dotted: ``triton.cudagraphs`` is ``torch._inductor.config.triton.cudagraphs``).
INDUCTOR_KEYS = ('fallback_random', 'deterministic', 'max_autotune', 'max_autotune_pointwise',
                 'max_autotune_gemm', 'coordinate_descent_tuning', 'triton.cudagraphs',
                 'emulate_precision_casts', 'reorder_for_peak_memory', 'split_reductions',
                 'freezing', 'cpp.simdlen', 'align_random_eager', 'batch_invariant')
#: Dynamo settings that decide which code computes a batch: past the recompile limit a
#: frame runs eagerly; automatic dynamic shapes compile a second shape symbolically.
DYNAMO_KEYS = ('cache_size_limit', 'recompile_limit', 'automatic_dynamic_shapes',
               'assume_static_by_default', 'optimize_ddp', 'compiled_autograd')
#: The settings mmrepro sets for inductor, each with its reason (one line).
SETS: Tuple[Tuple[str, Any, str], ...] = (
    ('fallback_random', True,
     "the model's random numbers are eager's, drawn from the generators mmrepro keys per "
     'step: the same compiled or not, however inductor groups them into kernels'),
    ('deterministic', True,
     'no kernel is chosen by timing it: timings differ from process to process, and so '
     'would the chosen kernels and their rounding'),
)
#: The ``mode`` values that use CUDA graphs, and those that pick kernels by timing.
CUDA_GRAPH_MODES = ('reduce-overhead',)
AUTOTUNE_MODES = ('max-autotune', 'max-autotune-no-cudagraphs')
#: Inductor options that pick kernels by timing them.
AUTOTUNE_OPTIONS = ('max_autotune', 'max_autotune_pointwise', 'max_autotune_gemm',
                    'coordinate_descent_tuning')


def compile_options(value: Any) -> Optional[Dict[str, Any]]:
    """MMEngine's ``compile`` setting as ``torch.compile``'s keyword arguments.

    Args:
        value: The config's ``compile``: None or False (eager), True (``torch.compile``'s
            defaults) or a dict of its arguments.

    Returns:
        None where the run is eager, else the arguments (a new dict).

    Raises:
        TypeError: another value (MMEngine would assert the same).
    """
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f'compile={value!r}: expected True, False or a dict of torch.compile '
                    "arguments, e.g. compile=dict(backend='inductor', mode='default')")


def compiling(runner: Any) -> bool:
    """Whether ``runner``'s ``train()`` compiles ``train_step`` (its config's ``compile``)."""
    cfg = getattr(runner, 'cfg', None)
    return cfg is not None and compile_options(cfg.get('compile')) is not None


def backend_name(options: Mapping[str, Any]) -> str:
    """The backend's name (``torch.compile``'s default is ``inductor``); a callable
    backend by its qualified name."""
    backend = options.get('backend', 'inductor')
    if isinstance(backend, str):
        return backend
    return f"{getattr(backend, '__module__', '?')}.{getattr(backend, '__qualname__', backend)}"


def _inductor_config() -> Any:
    import torch._inductor.config as config
    return config


def _read(config: Any, key: str) -> Tuple[bool, Any]:
    """``(present, value)`` of a dotted config ``key``."""
    node = config
    for part in key.split('.'):
        if not hasattr(node, part):
            return False, None
        node = getattr(node, part)
    return True, node


class Requirements(NamedTuple):
    """What mmrepro sets for a compiled run, and why it refuses one.

    Attributes:
        sets: ``(inductor key, value, reason)`` for every setting mmrepro sets.
        refusal: Why the run cannot train exactly as configured (one line; empty: it can).
    """

    sets: List[Tuple[str, Any, str]]
    refusal: str


def requirements(options: Mapping[str, Any], deterministic: bool,
                 on_cuda: bool) -> Requirements:
    """What inductor needs for exact numbers under these ``torch.compile`` arguments.

    Nothing for another backend (``aot_eager`` runs eager's kernels). For inductor:
    :data:`SETS` where this torch has them (``deterministic`` only in deterministic
    mode); in deterministic mode on CUDA, CUDA graphs (``mode='reduce-overhead'``) are
    refused, and kernels picked by timing (``max-autotune``) where this torch cannot pick
    them without timing. Inductor's generated kernels that would accumulate with atomics
    (``index_put`` with ``accumulate``, ``scatter_add``) fall back to eager's
    deterministic kernels by themselves in deterministic mode.

    Args:
        options: ``torch.compile``'s arguments (:func:`compile_options`).
        deterministic: Whether the run is in deterministic mode.
        on_cuda: Whether the model trains on a CUDA device.
    """
    if backend_name(options) != 'inductor':
        return Requirements([], '')
    config = _inductor_config()
    given = dict(options.get('options') or {})
    sets = [(key, value, why) for key, value, why in SETS
            if _read(config, key)[0] and key not in given
            and (deterministic or key != 'deterministic')]
    mode = options.get('mode') or 'default'
    refusal = ''
    if deterministic and on_cuda:
        if mode in CUDA_GRAPH_MODES or given.get('triton.cudagraphs'):
            refusal = (f'compile: mode={mode!r} (CUDA graphs): a replay draws random numbers '
                       "through the graph's own generator state, not the one mmrepro keys "
                       'per step and restores on resume; use mode=\'default\' or '
                       "'max-autotune-no-cudagraphs'")
        elif not _read(config, 'deterministic')[0] and (
                mode in AUTOTUNE_MODES or any(given.get(key) for key in AUTOTUNE_OPTIONS)):
            refusal = (f'compile: mode={mode!r}: inductor picks kernels by timing them, which '
                       'differs from process to process (and so does their rounding); torch '
                       f'{torch.__version__} cannot pick them without timing: use '
                       "mode='default'")
    return Requirements(sets, refusal)


def check_compile(cfg: Any) -> None:
    """Refuse, before anything is built, a config whose ``compile`` cannot train exactly
    here (the Runner refuses it again when it compiles: ``ReproRunner._maybe_compile``).

    Raises:
        TypeError: ``compile`` is neither a bool nor a dict (one line).
        ValueError: :func:`requirements`' refusal, where the run trains on CUDA (MMEngine
            puts the model there when CUDA is available) in deterministic mode.
    """
    options = compile_options(cfg.get('compile'))
    if options is None:
        return
    deterministic = bool((cfg.get('randomness') or {}).get('deterministic'))
    refusal = requirements(options, deterministic, torch.cuda.is_available()).refusal
    if refusal:
        raise ValueError(refusal)


def apply_settings(sets: List[Tuple[str, Any, str]]) -> None:
    """Set inductor's ``sets`` (:func:`requirements`) for this process."""
    config = _inductor_config()
    for key, value, _ in sets:
        *path, name = key.split('.')
        node = config
        for part in path:
            node = getattr(node, part)
        setattr(node, name, value)


def compile_record(value: Any, deterministic: bool = True) -> Dict[str, Any]:
    """The run record's ``compile`` section for the config's ``compile`` ``value``.

    ``enabled`` alone for an eager run. A compiled one adds ``backend``, ``mode``,
    ``dynamic``, ``fullgraph`` and ``options`` as given, and, for inductor, the values in
    force of :data:`INDUCTOR_KEYS` (this torch's, then mmrepro's :func:`requirements`,
    then ``options``); and :data:`DYNAMO_KEYS`. The torch version is the record's
    ``versions.torch``.

    Args:
        value: The config's ``compile``.
        deterministic: Whether the run is in deterministic mode.
    """
    options = compile_options(value)
    if options is None:
        return dict(enabled=False)
    given = dict(options.get('options') or {})
    out: Dict[str, Any] = dict(
        enabled=True, backend=backend_name(options), mode=options.get('mode') or 'default',
        dynamic=options.get('dynamic'), fullgraph=bool(options.get('fullgraph', False)),
        options={key: repr(given[key]) for key in sorted(given)})
    if out['backend'] == 'inductor':
        config = _inductor_config()
        mmrepro = {key: value for key, value, _ in requirements(
            options, deterministic, on_cuda=False).sets}
        inductor = {}
        for key in INDUCTOR_KEYS:
            present, current = _read(config, key)
            if present:
                inductor[key] = given.get(key, mmrepro.get(key, current))
        out['inductor'] = inductor
    import torch._dynamo.config as dynamo
    out['dynamo'] = {key: getattr(dynamo, key) for key in DYNAMO_KEYS if hasattr(dynamo, key)}
    return out


def outside_graphs(fn: Callable) -> Callable:
    """``fn`` excluded from compilation: dynamo runs it eagerly wherever it is called
    (``torch.compiler.disable``)."""
    return torch.compiler.disable(fn)
