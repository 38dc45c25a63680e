"""What gives a run another run's software and numerics: one line per cause, two ways.

The causes that lie in the machine rather than in the config or the data: the GPU and
its AMP setting, library versions, the image decoders, PyTorch's numerics flags, the
CPU kernel set, the thread count and other environment variables. Each has two fixers,
which :data:`mmrepro.checks.fixes.FIXES` pairs: ``<cause>_fix(diffs)`` gives run B every
value run A holds (``mmrepro-diff``), ``<cause>_of(key, value)`` gives this run the
baseline's value of one key (``mmrepro-check --against``). Values are the ones the run
records hold. :func:`assignment` and :func:`option` write a recorded value as a
``--cfg-options`` entry, for these fixers and :mod:`.fixes`' alike.
"""
from __future__ import annotations

import re
from typing import Any, List, Sequence, Tuple

from ..record.run_record import MISSING
from .causes import INTEROP_THREADS

Diff = Tuple[str, Any, Any]
#: Assignments shown in one line; the rest are counted (every key is listed above it).
SHOWN = 4
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
#: pip's names of the decoding libraries a run record lists under ``decoding.versions``.
DECODER_PIP = {'opencv': 'opencv-python', 'pillow': 'Pillow', 'turbojpeg': 'PyTurboJPEG'}


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


def option(key: str, value: Any) -> str:
    """``--cfg-options KEY=VALUE`` (:func:`assignment`, quoted for a shell)."""
    return f'--cfg-options {assignment(key, value)}'


def counted(items: List[str], sep: str = ' ') -> str:
    """The first :data:`SHOWN` items, and how many more (listed above)."""
    shown = sep.join(items[:SHOWN])
    return shown + (f' (and {len(items) - SHOWN} more, listed above)'
                    if len(items) > SHOWN else '')


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


def other_of(key: str, value: Any) -> str:
    """A key no setting or command gives the baseline's value of."""
    return f"give this run the baseline's {key}: {value!r}"


def decoders_of(key: str, value: Any) -> str:
    """What gives this run the baseline's image decoders."""
    if key.startswith('decoding.versions.'):
        return decoders_fix([(key, value, None)], 'the baseline')
    return other_of(key, value)


def gpu_fix(diffs: Sequence[Diff]) -> str:
    """What gives run B run A's GPU and AMP setting."""
    parts = []
    if any(key.startswith('numerics.amp.') for key, _, _ in diffs):
        dtype = next((a for key, a, _ in diffs if key == 'numerics.amp.dtype'), None)
        amp = f'dtype {dtype}' if not absent(dtype) else 'no AMP'
        parts.append(f"train with A's AMP setting in optim_wrapper ({amp})")
    if any(not key.startswith('numerics.amp.') for key, _, _ in diffs):
        parts.append("train on A's GPU model and driver; other GPU models round otherwise, "
                     'so they end float-close at best')
    return '; '.join(parts)


def gpu_of(key: str, value: Any) -> str:
    """What gives this run the baseline's GPU or AMP setting."""
    if key.startswith('numerics.amp.'):
        return f"train with the baseline's AMP setting in optim_wrapper ({key}: {value!r})"
    return (f"train on the baseline's GPU model and driver ({key}: {value!r}): no "
            'setting makes another GPU round alike')


def versions_fix(diffs: Sequence[Diff]) -> str:
    """What installs run A's library versions."""
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


def versions_of(key: str, value: Any) -> str:
    """What installs the baseline's version of a ``versions.`` or ``numerics.libraries.``
    key."""
    name = key.split('.', 1)[1]
    if key.startswith('numerics.libraries.'):
        return f"use the torch build with the baseline's {name.split('.', 1)[1]} ({value})"
    if absent(value):
        return f'pip uninstall {name} (the baseline trained without it)'
    return (NOT_PIP[name].format(value) if name in NOT_PIP
            else f'pip install {name}=={value}') + " (the baseline's version)"


def flags_fix(diffs: Sequence[Diff]) -> str:
    """What sets PyTorch's numerics flags as run A had them."""
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


def flags_of(key: str, value: Any) -> str:
    """What sets one of PyTorch's numerics flags as the baseline had it."""
    name = key.split('.', 1)[1]
    setting = FLAG_SETTINGS.get(name)
    if setting is not None:
        return f"set the baseline's value: {option(setting, value)}"
    return f"set PyTorch's {name} to {value!r} before training, as the baseline had it"


def _narrowest(values: Sequence[Any]) -> str:
    """The ``randomness.cpu_isa`` both kernel sets can run (``avx2`` if unknown)."""
    ranks = [i for value in values for i, (_, names) in enumerate(_ISA)
             if str(value).upper() in names]
    return _ISA[min(ranks)][0] if len(ranks) == 2 else 'avx2'


def cpu_fix(diffs: Sequence[Diff]) -> str:
    """What pins one CPU kernel set for both runs."""
    pair = next(((a, b) for key, a, b in diffs if key == 'numerics.cpu.capability'), ())
    isa = _narrowest(pair)
    return (f'pin one kernel set both CPUs run, in both configs: randomness.cpu_isa={isa} '
            '(mmrepro-train sets its variables and restarts itself)')


def cpu_of(key: str, value: Any) -> str:
    """What pins one CPU kernel set for this run and the baseline."""
    return ("pin one kernel set both CPUs run: randomness.cpu_isa='avx2' in the shared "
            'config, and train the baseline again with it')


def threads_fix(diffs: Sequence[Diff]) -> str:
    """What pins run A's thread count in both runs."""
    count = next((a for key, a, _ in diffs if key == 'devices.torch_threads'), None)
    if absent(count):
        count = next((a for key, a, _ in diffs if key.startswith('env.')
                      and not absent(a)), 'N')
    return (f'pin the count in both configs: randomness.threads={count} (A\'s count), or '
            f'set OMP_NUM_THREADS={count} before training')


def threads_of(key: str, value: Any) -> str:
    """What pins the baseline's thread count (the inter-op count: the CPU's numerics)."""
    if key == INTEROP_THREADS:
        return cpu_of(key, value)
    count = 'N' if absent(value) else value
    return (f"pin the baseline's thread count: {option('randomness.threads', count)} "
            f'(or export OMP_NUM_THREADS={count} before the check and the training)')


def env_fix(diffs: Sequence[Diff]) -> str:
    """What sets the environment variables as run A had them."""
    sets = [f'{key.split(".", 1)[1]}={a}' for key, a, _ in diffs if not absent(a)]
    unsets = [key.split('.', 1)[1] for key, a, _ in diffs if absent(a)]
    parts = [f'export {counted(sets)}'] if sets else []
    parts += [f'unset {" ".join(unsets)}'] if unsets else []
    return 'set the variables as A had them: ' + '; '.join(parts)


def env_of(key: str, value: Any) -> str:
    """What sets one environment variable as the baseline had it."""
    name = key.split('.', 1)[1]
    return f'unset {name}' if absent(value) else f'export {name}={value}'

