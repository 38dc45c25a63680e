"""What removes each cause ``repro_diff`` names: the setting or the command, in one line.

:func:`next_steps` turns the causes of :mod:`.diff_verdict` (``(cause, [record keys])``)
into ``next:`` lines that give run B run A's settings: ``--cfg-options`` for config keys,
``randomness.threads`` or ``OMP_NUM_THREADS`` for the thread count,
``randomness.cpu_isa`` for the CPU kernel set, ``pip install NAME==VERSION`` for library
versions, the variables to set or unset, the commit to check out. Values are A's, as the
run records hold them.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..record.run_record import MISSING

__all__ = ['FIXES', 'FLAG_SETTINGS', 'NOT_PIP', 'absent', 'assignment', 'next_steps']

Diff = Tuple[str, Any, Any]
#: Assignments shown in one line; the rest are counted (every key is listed above it).
_SHOWN = 4
#: ``randomness.cpu_isa`` for each kernel set PyTorch reports, from the narrowest.
_ISA = (('default', ('DEFAULT', 'NO AVX')), ('avx2', ('AVX2',)), ('avx512', ('AVX512',)))
#: Versions that are not pip packages: what brings them.
NOT_PIP = {'python': 'python {}', 'cuda': 'the torch build for CUDA {}',
            'cudnn': 'the torch build with cuDNN {}', 'mmrepro': 'mmrepro {}'}
#: The libraries ``numerics.libraries`` names, as they are called.
_LIBRARIES = {'mkl': 'MKL', 'onednn': 'oneDNN', 'nccl': 'NCCL'}
#: Where each recorded PyTorch flag is set.
FLAG_SETTINGS = {
    'deterministic_algorithms': 'randomness.deterministic',
    'cudnn_deterministic': 'randomness.deterministic',
    'fill_uninitialized_memory': 'randomness.fill_uninitialized_memory',
    'cudnn_benchmark': 'env_cfg.cudnn_benchmark',
}


def absent(value: Any) -> bool:
    """Whether a recorded value stands for nothing (None, or a key one record lacks)."""
    return value is None or value is MISSING or value == MISSING


def _value_text(key: str, value: Any) -> str:
    """A recorded value as a ``--cfg-options`` value: config keys hold ``repr`` texts."""
    text = value if key.startswith('config.') and isinstance(value, str) else repr(value)
    if re.fullmatch(r"'[\w.\-/:+]*'", text):
        text = text[1:-1]  # a plain string needs no quotes
    return text


def assignment(key: str, value: Any) -> str:
    """``KEY=VALUE`` for ``--cfg-options`` (quoted for a shell where it needs it).

    Args:
        key: The config key, without the record's ``config.`` prefix.
        value: The value as the record holds it.
    """
    text = f'{key}={_value_text("config." + key, value)}'
    return f'"{text}"' if re.search(r'[\s()\[\]{}\'"$*?;&|<>]', text) else text


def _counted(items: List[str], sep: str = ' ') -> str:
    shown = sep.join(items[:_SHOWN])
    return shown + (f' (and {len(items) - _SHOWN} more, listed above)'
                    if len(items) > _SHOWN else '')


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
    parts = [f"train B with A's values: --cfg-options {_counted(options)}"] if options else []
    if drop:
        parts.append(f"remove from B's config what A does not set: {_counted(drop, ', ')}")
    return '; '.join(parts)


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
        key for key, _, _ in diffs[:_SHOWN])
    return (f"train on A's layout ({what}); another layout with the same global batch "
            'trains on the same samples, but only 2 ranks x B and 1 process x B x '
            'accumulate 2 end bitwise equal')


def _files(diffs: Sequence[Diff]) -> str:
    return ('train both on the same data files: those listed under data: above differ '
            "(each run record holds every file's sha256)")


def _augmentation(diffs: Sequence[Diff]) -> str:
    parts = []
    for key, a, _ in diffs:
        if key == 'versions.albumentations':
            parts.append('pip uninstall albumentations' if absent(a)
                         else f'pip install albumentations=={a}')
    if any(key.startswith('pipeline_generators') for key, _, _ in diffs):
        parts.append("make the pipeline's transforms draw from np.random, random or torch's "
                     'default generator, which mmrepro keys')
    return '; '.join(parts) or _config_keys(diffs)


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


#: A record key of an edited source: ``code.packages.<name>.files.<path>`` (or the
#: package's ``sha256``; ``code.imports.<module>...`` alike).
_SOURCE_KEY = re.compile(r'^code\.(?:packages|imports)\.(.+?)\.(?:files\.(.+)|sha256|error)$')
#: pip's names of the decoding libraries a run record lists under ``decoding.versions``.
DECODER_PIP = {'opencv': 'opencv-python', 'pillow': 'Pillow', 'turbojpeg': 'PyTurboJPEG'}


def decoders_fix(diffs: Sequence[Diff], whose: str = 'A') -> str:
    """What gives a run ``whose`` image decoders (``decoding.versions`` differences)."""
    pip, codecs, backend = [], [], []
    for key, a, _ in diffs:
        name = key.rsplit('.', 1)[1]
        if '.opencv_codecs.' in key:
            codecs.append(f'{name} {a}')
        elif name == 'mmcv_imread_backend':  # a setting, not a package
            backend.append(f'mmcv.use_backend({a!r})')
        elif key.startswith('decoding.versions.') and not absent(a):
            pip.append(f'{DECODER_PIP.get(name, name)}=={a}')
    parts = [f'pip install {" ".join(pip)}'] if pip else []
    parts += [f"{whose}'s decode backend: {', '.join(backend)}"] if backend else []
    if codecs:
        parts.append(f"an OpenCV build with {whose}'s codecs ({', '.join(codecs)})")
    return f"decode with {whose}'s libraries: " + ('; '.join(parts) or 'see decoding: above')


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


def _canary(diffs: Sequence[Diff]) -> str:
    return canary_fix('A')


def _initial(diffs: Sequence[Diff]) -> str:
    return initial_fix('A')


def _gpu(diffs: Sequence[Diff]) -> str:
    parts = []
    if any(key.startswith('numerics.amp.') for key, _, _ in diffs):
        dtype = next((a for key, a, _ in diffs if key == 'numerics.amp.dtype'), None)
        amp = f'dtype {dtype}' if not absent(dtype) else 'no AMP'
        parts.append(f"train with A's AMP setting in optim_wrapper ({amp})")
    if any(not key.startswith('numerics.amp.') for key, _, _ in diffs):
        parts.append("train on A's GPU model and driver; other GPU models round otherwise, "
                     'so they end float-close at best')
    return '; '.join(parts)


def _versions(diffs: Sequence[Diff]) -> str:
    pip, other, remove = [], [], []
    for key, a, _ in diffs:
        name = key.rsplit('.', 1)[1]
        if key.startswith('numerics.libraries.'):
            other.append(f'{_LIBRARIES.get(name, name)} {a} (it comes with the torch build)')
        elif absent(a):
            remove.append(name)
        elif name in NOT_PIP:
            other.append(NOT_PIP[name].format(a))
        else:
            pip.append(f'{name}=={a}')
    parts = [f'pip install {" ".join(pip)}'] if pip else []
    parts += [f'pip uninstall {" ".join(remove)}'] if remove else []
    return "install A's versions (its run record lists them): " + '; '.join(parts + other)


def _flags(diffs: Sequence[Diff]) -> str:
    options, script = [], []
    for key, a, _ in diffs:
        flag = key.split('.', 1)[1]
        setting = FLAG_SETTINGS.get(flag)
        if setting is not None and assignment(setting, a) not in options:
            options.append(assignment(setting, a))
        elif setting is None:
            script.append(f'{flag}={a!r}')
    parts = [f"train B with A's values: --cfg-options {' '.join(options)}"] if options else []
    if script:
        parts.append(f"set PyTorch's flags as A had them ({', '.join(script)}) before "
                     'training (torch.backends)')
    return '; '.join(parts)


def _narrowest(values: Sequence[Any]) -> str:
    """The ``randomness.cpu_isa`` both kernel sets can run (``avx2`` if unknown)."""
    ranks = [i for value in values for i, (_, names) in enumerate(_ISA)
             if str(value).upper() in names]
    return _ISA[min(ranks)][0] if len(ranks) == 2 else 'avx2'


def _cpu(diffs: Sequence[Diff]) -> str:
    pair = next(((a, b) for key, a, b in diffs if key == 'numerics.cpu.capability'), ())
    isa = _narrowest(pair)
    return (f'pin one kernel set both CPUs run, in both configs: randomness.cpu_isa={isa} '
            '(mmrepro-train sets its variables and restarts itself)')


def _threads(diffs: Sequence[Diff]) -> str:
    count = next((a for key, a, _ in diffs if key == 'devices.torch_threads'), None)
    if absent(count):
        count = next((a for key, a, _ in diffs if key.startswith('env.')
                      and not absent(a)), 'N')
    return (f'pin the count in both configs: randomness.threads={count} (A\'s count), or '
            f'set OMP_NUM_THREADS={count} before training')


def _env(diffs: Sequence[Diff]) -> str:
    sets = [f'{key.split(".", 1)[1]}={a}' for key, a, _ in diffs if not absent(a)]
    unsets = [key.split('.', 1)[1] for key, a, _ in diffs if absent(a)]
    parts = [f'export {_counted(sets)}'] if sets else []
    parts += [f'unset {" ".join(unsets)}'] if unsets else []
    return 'set the variables as A had them: ' + '; '.join(parts)


#: (cause, what removes it), for every cause of :mod:`.diff_verdict`.
FIXES: Dict[str, Callable[[Sequence[Diff]], str]] = {
    'the initial weights': _initial,
    'the data files (fingerprint)': _files,
    'the decoded images (decode canary)': _canary,
    'the seed or randomness settings': _seed,
    'the process layout (ranks, per-rank batch, accumulation)': _layout,
    'the data loader or pipeline config': _config_keys,
    'the augmentation library or the generators the pipeline owns': _augmentation,
    'the config': _config_keys,
    'the code': _code,
    'the GPU, its driver or the AMP dtype': _gpu,
    'library versions': _versions,
    'the image decoders': decoders_fix,
    'PyTorch numerics flags': _flags,
    'the CPU kernel set': _cpu,
    'the intra-op thread count': _threads,
    'environment variables': _env,
}


def next_steps(found: Sequence[Tuple[str, List[str]]], diffs: Sequence[Diff],
               indent: str = '  ') -> List[str]:
    """One ``next:`` line per cause: the setting or command that removes it.

    Args:
        found: ``(cause, [record keys])`` as :func:`.diff_verdict.causes` gives them.
        diffs: The differing settings ``(key, value in A, value in B)``.
        indent: Put before each line.
    """
    values = {key: (a, b) for key, a, b in diffs}
    lines = []
    for cause, keys in found:
        fix: Optional[Callable[[Sequence[Diff]], str]] = FIXES.get(cause)
        entries = [(key, *values.get(key, (MISSING, MISSING))) for key in keys]
        text = fix(entries) if fix is not None else _config_keys(entries)
        lines.append(f'{indent}next: {cause}: {text}')
    return lines
