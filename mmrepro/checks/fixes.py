"""What removes each difference between two runs: the setting or the command, in one line.

:data:`FIXES` is the one table: for every cause :mod:`.causes` names, what removes it,
said the two ways the tools need it. ``mmrepro-diff`` gives run B run A's settings
(:func:`next_steps`: a ``next:`` line per cause, over every key of it, with A's values);
``mmrepro-check --against`` gives this run the baseline's value of one key
(:func:`key_fix`). Both name ``--cfg-options`` for config keys, ``randomness.threads`` or
``OMP_NUM_THREADS`` for the thread count, ``randomness.cpu_isa`` for the CPU kernel set,
``pip install NAME==VERSION`` for library versions, the variables to set or unset, the
code to run; and where no setting can (another GPU model), what to train on instead. The
fixers of the machine's causes are in :mod:`.machine_fixes`. :func:`layout_fix` says how
to train on a baseline's process layout.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..record.run_record import MISSING
from ..rng.owned import DRAW_GLOBAL
from ..run.layout import Layout
from .causes import (
    CANARY_CAUSE,
    COMPILE_CAUSE,
    COMPILED_CAUSE,
    INITIAL_CAUSE,
    LAYOUT_CAUSE,
    THREAD_COUNT,
    cause_of,
)
from .machine_fixes import (
    SHOWN,
    absent,
    assignment,
    counted,
    cpu_fix,
    cpu_of,
    decoders_fix,
    decoders_of,
    env_fix,
    env_of,
    flags_fix,
    flags_of,
    gpu_fix,
    gpu_of,
    option,
    other_of,
    threads_fix,
    threads_of,
    versions_fix,
    versions_of,
)

__all__ = ['FIXES', 'Fix', 'canary_fix', 'initial_fix', 'key_fix', 'layout_fix',
           'next_steps']

Diff = Tuple[str, Any, Any]
#: A record key of an edited source: ``code.packages.<name>.files.<path>`` (or the
#: package's ``sha256``; ``code.imports.<module>...`` alike).
_SOURCE_KEY = re.compile(r'^code\.(?:packages|imports)\.(.+?)\.(?:files\.(.+)|sha256|error)$')


def _config_keys(diffs: Sequence[Diff]) -> str:
    """``--cfg-options`` with A's values, and the keys only B sets."""
    options, drop = [], []
    for key, a, _ in diffs:
        if key == 'config_sha256':
            continue
        name = key.split('.', 1)[1] if key.startswith('config.') else key
        if a is MISSING or a == MISSING:
            drop.append(name)
        else:
            options.append(assignment(name, a))
    if not options and not drop:
        return ("use A's config: only its hash is recorded; A's log dir holds its dump "
                '(vis_data/config.py)')
    parts = [f"train B with A's values: --cfg-options {counted(options)}"] if options else []
    if drop:
        parts.append(f"remove from B's config what A does not set: {counted(drop, ', ')}")
    return '; '.join(parts)


def _config_of(key: str, value: Any) -> str:
    """The baseline's value of a config or ``randomness`` key (the thread count's setting:
    :func:`~.machine_fixes.threads_of`)."""
    if key in THREAD_COUNT:
        return threads_of(key, value)
    if key != 'seed' and not key.startswith(('randomness.', 'config.')):
        return other_of(key, value)
    name = 'randomness.seed' if key == 'seed' else key.removeprefix('config.')
    if absent(value):
        return f'remove {name} from the config (the baseline does not set it)'
    return (f"set the baseline's value: {option(name, value)}, or check against the "
            "baseline's own config (leave out CONFIG)")


def _seed(diffs: Sequence[Diff]) -> str:
    """The seed and ``randomness`` keys, as ``randomness.KEY=VALUE``, each once."""
    named: Dict[str, Any] = {}
    for key, a, _ in diffs:
        named.setdefault('seed' if key == 'seed' else key.rsplit('randomness.', 1)[-1], a)
    return _config_keys([(f'config.randomness.{name}', value, None)
                         for name, value in named.items()])


def _layout(diffs: Sequence[Diff]) -> str:
    names = {'world_size': 'ranks', 'layout.world_size': 'ranks',
             'layout.batch_size': 'batch_size',
             'config.train_dataloader.batch_size': 'batch_size',
             'layout.accumulative_counts': 'accumulative_counts',
             'config.optim_wrapper.accumulative_counts': 'accumulative_counts'}
    shown: Dict[str, str] = {}
    for key, a, _ in diffs:
        if key in names and not absent(a):
            shown.setdefault(names[key], str(a).strip("'"))
    what = ', '.join(f'{name} {value}' for name, value in shown.items()) or ', '.join(
        key for key, _, _ in diffs[:SHOWN])
    return (f"train on A's layout ({what}); another layout with the same global batch "
            'trains on the same samples, but only 2 ranks x B and 1 process x B x '
            'accumulate 2 end bitwise equal')


def layout_fix(baseline: Optional[Layout]) -> str:
    """How to train on the baseline's layout (one line, without ``fix:``)."""
    if baseline is None:
        return 'train on the layout the baseline was trained on (its run record has none)'
    launch = ('without --launcher' if baseline.world_size == 1 else
              f'with --launcher pytorch --nproc {baseline.world_size}')
    return (f"train on the baseline's layout, {launch} and --cfg-options "
            f'train_dataloader.batch_size={baseline.batch_size} '
            f'optim_wrapper.accumulative_counts={baseline.accumulation}')


def _files(diffs: Sequence[Diff]) -> str:
    return ('train both on the same data files: those listed under data: above differ '
            "(each run record holds every file's sha256)")


def _files_of(key: str, value: Any) -> str:
    return ("train on the baseline's data files (those named above differ): copy them "
            "from the baseline's machine, or point the config at the same files")


def _augmentation(diffs: Sequence[Diff]) -> str:
    parts = []
    for key, a, _ in diffs:
        if key == 'versions.albumentations':
            parts.append('pip uninstall albumentations' if absent(a)
                         else f'pip install albumentations=={a}')
    if any(key.startswith('pipeline_generators') for key, _, _ in diffs):
        parts.append(f"make the pipeline's transforms {DRAW_GLOBAL}, which mmrepro keys")
    return '; '.join(parts) or _config_keys(diffs)


def _augmentation_of(key: str, value: Any) -> str:
    if key == 'pipeline_generators' or key.startswith('pipeline_generators.'):
        return f"make the pipeline's transforms {DRAW_GLOBAL} (mmrepro keys them)"
    if key.startswith('versions.'):
        return versions_of(key, value)
    return other_of(key, value)


def edited_sources(keys: Sequence[str]) -> str:
    """The edited files named by ``code.packages``/``code.imports`` record keys, e.g.
    ``mmdet: models/necks/fpn.py``."""
    found: Dict[str, List[str]] = {}
    for key in keys:
        match = _SOURCE_KEY.match(key)
        if match:
            found.setdefault(match.group(1), []).extend(
                [match.group(2)] if match.group(2) else [])
    return '; '.join(f"{name}: {', '.join(files)}" if files else name
                     for name, files in found.items())


def _code(diffs: Sequence[Diff]) -> str:
    values = {key: a for key, a, _ in diffs}
    parts = []
    if not absent(values.get('code.git.commit')):
        parts.append(f"git checkout {values['code.git.commit']}")
    if 'code.git.diff_sha256' in values or 'code.git.dirty' in values:
        parts.append("the same uncommitted changes as A (git diff HEAD; compare with A's "
                     'code.git.diff_sha256)')
    if 'code.mmrepro_sha256' in values:
        parts.append("the mmrepro sources A ran (A's code.mmrepro_sha256)")
    if any(key.startswith('audit') for key in values):
        parts.append("the same op routing as A (the record's audit)")
    edited = edited_sources(values)
    if edited:
        parts.append(f'the sources A ran of {edited} (reinstall the package or revert the '
                     'edited files; the run record holds each file\'s sha256)')
    return "run A's code: " + ('; '.join(parts) or ', '.join(values))


def _code_of(key: str, value: Any) -> str:
    edited = edited_sources([key])
    if edited:
        return (f"run the sources the baseline ran: {edited} differs (reinstall the package "
                'or revert the edit; the run record holds each file\'s digest)')
    return f"run the code the baseline ran ({key}: {value!r})"


#: Why a compiled run and an eager one, or two backends or modes, are not bitwise.
ROUNDS_OTHERWISE = ('compiled kernels fuse and round differently from eager ones, and from '
                    "another backend's or mode's: bitwise equality is not expected across them")


def _compiled_by(values: Dict[str, Any]) -> bool:
    """Whether the run whose ``compile.enabled`` is in ``values`` compiled."""
    return values.get('compile.enabled') is True


def _compile(diffs: Sequence[Diff]) -> str:
    """What gives run B run A's ``compile``: eager, or A's setting."""
    values = {key: a for key, a, _ in diffs}
    config = [d for d in diffs if d[0] == 'config.compile' or d[0].startswith('config.compile.')]
    if 'compile.enabled' in values and not _compiled_by(values):
        text = "train B eagerly, as A: remove compile from B's config (or --cfg-options " \
               'compile=False)'
    elif config:
        text = _config_keys(config)
    else:
        text = "set inductor's and dynamo's settings as A had them: " + counted(
            [_compile_setting(key, a) for key, a, _ in diffs if key.startswith(
                ('compile.inductor.', 'compile.dynamo.'))], ', ')
    return f'{text} ({ROUNDS_OTHERWISE})'


def _compile_setting(key: str, value: Any) -> str:
    """``torch._inductor.config.NAME=VALUE`` for a ``compile.inductor.NAME`` record key
    (``torch._dynamo.config`` for ``compile.dynamo.``)."""
    section, name = key.split('.', 2)[1:]
    return f'torch._{section}.config.{name}={value!r}'


def _compile_of(key: str, value: Any) -> str:
    """What gives this run the baseline's value of one ``compile`` key."""
    if key == 'compile.enabled':
        return ('train eagerly, as the baseline did: --cfg-options compile=False'
                if value is not True else "compile as the baseline did: its config's compile "
                'setting (config.compile in its run record)')
    if key.startswith(('compile.inductor.', 'compile.dynamo.')):
        return f'set {_compile_setting(key, value)} before training, as the baseline had it'
    return _config_of(key if key.startswith('config.') else f'config.{key}', value)


def canary_fix(whose: str) -> str:
    """What to do where the first training images decode to other pixels than in
    ``whose`` run (``A``, ``the baseline``)."""
    return (f"the first training images decode to other pixels than in {whose}'s run: "
            f"decode with {whose}'s OpenCV and Pillow (decoding.versions in its run record), "
            'or check that the image files are the same')


def initial_fix(whose: str) -> str:
    """What to do where the initial weights differ from ``whose`` run's."""
    return (f"start from {whose}'s files: compare each file's sha256 (sha256sum FILE) with "
            f"{whose}'s run record (initial.files) and copy the file {whose} used instead "
            'of downloading it again')


class Fix(NamedTuple):
    """What removes one cause, the two ways the tools say it.

    Attributes:
        given_a: ``mmrepro-diff``: what gives run B run A's values of the cause's
            differing keys ``(key, A, B)``.
        of_baseline: ``mmrepro-check --against``: what gives this run the baseline's
            ``value`` of one ``key``.
    """

    given_a: Callable[[Sequence[Diff]], str]
    of_baseline: Callable[[str, Any], str]


#: Every cause of :mod:`.causes`, and what removes it.
FIXES: Dict[str, Fix] = {
    INITIAL_CAUSE: Fix(lambda diffs: initial_fix('A'), other_of),
    COMPILED_CAUSE: Fix(_compile, _compile_of),
    COMPILE_CAUSE: Fix(_compile, _compile_of),
    'the data files (fingerprint)': Fix(_files, _files_of),
    CANARY_CAUSE: Fix(lambda diffs: canary_fix('A'),
                      lambda key, value: canary_fix('the baseline')),
    'the seed or randomness settings': Fix(_seed, _config_of),
    LAYOUT_CAUSE: Fix(_layout, _config_of),
    'the data loader or pipeline config': Fix(_config_keys, _config_of),
    'the augmentation library or the generators the pipeline owns': Fix(_augmentation,
                                                                         _augmentation_of),
    'the config': Fix(_config_keys, _config_of),
    'the code': Fix(_code, _code_of),
    'the GPU, its driver or the AMP dtype': Fix(gpu_fix, gpu_of),
    'library versions': Fix(versions_fix, versions_of),
    'the image decoders': Fix(decoders_fix, decoders_of),
    'PyTorch numerics flags': Fix(flags_fix, flags_of),
    'the CPU kernel set': Fix(cpu_fix, cpu_of),
    'the intra-op thread count': Fix(threads_fix, threads_of),
    'environment variables': Fix(env_fix, env_of),
}


def next_steps(found: Sequence[Tuple[str, List[str]]], diffs: Sequence[Diff],
               indent: str = '  ') -> List[str]:
    """One ``next:`` line per cause: the setting or command that gives run B run A's.

    Args:
        found: ``(cause, [record keys])`` as :func:`.causes.causes` gives them.
        diffs: The differing settings ``(key, value in A, value in B)``.
        indent: Put before each line.
    """
    values = {key: (a, b) for key, a, b in diffs}
    lines = []
    for cause, keys in found:
        fix = FIXES.get(cause)
        entries = [(key, *values.get(key, (MISSING, MISSING))) for key in keys]
        text = fix.given_a(entries) if fix is not None else _config_keys(entries)
        lines.append(f'{indent}next: {cause}: {text}')
    return lines


def key_fix(key: str, value: Any) -> str:
    """The setting or command that gives this run the baseline's ``value`` of run record
    ``key`` (one line, without ``fix:``)."""
    fix = FIXES.get(cause_of(key) or '')
    return fix.of_baseline(key, value) if fix is not None else other_of(key, value)
