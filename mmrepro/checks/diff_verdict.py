"""``repro_diff``'s verdict: a data difference or a numeric one, and what explains it.

The run records' differences are sorted into causes. Data causes change which samples
a run trains on, or how they are augmented: the data files (fingerprint), the seed and
``randomness`` settings, the process layout and the data loader's config. Numeric
causes change only how the same samples are computed, ranked from the most to the
least likely to change results: the config (model, optimizer, schedule), the code,
the GPU (architecture, driver, AMP dtype), library versions, PyTorch's numerics flags,
the CPU kernel set, the thread count, other environment variables. Where the samples
are the same, a different process layout (ranks, per-rank batch, accumulation: the
same global batch) comes first: each rank computes its loss over fewer images. Keys
that name places (host, platform) explain nothing.

Before that, :func:`sort_settings` says each cause once and sets apart what cannot be a
cause: a different seed is one difference, though the record holds it as ``seed``,
``randomness.seed``, ``config.randomness.seed`` and ``PYTHONHASHSEED`` (which
mmrepro derives from it); validation and test settings, logging, checkpointing and
visualisation cannot change the weights training computes (:data:`INERT`).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ['DATA_CAUSES', 'INERT', 'NUMERIC_CAUSES', 'causes', 'settings_verdict',
           'sort_settings', 'verdict_lines']

Diff = Tuple[str, Any, Any]
_LOADER = ('config.train_dataloader.', 'config.train_pipeline.')
_THREADS = ('devices.torch_threads', 'env.OMP_NUM_THREADS', 'env.MKL_NUM_THREADS',
            'numerics.cpu.interop_threads')
_LAYOUT = ('world_size', 'launcher', 'backend', 'config.launcher',
           'config.train_dataloader.batch_size', 'config.optim_wrapper.accumulative_counts')
#: The process layout: a data cause where the samples differ (another global batch, or
#: ``global_stream=False``), the surest numeric cause where they are the same.
LAYOUT_CAUSE = 'the process layout (ranks, per-rank batch, accumulation)'

#: Record keys that restate the seed (``PYTHONHASHSEED`` only where it equals it).
SEED_ECHOES = ('randomness.seed', 'config.randomness.seed', 'env.PYTHONHASHSEED')
#: Config keys that cannot change training: evaluation, logging, checkpoints, display.
INERT = ('config.val_', 'config.test_', 'config.train_cfg.val_interval',
         'config.train_cfg.val_begin', 'config.default_hooks.logger.',
         'config.default_hooks.checkpoint.', 'config.default_hooks.visualization.',
         'config.default_hooks.timer.', 'config.log_processor.', 'config.log_level',
         'config.visualizer.', 'config.vis_backends')


def sort_settings(diffs: Sequence[Diff]) -> Tuple[List[Diff], List[Diff], Dict[str, List[str]]]:
    """Say each cause once; set apart what cannot change training.

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
    inert = [d for d in diffs if d[0].startswith(INERT)]
    kept = [d for d in diffs if d[0] not in echoes and d not in inert]
    return kept, inert, ({'seed': echoes} if echoes else {})


#: (cause, predicate on a record key), in the order a data difference is explained.
DATA_CAUSES: Sequence[Tuple[str, Callable[[str], bool]]] = (
    ('the data files (fingerprint)', lambda k: k.startswith('data.')),
    ('the seed or randomness settings',
     lambda k: k in ('seed', 'config.randomness.seed') or k.startswith(
         ('randomness.', 'config.randomness.'))),
    (LAYOUT_CAUSE, lambda k: k in _LAYOUT or k.startswith(('layout.', 'ddp.'))),
    ('the data loader or pipeline config', lambda k: k.startswith(_LOADER)),
)
#: (cause, predicate on a record key), from the most to the least likely to change
#: results computed from the same samples.
NUMERIC_CAUSES: Sequence[Tuple[str, Callable[[str], bool]]] = (
    ('the config', lambda k: k.startswith('config.') or k == 'config_sha256'),
    ('the code', lambda k: k.startswith(('code.', 'audit'))),
    ('the GPU, its driver or the AMP dtype',
     lambda k: k.startswith(('numerics.gpu.', 'numerics.amp.', 'devices.cuda'))),
    ('library versions', lambda k: k.startswith(('versions.', 'numerics.libraries.'))),
    ('PyTorch numerics flags', lambda k: k.startswith('torch_flags.')),
    ('the CPU kernel set', lambda k: k.startswith('numerics.cpu.') and k not in _THREADS
     or k == 'devices.cpu'),
    ('the intra-op thread count', lambda k: k in _THREADS),
    ('environment variables', lambda k: k.startswith('env.')),
)


def causes(diffs: Sequence[Diff],
           table: Sequence[Tuple[str, Callable[[str], bool]]]) -> List[Tuple[str, List[str]]]:
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


def _numeric_table(diffs: Sequence[Diff]) -> Sequence[Tuple[str, Callable[[str], bool]]]:
    """:data:`NUMERIC_CAUSES`; thread variables count as threads only if the count differs."""
    if any(key == 'devices.torch_threads' for key, _, _ in diffs):
        return NUMERIC_CAUSES
    return [(cause, (lambda k: k in ('numerics.cpu.interop_threads',))
             if cause == 'the intra-op thread count' else takes)
            for cause, takes in NUMERIC_CAUSES]


def _listing(found: List[Tuple[str, List[str]]]) -> str:
    shown = []
    for cause, keys in found:
        names = ', '.join(keys[:3]) + (f' and {len(keys) - 3} more' if len(keys) > 3 else '')
        shown.append(f'{cause} ({names})')
    return '; '.join(shown)


def settings_verdict(diffs: Sequence[Diff]) -> List[str]:
    """The verdict when no outcome could be compared but settings differ: the runs
    differ in what they were given (data causes first, then numeric ones)."""
    data = causes(diffs, DATA_CAUSES)
    data_keys = {key for _, keys in data for key in keys}
    found = data + causes([d for d in diffs if d[0] not in data_keys], _numeric_table(diffs))
    return [f'verdict: settings that change training differ: {_listing(found)}',
            '  no outcome was compared: the runs hold no common logged or traced iteration '
            'and no common weights']


def verdict_lines(diffs: Sequence[Diff], diverged: bool, first: Optional[int],
                  data_iteration: Optional[int], data_traced: bool,
                  identical: str = 'bit-identical') -> List[str]:
    """The verdict of ``repro_diff``.

    Args:
        diffs: The run records' differences that can change training
            (:func:`sort_settings`).
        diverged: Whether the traces (or logged losses) differ.
        first: The first diverging iteration, if known.
        data_iteration: The first traced iteration whose samples differ (None if none).
        data_traced: Whether both traces hold per-sample data digests.
        identical: How equal runs are called: ``bit-identical``, or ``identical
            through iteration k (...)`` where they cover different spans.
    """
    data = causes(diffs, DATA_CAUSES)
    data_keys = {key for _, keys in data for key in keys}
    numeric = causes([d for d in diffs if d[0] not in data_keys], _numeric_table(diffs))
    fingerprint = any(key.startswith('data.') for key in data_keys)
    if data_iteration is not None or (not data_traced and fingerprint):
        where = f' from iteration {data_iteration}' if data_iteration is not None else ''
        why = _listing(data) if data else ('nothing recorded: the same files and settings, '
                                           'so the data order or augmentation is not '
                                           'reproducible')
        return [f'verdict: the data differ{where}', f'  why: {why}']
    same = 'the same samples in every traced iteration; ' if data_traced else ''
    layout = [cause for cause in data if cause[0] == LAYOUT_CAUSE]
    found = layout + numeric + [cause for cause in data if cause[0] != LAYOUT_CAUSE]
    if not diverged:
        if not found:
            return [f'verdict: {same}{identical}, as expected (no setting that changes '
                    'results differs)']
        return [f'verdict: {same}{identical}, although settings differ: {_listing(found)}']
    at = f' from iteration {first}' if first is not None else ''
    lines = [f'verdict: {same}the numbers differ{at}']
    if found:
        lines.append(f'  explained by (most likely first): {_listing(found)}')
        lines.append('  bitwise equality expected: no, settings that change results differ')
    else:
        lines.append('  bitwise equality expected: yes: nothing recorded that changes results '
                     'differs, so an operation is nondeterministic or a setting is not '
                     'recorded (run tools/check_repro.py on the config)')
    return lines
