"""Which recorded differences between two runs can change training, and what they cause.

The run records' differences (:func:`mmrepro.record.run_record.diff_records`) are sorted
into causes, for ``mmrepro-diff``'s verdict (:mod:`mmrepro.checks.diff.verdict`) and for
``mmrepro-check --against``'s obstacles (:mod:`mmrepro.checks.against.predicted`). Data
causes change which samples a run trains on, or how they are augmented: the data files
(fingerprint), the seed and ``randomness`` settings, the process layout and the data
loader's config. Numeric causes change only how the same samples are computed, ranked
from the most to the least likely to change results: ``compile`` (a run compiled and
an eager one, or another backend or mode: compiled kernels fuse and round differently
from eager's), the config (model, optimizer, schedule), the code, the GPU
(architecture, driver, AMP dtype), library versions, PyTorch's numerics flags, the CPU
kernel set, the thread count, other environment variables. Keys that name places (host,
platform) explain nothing.

Before that, :func:`sort_settings` says each cause once and sets apart what cannot be a
cause: a different seed is one difference, though the record holds it as ``seed``,
``randomness.seed``, ``config.randomness.seed`` and ``PYTHONHASHSEED`` (which
mmrepro derives from it); validation and test settings, logging, checkpointing,
visualisation and the settings that only decide whether a run stops cannot change the
weights training computes (:data:`INERT`); with the two records at hand, neither can the
train loader's worker settings (:data:`LOADER_WORKERS`, where both runs seed per sample)
nor the options of mmrepro's own hooks and the hooks a check adds (:data:`INERT_HOOKS`).
What removes each cause is :mod:`.fixes`'s to say.
"""
from __future__ import annotations

import ast
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

__all__ = ['COMPILED_CAUSE', 'COMPILE_CAUSE', 'DATA_CAUSES', 'INERT', 'INERT_HOOKS',
           'LOADER_WORKERS', 'NUMERIC_CAUSES', 'THREAD_COUNT', 'compile_key', 'cause_of',
           'causes', 'inert_by_records', 'numeric_table', 'sort_settings',
           'unkeyed_generators']

Diff = Tuple[str, Any, Any]
#: A cause and the record keys it takes.
Table = Sequence[Tuple[str, Callable[[str], bool]]]
_LOADER = ('config.train_dataloader.', 'config.train_pipeline.')
#: The intra-op thread count as a run record holds it: the count itself, the setting that
#: pins it (``randomness.threads``) and the variables that set it where that is unset.
THREAD_COUNT = ('devices.torch_threads', 'randomness.threads', 'config.randomness.threads',
                'env.OMP_NUM_THREADS', 'env.MKL_NUM_THREADS')
#: The inter-op thread count, recorded with the CPU's numerics (not a kernel set).
INTEROP_THREADS = 'numerics.cpu.interop_threads'
_LAYOUT = ('world_size', 'launcher', 'backend', 'config.launcher',
           'config.train_dataloader.batch_size', 'config.optim_wrapper.accumulative_counts')
#: The process layout: a data cause where the samples differ (another global batch, or
#: ``global_stream=False``), the surest numeric cause where they are the same.
LAYOUT_CAUSE = 'the process layout (ranks, per-rank batch, accumulation)'

#: Record keys that restate the seed (``PYTHONHASHSEED`` only where it equals it).
SEED_ECHOES = ('randomness.seed', 'config.randomness.seed', 'env.PYTHONHASHSEED')
#: Record keys that cannot change training: evaluation, logging, checkpoints, display,
#: and the settings that only decide whether a run stops (``strict``, ``warn_only``,
#: ``global_batch``, ``verify_checkpoints``, ``allow_failed_imports``): two runs that both
#: trained ran alike.
INERT = ('config.val_', 'config.test_', 'config.train_cfg.val_interval',
         'config.train_cfg.val_begin', 'config.default_hooks.logger.',
         'config.default_hooks.checkpoint.', 'config.default_hooks.visualization.',
         'config.default_hooks.timer.', 'config.log_processor.', 'config.log_level',
         'config.visualizer.', 'config.vis_backends',
         'config.custom_imports.allow_failed_imports', 'torch_flags.deterministic_warn_only',
         *(f'{section}randomness.{key}' for section in ('', 'config.')
           for key in ('strict', 'warn_only', 'global_batch', 'verify_checkpoints')))
#: Train loader keys that cannot change training where both runs seed per sample and key
#: their caches (``randomness.sample_seeding`` and ``keyed_cache``, the defaults).
LOADER_WORKERS = tuple(f'config.train_dataloader.{key}' for key in (
    'num_workers', 'persistent_workers', 'prefetch_factor'))
#: Hooks whose entries in ``custom_hooks`` cannot change training: mmrepro's own (their
#: options say what is traced and recorded), the one a check adds to stop its run, and
#: MMEngine's checkpoint and logger hooks.
INERT_HOOKS = ('ReproducibilityHook', 'mmrepro.ReproducibilityHook', 'CheckReproStopHook',
               'mmrepro.CheckReproStopHook', 'CheckpointHook', 'LoggerHook')
#: What a worker-count difference needs for it to be inert (``randomness`` keys).
_PER_SAMPLE = ('sample_seeding', 'keyed_cache')


def _literal(text: Any) -> Any:
    try:
        return ast.literal_eval(text) if isinstance(text, str) else text
    except (ValueError, SyntaxError):
        return text


def _hook_entries(config: Dict[str, Any]) -> Dict[str, str]:
    """``{'custom_hooks.N': type}`` of a flattened config."""
    return {key.rsplit('.', 1)[0]: str(_literal(value)) for key, value in config.items()
            if key.startswith('custom_hooks.') and key.endswith('.type')}


def _without_mmrepro(value: Any) -> List[str]:
    """A config's ``custom_imports.imports`` without mmrepro's own modules."""
    names = _literal(value)
    names = [names] if isinstance(names, str) else list(names or [])
    return [n for n in names if not (n == 'mmrepro' or str(n).startswith('mmrepro.'))]


def inert_by_records(diffs: Sequence[Diff], record_a: Dict[str, Any],
                     record_b: Dict[str, Any]) -> Set[str]:
    """The differing keys that the two records show cannot change training.

    The train loader's worker settings (:data:`LOADER_WORKERS`) where both runs seed per
    sample; every key of a ``custom_hooks`` entry that is, in each run that has it, one of
    :data:`INERT_HOOKS`; ``custom_imports.imports`` that differ only by mmrepro (which
    ``tools/train.py`` adds).

    Args:
        diffs: The records' differences.
        record_a: Run A's record.
        record_b: Run B's record.
    """
    configs = [record.get('config') or {} for record in (record_a, record_b)]
    per_sample = all((record.get('randomness') or {}).get(key, True) is not False
                     for record in (record_a, record_b) for key in _PER_SAMPLE)
    hooks = [_hook_entries(config) for config in configs]
    inert = {entry for entry in set(hooks[0]) | set(hooks[1])
             if all(found.get(entry, INERT_HOOKS[0]) in INERT_HOOKS for found in hooks)}
    out = set()
    for key, _, _ in diffs:
        name = key.split('.', 1)[1] if key.startswith('config.') else ''
        if (per_sample and key in LOADER_WORKERS
                or name.startswith('custom_hooks.') and name.rsplit('.', 1)[0] in inert
                or name == 'custom_imports.imports' and _without_mmrepro(
                    configs[0].get(name)) == _without_mmrepro(configs[1].get(name))):
            out.add(key)
    return out


def sort_settings(diffs: Sequence[Diff], records: Sequence[Dict[str, Any]] = ()
                  ) -> Tuple[List[Diff], List[Diff], Dict[str, List[str]]]:
    """Say each cause once; set apart what cannot change training.

    Args:
        diffs: The records' differences (:func:`mmrepro.record.run_record.diff_records`).
        records: The two records, where at hand: they show more keys inert
            (:func:`inert_by_records`).

    Returns:
        tuple: ``(differences that can change training, differences that cannot
        (:data:`INERT`), {kept key: the keys that restate it})``.
    """
    by_key = {key: (a, b) for key, a, b in diffs}
    echoes: List[str] = []
    if 'seed' in by_key:
        seeds = tuple(str(v) for v in by_key['seed'])
        echoes = [k for k in SEED_ECHOES if k in by_key and (
            k != 'env.PYTHONHASHSEED' or tuple(map(str, by_key[k])) == seeds)]
    shown = inert_by_records(diffs, *records) if len(records) == 2 else set()
    inert = [d for d in diffs if d[0].startswith(INERT) or d[0] in shown]
    kept = [d for d in diffs if d[0] not in echoes and d not in inert]
    return kept, inert, ({'seed': echoes} if echoes else {})


#: The weights a run starts from (the run record's ``initial`` section): a difference there
#: is present before the first step, and explains every later one.
INITIAL_CAUSE = 'the initial weights'
#: The first training images decoded to other pixels (the decode canary).
CANARY_CAUSE = 'the decoded images (decode canary)'
#: The thread count's cause (:data:`THREAD_COUNT`, and the inter-op count).
THREAD_CAUSE = 'the intra-op thread count'
#: One run compiled (MMEngine's ``compile``), the other eager: the record of an eager run
#: has no ``compile`` section, so ``compile.enabled`` differs.
COMPILED_CAUSE = 'compiled vs eager'
#: Both compiled, with another backend, mode or setting of inductor or dynamo.
COMPILE_CAUSE = 'another compile backend or mode'


def compile_key(key: str) -> bool:
    """Whether a record key is a ``compile`` setting (the config's or the record's
    ``compile`` section)."""
    return key in ('config.compile', 'compile') or key.startswith(('config.compile.',
                                                                   'compile.'))


#: (cause, predicate on a record key), in the order a data difference is explained.
DATA_CAUSES: Table = (
    ('the data files (fingerprint)', lambda k: k.startswith('data.')),
    (CANARY_CAUSE, lambda k: k.startswith('decoding.canary')),
    ('the seed or randomness settings',
     lambda k: k in ('seed', 'config.randomness.seed') or k.startswith(
         ('randomness.', 'config.randomness.'))),
    (LAYOUT_CAUSE, lambda k: k in _LAYOUT or k.startswith(('layout.', 'ddp.'))),
    ('the data loader or pipeline config', lambda k: k.startswith(_LOADER)),
    ('the augmentation library or the generators the pipeline owns',
     lambda k: k.startswith(('versions.albumentations', 'pipeline_generators'))),
)
#: (cause, predicate on a record key), from the most to the least likely to change
#: results computed from the same samples.
NUMERIC_CAUSES: Table = (
    (INITIAL_CAUSE, lambda k: k.startswith('initial.')),
    (COMPILED_CAUSE, lambda k: k == 'compile.enabled'),
    (COMPILE_CAUSE, compile_key),
    ('the config', lambda k: k.startswith('config.') or k == 'config_sha256'),
    ('the code', lambda k: k.startswith(('code.', 'audit'))),
    ('the GPU, its driver or the AMP dtype',
     lambda k: k.startswith(('numerics.gpu.', 'numerics.amp.', 'devices.cuda'))),
    ('library versions', lambda k: k.startswith(('versions.', 'numerics.libraries.'))),
    ('the image decoders', lambda k: k.startswith('decoding.')),
    ('PyTorch numerics flags', lambda k: k.startswith('torch_flags.')),
    ('the CPU kernel set', lambda k: k.startswith('numerics.cpu.') and k != INTEROP_THREADS
     or k == 'devices.cpu'),
    (THREAD_CAUSE, lambda k: k in THREAD_COUNT or k == INTEROP_THREADS),
    ('environment variables', lambda k: k.startswith('env.')),
)


def causes(diffs: Sequence[Diff], table: Table) -> List[Tuple[str, List[str]]]:
    """``(cause, [keys])`` for every cause of ``table`` some differing key falls under.

    A key belongs to the first cause that takes it, so data causes are taken out of the
    numeric ones by the caller passing only the remaining keys.
    """
    out: List[Tuple[str, List[str]]] = []
    left = [key for key, _, _ in diffs]
    for cause, takes in table:
        keys = [key for key in left if takes(key)]
        if keys:
            out.append((cause, keys))
            left = [key for key in left if key not in keys]
    return out


def cause_of(key: str) -> Optional[str]:
    """The cause one differing record key falls under (data causes first), or None."""
    found = causes([(key, None, None)], (*DATA_CAUSES, *NUMERIC_CAUSES))
    return found[0][0] if found else None


def numeric_table(diffs: Sequence[Diff]) -> Table:
    """:data:`NUMERIC_CAUSES` for these differences: thread variables count as threads only
    if the count differs; where one run is compiled and the other eager, every compile key
    is that one cause, and so is the config's hash where compile keys are all that differ
    in the config."""
    keys = [key for key, _, _ in diffs]
    table = list(NUMERIC_CAUSES)
    if 'devices.torch_threads' not in keys:
        table = [(cause, (lambda k: k == INTEROP_THREADS) if cause == THREAD_CAUSE else takes)
                 for cause, takes in table]
    if any(compile_key(key) for key in keys):
        alone = not any(key.startswith('config.') and not compile_key(key) for key in keys)
        cause = COMPILED_CAUSE if 'compile.enabled' in keys else COMPILE_CAUSE
        at = [name for name, _ in table].index(COMPILED_CAUSE)
        table[at:at + 2] = [(cause, lambda k: compile_key(k) or alone and k == 'config_sha256')]
    return table


def unkeyed_generators(*records: Optional[Dict[str, Any]]) -> List[str]:
    """The generators the records' train pipelines own that mmrepro does not key, as
    ``Class.attribute (type)``, each once."""
    names = [f"{g.get('owner')} ({g.get('kind')})" for record in records if record
             for g in record.get('pipeline_generators') or [] if not g.get('keyed')]
    return list(dict.fromkeys(names))
