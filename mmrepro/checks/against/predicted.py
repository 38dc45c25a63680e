"""Before training: what in this environment and config will keep a baseline from reproducing.

:func:`predicted_record` gathers, without training, what the run record of a run of the
config here would hold (config, data fingerprint, versions, CPU/GPU numerics, layout);
:func:`obstacles` compares it with the baseline's record and sorts the differences into
:data:`KINDS`, most decisive first. A config or data difference blocks the check.
"""
from __future__ import annotations

import ast
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ...determinism.compile import compile_options, compile_record
from ...determinism.cpu import THREAD_ENV, environment
from ...record.code_digest import import_digests
from ...record.decoding import decoding_record
from ...record.fingerprint import data_fingerprint
from ...record.initial_weights import SECTION as INITIAL
from ...record.initial_weights import changed_files, initial_files
from ...record.numerics import amp_record
from ...record.run_record import diff_records, flatten_config
from ...run.enable import HOOK_NAMES
from ...run.layout import Layout, accumulative_counts
from ...run.settings import RunSettings, parse_randomness
from ..causes import (
    COMPILE_CAUSE,
    COMPILED_CAUSE,
    DATA_CAUSES,
    LAYOUT_CAUSE,
    causes,
    numeric_table,
    sort_settings,
)
from ..fixes import initial_fix, key_fix, layout_fix
from .probe import probe

#: The kinds of obstacle, most decisive first; the first three block the check.
KINDS = ('initial weights', 'config', 'data', 'compile', 'code', 'library versions',
         'CPU/GPU numerics', 'layout')
BLOCKING = ('initial weights', 'config', 'data')
#: The cause each of :mod:`~mmrepro.checks.causes`' causes is reported as.
_KIND_OF = {
    'the data files (fingerprint)': 'data',
    'the decoded images (decode canary)': 'data',
    'the seed or randomness settings': 'config',
    'the data loader or pipeline config': 'config',
    'the config': 'config',
    COMPILED_CAUSE: 'compile',
    COMPILE_CAUSE: 'compile',
    'the code': 'code',
    'library versions': 'library versions',
    'the image decoders': 'library versions',
    LAYOUT_CAUSE: 'layout',
}
#: What removes an initial-weights obstacle.
INITIAL_FIX = initial_fix('the baseline')
#: Record keys a check run differs in by design, that name the process layout (judged
#: on its own: :func:`layout_obstacle`), or that set the thread count (judged by the
#: count itself, ``devices.torch_threads``, which the prediction sets from them).
_EXPECTED = ('config_sha256', 'world_size', 'backend', 'launcher', 'config.launcher',
             'config.resume', 'config.load_from', 'config.train_dataloader.batch_size',
             'config.optim_wrapper.accumulative_counts', 'config.randomness.global_batch',
             'randomness.threads', 'config.randomness.threads')
_EXPECTED_PREFIXES = ('layout.', 'ddp.', 'audit', 'code.git', INITIAL + '.', 'devices.host',
                      'devices.platform', 'devices.cpu_count', 'numerics.cpu.model',
                      'env.PYTHONHASHSEED', 'env.CUDA_VISIBLE_DEVICES',
                      'env.CUDA_LAUNCH_BLOCKING')
#: Thread variables: an obstacle only where the intra-op thread count itself differs.
_THREAD_KEYS = tuple(f'env.{name}' for name in THREAD_ENV)


@dataclass
class Obstacle:
    """One difference from the baseline that will keep the runs from being bit-identical.

    Attributes:
        kind: One of :data:`KINDS`.
        text: What differs, e.g. ``devices.torch_threads: 2 vs 1``.
        fix: The setting or command that removes it
            (:func:`~mmrepro.checks.fixes.key_fix`).
    """

    kind: str
    text: str
    fix: str = ''

    @property
    def blocking(self) -> bool:
        """Whether the check stops before training (a config or data difference)."""
        return self.kind in BLOCKING


def layout_of_record(record: Dict[str, Any]) -> Optional[Layout]:
    """The layout a run record was trained with (its ``layout`` section, else its config)."""
    section = record.get('layout') or {}
    if section.get('batch_size'):
        return Layout(int(section['batch_size']), 0, int(section['world_size']),
                      int(section['accumulative_counts']))
    config = record.get('config') or {}
    try:
        batch = int(config['train_dataloader.batch_size'])
        accumulation = int(config.get('optim_wrapper.accumulative_counts', '1'))
    except (KeyError, ValueError):
        return None
    return Layout(batch, 0, int(record.get('world_size') or 1), accumulation)


def predicted_layout(cfg: Any, world_size: int) -> Layout:
    """The layout a run of ``cfg`` on ``world_size`` ranks trains with."""
    return Layout(int(cfg.train_dataloader.batch_size), 0, world_size,
                  accumulative_counts(cfg.get('optim_wrapper') or {}))


def training_environment(world_size: int, cpu_isa: Optional[str] = None) -> Dict[str, str]:
    """The environment a training process of the check gets: torchrun sets one thread
    per process where a node runs several and ``OMP_NUM_THREADS`` is unset, and
    ``tools/train.py`` restarts itself with ``randomness.cpu_isa``'s variables."""
    env = dict(os.environ)
    if world_size > 1 and not env.get('OMP_NUM_THREADS'):
        env['OMP_NUM_THREADS'] = '1'
    env.update(environment(cpu_isa))
    return env


def predicted_record(cfg: Any, world_size: int, dataset: Any,
                     fingerprint: str = 'labels',
                     facts: Optional[Dict[str, Any]] = None,
                     model: Any = None) -> Dict[str, Any]:
    """What the run record of training ``cfg`` on ``world_size`` ranks here would hold.

    Args:
        cfg: The config as it will be trained (``--cfg-options`` applied).
        world_size: Ranks the check trains on.
        dataset: The built training dataset (for the data fingerprint).
        fingerprint: The baseline's fingerprint mode.
        facts: The environment's facts as a fresh training process reads them
            (:func:`mmrepro.checks.against.probe.probe`); read now by default.
        model: The config's model built without weights
            (:func:`mmrepro.resume.preflight.build_offline`), for the files it is
            initialised from (None: not predicted).
    """
    settings = parse_randomness(cfg.get('randomness'))
    if facts is None:
        facts = probe(training_environment(world_size, settings.cpu_isa))
    devices = dict(facts['devices'])
    if settings.threads:  # set when the Runner seeds
        devices['torch_threads'] = int(settings.threads)
    numerics = dict(facts['numerics'], amp=amp_record(cfg.get('optim_wrapper')))
    record = dict(
        seed=settings.seed, randomness=settings.to_dict(), world_size=world_size,
        versions=facts['versions'], devices=devices, env=facts['env'],
        torch_flags=seeded_flags(facts['torch_flags'], settings), numerics=numerics,
        config=flatten_config(cfg), code=dict(facts['code'], imports=import_digests(
            cfg.get('custom_imports'))),
        data=data_fingerprint(dataset, fingerprint), decoding=decoding_record(dataset))
    if model is not None:
        record[INITIAL] = dict(files=initial_files(model, cfg.get('load_from'),
                                                   bool(cfg.get('resume'))))
    if compile_options(cfg.get('compile')) is not None:  # an eager run's record has none
        record['compile'] = compile_record(cfg.get('compile'), settings.deterministic)
    return record


def seeded_flags(flags: Dict[str, Any], settings: RunSettings) -> Dict[str, Any]:
    """PyTorch's numerics ``flags`` (a fresh process's) as a run with these settings
    sets them when it seeds (:func:`mmrepro.determinism.mode.set_deterministic`)."""
    flags = dict(flags)
    if settings.deterministic:
        flags.update(deterministic_algorithms=True,
                     deterministic_warn_only=bool(settings.warn_only),
                     cudnn_deterministic=True, cudnn_benchmark=False)
        if settings.fill_uninitialized_memory is not None:
            flags['fill_uninitialized_memory'] = settings.fill_uninitialized_memory
    return flags


def _without_own_imports(config: Dict[str, str]) -> Dict[str, str]:
    """A flattened config without mmrepro in ``custom_imports``: ``tools/train.py`` adds
    it (with ``allow_failed_imports``) where a config enables mmrepro by its hook alone,
    and it changes nothing the model computes."""
    out = {k: v for k, v in config.items() if k != 'custom_imports.allow_failed_imports'}
    try:
        names = ast.literal_eval(out.get('custom_imports.imports', '[]'))
    except (ValueError, SyntaxError):
        return out
    names = [names] if isinstance(names, str) else list(names)
    rest = [n for n in names if not (n == 'mmrepro' or str(n).startswith('mmrepro.'))]
    out.pop('custom_imports.imports', None)
    if rest:
        out['custom_imports.imports'] = repr(rest)
    return out


def _without_hook_options(config: Dict[str, str]) -> Dict[str, str]:
    """A flattened config without mmrepro's own hooks' entries (their options, such as the
    trace interval, change nothing the model computes)."""
    own = {key.rsplit('.', 1)[0] for key, value in config.items()
           if key.startswith('custom_hooks.') and key.endswith('.type')
           and value.strip('\'"') in (*HOOK_NAMES, 'CheckReproStopHook')}
    return {key: value for key, value in config.items()
            if not any(key.startswith(prefix + '.') for prefix in own)}


#: Config keys that say where the data lie, which differs between machines; what the
#: data are is the data fingerprint's to say (relative to ``data_root``).
_LOCATIONS = ('data_root', 'ann_file', 'img_path', 'seg_map_path')


def _located(key: str) -> bool:
    return key.rsplit('.', 1)[-1] in _LOCATIONS or '.data_prefix.' in f'.{key}.'


def _comparable(record: Dict[str, Any], pinned_seed: bool) -> Dict[str, Any]:
    config = _without_own_imports(_without_hook_options(dict(record.get('config') or {})))
    out = dict(record, config={k: v for k, v in config.items() if not _located(k)})
    if pinned_seed:  # the check trains with the baseline's seed
        out.pop('seed', None)
        out['randomness'] = {k: v for k, v in (record.get('randomness') or {}).items()
                             if k != 'seed'}
        out['config'] = {k: v for k, v in out['config'].items() if k != 'randomness.seed'}
    for key in ('weights', 'layout', 'ddp', 'audit', 'timestamp', 'work_dir', 'argv',
                'record_version'):
        out.pop(key, None)
    return out


def obstacles(baseline: Dict[str, Any], predicted: Dict[str, Any], layout: Layout,
              pinned_seed: bool, sync_bn: bool = False,
              averaging: str = '') -> List[Obstacle]:
    """What will keep a run from reproducing ``baseline``, most decisive first.

    Args:
        baseline: The baseline's run record.
        predicted: :func:`predicted_record` of this run.
        layout: This run's layout (its global batch already matched to the baseline's).
        pinned_seed: The check trains with the baseline's seed (the config has none).
        sync_bn: The model normalises over the whole batch of every rank (SyncBN).
        averaging: The model's module that averages over ranks
            (:func:`rank_averaging_module`; empty: none).
    """
    diffs = diff_records(_comparable(baseline, pinned_seed), _comparable(predicted,
                                                                         pinned_seed))
    kept, _, _ = sort_settings(diffs, (baseline, predicted))
    threads = any(key == 'devices.torch_threads' for key, _, _ in kept)
    kept = [d for d in kept if d[0] not in _EXPECTED and not d[0].startswith(
        _EXPECTED_PREFIXES) and (threads or d[0] not in _THREAD_KEYS)]
    kept = _named_files_only(kept)
    found = [Obstacle('initial weights', text, INITIAL_FIX) for text in changed_files(
        baseline.get(INITIAL) or {}, predicted.get(INITIAL) or {}, ('the baseline', 'here'))
        ] if INITIAL in predicted and INITIAL in baseline else []
    data = causes(kept, DATA_CAUSES)
    taken = {key for _, keys in data for key in keys}
    rest = [d for d in kept if d[0] not in taken]
    numeric = causes(rest, numeric_table(rest))
    values = {key: (a, b) for key, a, b in kept}
    for cause, keys in data + numeric:
        kind = _KIND_OF.get(cause, 'CPU/GPU numerics')
        for key in keys:
            a, b = values[key]
            found.append(Obstacle(kind, f'{cause}: {key}: {_short(a)} in the baseline, '
                                        f'{_short(b)} here', key_fix(key, a)))
    base_layout = layout_of_record(baseline)
    layout_problem = layout_obstacle(base_layout, layout, sync_bn, averaging)
    if layout_problem:
        found.append(Obstacle('layout', layout_problem, layout_fix(base_layout)))
    return sorted(found, key=lambda o: KINDS.index(o.kind))


def _named_files_only(diffs: List[Any]) -> List[Any]:
    """The differences without a package's or module's combined ``sha256`` where its
    edited files are named (the combined digest only restates them)."""
    named = {key.split('.files.', 1)[0] for key, _, _ in diffs
             if key.startswith(('code.packages.', 'code.imports.')) and '.files.' in key}
    return [d for d in diffs if not (d[0].endswith('.sha256') and d[0][:-len('.sha256')]
                                     in named)]


def rank_averaging_module(model: Any) -> str:
    """The first module type of a model config whose code averages a value over the ranks
    (``reduce_mean``: FCOS, ATSS, GFL, TOOD, VFNet, YOLOX, RTMDet, DETR-style and
    MaskFormer-style heads among others), or ``''``.

    Such a head normalises its loss by a count averaged over the ranks, where one
    process normalises each micro-batch alone: float-close across layouts, as measured
    (``benchmarks/results/zoo_layouts_cpu.md``). A class counts where it, or a class it
    inherits from, is defined in a module that calls ``reduce_mean``.

    Args:
        model: The config's ``model`` (a dict or ``ConfigDict``).
    """
    try:
        from mmdet.registry import MODELS
    except ImportError:
        return ''
    read = set()  # modules already read (and found without it)
    stack = [model]
    while stack:
        node = stack.pop(0)
        if isinstance(node, dict):
            kind = node.get('type')
            cls = MODELS.get(kind) if isinstance(kind, str) else None
            for name in {base.__module__ for base in getattr(cls, '__mro__', ())} - read:
                read.add(name)
                try:
                    code = inspect.getsource(sys.modules[name])
                except (KeyError, OSError, TypeError):
                    code = ''
                if 'reduce_mean(' in code:
                    return kind
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return ''


def layout_obstacle(baseline: Optional[Layout], layout: Layout, sync_bn: bool,
                    averaging: str = '') -> str:
    """Why this layout cannot give the baseline's bits (empty where it can).

    2 ranks x B and 1 process x B x 2 add their two gradients alike and end bitwise
    equal; more micro-batches per step add theirs in another order (float-close).
    Another per-rank batch normalises losses over other images, BatchNorm synchronised
    across ranks (SyncBN) normalises over other images, and heads that average their
    normaliser over ranks (:func:`rank_averaging_module`) weigh the images otherwise.

    Args:
        baseline: The baseline's layout (None: not recorded).
        layout: This run's.
        sync_bn: The model uses SyncBN.
        averaging: The model's module that averages over ranks
            (:func:`rank_averaging_module`; empty: none).
    """
    if baseline is None or baseline == Layout(layout.batch_size, 0, layout.world_size,
                                              layout.accumulation):
        return ''
    if baseline.global_batch != layout.global_batch:
        return (f'the global batch differs: {baseline.global_batch} in the baseline, '
                f'{layout.global_batch} here')
    if baseline.batch_size != layout.batch_size:
        return (f'per-rank batch {baseline.batch_size} in the baseline, {layout.batch_size} '
                'here: each micro-batch normalises its loss over other images (float-close, '
                'not bitwise)')
    if baseline.slices > 2:
        return (f'{baseline.slices} micro-batches per optimizer step: their gradients add '
                f'in another order on {baseline.world_size} rank(s) x '
                f'{baseline.accumulation} than on {layout.world_size} x {layout.accumulation} '
                '(float-close, not bitwise)')
    if sync_bn and baseline.world_size != layout.world_size:
        return (f'SyncBN over {baseline.world_size} rank(s) in the baseline, '
                f'{layout.world_size} here: BatchNorm statistics cover other images')
    if averaging and baseline.world_size != layout.world_size:
        return (f'{averaging} averages its loss normaliser over {baseline.world_size} rank(s) '
                f'in the baseline, {layout.world_size} here: one process normalises each '
                'micro-batch alone (float-close, not bitwise)')
    return ''


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'

