"""What removes each difference from a baseline that ``mmrepro-check --against`` names.

:func:`key_fix` gives, for one run record key that differs (with the baseline's value),
the setting or command that makes this run match the baseline: ``--cfg-options`` with
the baseline's value for config and ``randomness`` keys, ``randomness.threads`` or
``OMP_NUM_THREADS`` for the thread count, ``randomness.cpu_isa`` for the CPU kernel
set, ``pip install NAME==VERSION`` for a library, the variable to export or unset, and
where no setting can (another GPU model), what to train on instead. :func:`layout_fix`
does the same for the process layout.
"""
from __future__ import annotations

from typing import Any, Optional

from ..run.layout import Layout
from .diff_fixes import (
    FLAG_SETTINGS,
    NOT_PIP,
    absent,
    assignment,
    canary_fix,
    decoders_fix,
    edited_sources,
)

#: Thread variables and counts (what ``OMP_NUM_THREADS`` and the like set).
_THREADS = ('devices.torch_threads', 'randomness.threads', 'config.randomness.threads')


def option(key: str, value: Any) -> str:
    """``--cfg-options KEY=VALUE`` (:func:`~.diff_fixes.assignment`, quoted for a shell)."""
    return f'--cfg-options {assignment(key, value)}'


def _config(name: str, value: Any) -> str:
    if absent(value):
        return f'remove {name} from the config (the baseline does not set it)'
    return (f"set the baseline's value: {option(name, value)}, or check against the "
            "baseline's own config (leave out CONFIG)")


def key_fix(key: str, value: Any) -> str:
    """The setting or command that gives this run the baseline's ``value`` of run record
    ``key`` (one line, without ``fix:``)."""
    name = key.split('.', 1)[1] if '.' in key else key
    if key in _THREADS or key.startswith(('env.OMP_NUM_THREADS', 'env.MKL_NUM_THREADS')):
        count = 'N' if absent(value) else value
        return (f"pin the baseline's thread count: {option('randomness.threads', count)} "
                f'(or export OMP_NUM_THREADS={count} before the check and the training)')
    if key.startswith('data.'):
        return ("train on the baseline's data files (those named above differ): copy them "
                "from the baseline's machine, or point the config at the same files")
    if key == 'seed' or key.startswith('randomness.'):
        return _config('randomness.seed' if key == 'seed' else key, value)
    if key.startswith('config.'):
        return _config(name, value)
    if key == 'pipeline_generators' or key.startswith('pipeline_generators.'):
        return ("make the pipeline's transforms draw from np.random, random or torch's "
                'default generator (mmrepro keys them)')
    if key.startswith('versions.'):
        if absent(value):
            return f'pip uninstall {name} (the baseline trained without it)'
        return (NOT_PIP[name].format(value) if name in NOT_PIP
                else f'pip install {name}=={value}') + " (the baseline's version)"
    if key.startswith('numerics.libraries.'):
        return f"use the torch build with the baseline's {name.split('.', 1)[1]} ({value})"
    if key.startswith('numerics.amp.'):
        return f"train with the baseline's AMP setting in optim_wrapper ({key}: {value!r})"
    if key.startswith(('numerics.gpu.', 'devices.cuda')):
        return (f"train on the baseline's GPU model and driver ({key}: {value!r}): no "
                'setting makes another GPU round alike')
    if key.startswith('torch_flags.'):
        setting = FLAG_SETTINGS.get(name)
        if setting is not None:
            return f"set the baseline's value: {option(setting, value)}"
        return f"set PyTorch's {name} to {value!r} before training, as the baseline had it"
    if key.startswith('numerics.cpu.') or key == 'devices.cpu':
        return ("pin one kernel set both CPUs run: randomness.cpu_isa='avx2' in the shared "
                'config, and train the baseline again with it')
    if key.startswith('env.'):
        return f'unset {name}' if absent(value) else f'export {name}={value}'
    if key.startswith('decoding.canary'):
        return canary_fix('the baseline')
    if key.startswith('decoding.versions.'):
        return decoders_fix([(key, value, None)], 'the baseline')
    edited = edited_sources([key])
    if edited:
        return (f"run the sources the baseline ran: {edited} differs (reinstall the package "
                'or revert the edit; the run record holds each file\'s digest)')
    if key.startswith(('code.', 'audit')):
        return f"run the code the baseline ran ({key}: {value!r})"
    return f"give this run the baseline's {key}: {value!r}"


def layout_fix(baseline: Optional[Layout]) -> str:
    """How to train on the baseline's layout (one line, without ``fix:``)."""
    if baseline is None:
        return 'train on the layout the baseline was trained on (its run record has none)'
    launch = ('without --launcher' if baseline.world_size == 1 else
              f'with --launcher pytorch --nproc {baseline.world_size}')
    return (f"train on the baseline's layout, {launch} and --cfg-options "
            f'train_dataloader.batch_size={baseline.batch_size} '
            f'optim_wrapper.accumulative_counts={baseline.accumulation}')
