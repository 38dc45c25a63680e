"""The checkpoint a run resumes or loads, checked before anything is built or written.

MMEngine opens ``load_from`` (or, resuming, the checkpoint ``last_checkpoint`` names)
only once the Runner has made the work dir, its log and the run record, and a wrong file
then ends in a traceback. :func:`check_checkpoint_inputs` reads what it can of the file
first (memory-mapped) and raises a :class:`~mmrepro.run.config.ConfigError` naming the
argument, the file, what was expected and the fix: the file is missing or a directory,
is not a PyTorch checkpoint, cannot be read, does not match the digests saved in it
(:mod:`.verification`: the weights, and resuming everything a resume restores; unless
``randomness.verify_checkpoints=False``), or (resuming) is not a training checkpoint or
holds weights that do not fit the config's model (another detector's checkpoint).
"""
from __future__ import annotations

import ast
import copy
import glob
import os.path as osp
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..run.config import ConfigError
from .checkpoint_io import CheckpointLoadError, peek
from .verification import enforce, verify_file

#: What a checkpoint needs for MMEngine's ``Runner.resume`` (besides ``meta``).
TRAINING_KEYS = ('state_dict', 'message_hub')


def check_checkpoint_inputs(cfg: Any, resume_arg: Optional[str] = None) -> None:
    """Check the checkpoint the config resumes or loads, as the Runner would open it.

    Args:
        cfg: The config, the CLI applied (``resume``, ``load_from``, ``work_dir``).
        resume_arg: ``--resume`` as given (``'auto'`` alone, a path, or None): the
            messages name ``--resume`` where the user gave it, else the config key.

    Raises:
        ConfigError: The file is missing, a directory, not a checkpoint, unreadable or
            does not match its digests; resuming, it is not a training checkpoint or
            does not fit the model.
    """
    resume = bool(cfg.get('resume', False))
    load_from = cfg.get('load_from')
    named_by = None
    if resume and not load_from:
        path = last_checkpoint(str(cfg.get('work_dir')))
        if path is None:
            return  # MMEngine trains from scratch, and says so
        named_by = osp.join(str(cfg.get('work_dir')), 'last_checkpoint')
        arg = '--resume' if resume_arg == 'auto' else 'resume=True'
    elif load_from:
        path = str(load_from)
        arg = '--resume' if resume and resume_arg not in (None, 'auto') else 'load_from'
    else:
        return
    if '://' in path:
        return  # a URL: MMEngine downloads it
    if named_by is not None and not osp.exists(path):
        raise ConfigError(f'{arg}: {named_by} names {path!r}, which does not exist; expected '
                          'the latest checkpoint of the work dir: give the one to resume, '
                          'e.g. --resume WORK_DIR/epoch_N.pth')
    checkpoint = _read(path, arg, resume)
    _verify(path, checkpoint, arg, resume, cfg.get('randomness'))
    if resume:
        _check_training_checkpoint(checkpoint, path, arg)
        _check_fits_model(checkpoint, cfg, path, arg)


def last_checkpoint(work_dir: str) -> Optional[str]:
    """The checkpoint auto-resume takes (the file ``last_checkpoint`` names it), if any."""
    record = osp.join(work_dir, 'last_checkpoint')
    if not osp.isfile(record):
        return None
    with open(record, encoding='utf-8', errors='replace') as f:
        path = f.read().strip()
    return path or None


def check_checkpoint_file(path: str, arg: str, fix: str,
                          randomness: Optional[Mapping[str, Any]] = None,
                          resuming: bool = False) -> None:
    """Check that a checkpoint to load (a local path) is a readable checkpoint file.

    Args:
        path: The checkpoint (a URL is not checked: MMEngine downloads it).
        arg: How the user gave it, for the message (e.g. ``CHECKPOINT``).
        fix: What to do about a wrong path, for the message.
        randomness: The run's ``randomness`` (validated): where given, the file is
            verified against its digests too, as ``verify_checkpoints`` says.
        resuming: Verify everything a resume restores, not the weights alone.

    Raises:
        ConfigError: The file is missing, a directory, unreadable, not a checkpoint, or
            (``randomness`` given) does not match its digests.
    """
    if '://' not in path:
        checkpoint = _read(path, arg, False, fix)
        if randomness is not None:
            _verify(path, checkpoint, arg, resuming, randomness)


def _verify(path: str, checkpoint: Dict[str, Any], arg: str, resuming: bool,
            randomness: Optional[Mapping[str, Any]]) -> None:
    """Refuse a checkpoint that does not match its digests, unless the run's
    ``randomness.verify_checkpoints`` is False (the Runner then says so)."""
    allow = (randomness or {}).get('verify_checkpoints', True) is False
    try:
        enforce(verify_file(path, resuming, checkpoint), allow, 'nothing was written')
    except CheckpointLoadError as err:
        raise ConfigError(_named(err, path, arg)) from None


def _named(err: CheckpointLoadError, path: str, arg: str) -> str:
    """``err``'s message, naming the file as the user gave it (``--resume 'x.pth' ...``)."""
    text, prefix = str(err), f'Checkpoint {osp.expanduser(path)!r} '
    return f'{arg} {path!r} {text[len(prefix):]}' if text.startswith(prefix) else \
        f'{arg} {path!r}: {text}'



def _read(path: str, arg: str, resume: bool, fix: Optional[str] = None) -> Dict[str, Any]:
    """The checkpoint at ``path``, peeked (tensors memory-mapped)."""
    fix = fix or ('give the checkpoint to resume, e.g. --resume WORK_DIR/epoch_N.pth, or '
                  '--resume alone to resume the latest one of --work-dir' if resume else
                  'check the path given to load_from')
    if osp.isdir(path):
        found = checkpoints_in(path)
        if found and resume:
            fix = (f'give one of its checkpoints (--resume {found[-1]}), or --resume alone '
                   f'with --work-dir {path} to resume its latest')
        elif found:
            fix = f'give one of its checkpoints (load_from={found[-1]})'
        holds = '' if found else ' holding no checkpoint'
        raise ConfigError(f'{arg} {path!r} is a directory{holds}, expected a checkpoint file '
                          f'(.pth); {fix}')
    if not osp.isfile(path):
        raise ConfigError(f'{arg} {path!r}: no such file, expected a checkpoint file (.pth); '
                          f'{fix}')
    try:
        checkpoint = peek(path)
    except CheckpointLoadError as err:
        raise ConfigError(_named(err, path, arg)) from None
    if not isinstance(checkpoint, Mapping):
        raise ConfigError(f'{arg} {path!r} holds a {type(checkpoint).__name__}, expected a '
                          f'checkpoint (a dict with a state_dict); {fix}')
    return dict(checkpoint)


def checkpoints_in(directory: str) -> List[str]:
    """The ``.pth`` files of ``directory``, oldest first, the one ``last_checkpoint``
    names last."""
    found = sorted(glob.glob(osp.join(glob.escape(directory), '*.pth')),
                   key=lambda p: (osp.getmtime(p), p))
    last = last_checkpoint(directory)
    if last in found:
        found.remove(last)
        found.append(last)
    return found


def _check_training_checkpoint(checkpoint: Mapping[str, Any], path: str, arg: str) -> None:
    """Resuming needs what MMEngine's ``CheckpointHook`` saves, not weights alone."""
    meta = checkpoint.get('meta')
    lacks = [key for key in TRAINING_KEYS if key not in checkpoint]
    if not isinstance(meta, Mapping) or not all(
            isinstance(meta.get(key), int) for key in ('epoch', 'iter')):
        lacks.append("meta['epoch'] and meta['iter']")
    if lacks:
        raise ConfigError(
            f'{arg} {path!r} lacks {", ".join(lacks)}, so it is not a training checkpoint '
            'that can be resumed; expected one that MMEngine\'s CheckpointHook saved: to '
            f'start a new run from its weights, pass --cfg-options load_from={path} '
            'without --resume')


def _check_fits_model(checkpoint: Mapping[str, Any], cfg: Any, path: str, arg: str) -> None:
    """The checkpoint's weights have the names and shapes of the config's model."""
    state = checkpoint.get('state_dict')
    model = _model_shapes(cfg)
    if not isinstance(state, Mapping) or model is None:
        return  # the model cannot be built here: the Runner builds it and says why
    saved = {k: tuple(v.shape) for k, v in state.items() if hasattr(v, 'shape')}
    missing = [k for k in model if k not in saved]
    extra = [k for k in saved if k not in model]
    other = [k for k in model if k in saved and saved[k] != model[k]]
    if not (missing or extra or other):
        return
    problems = []
    if missing:
        problems.append(f"{len(missing)} of the model's {len(model)} weights are not in "
                        f'it (e.g. {missing[0]!r})')
    if extra:
        problems.append(f'{len(extra)} of its {len(saved)} are not in the model '
                        f'(e.g. {extra[0]!r})')
    if other:
        problems.append(f'{len(other)} have another shape (e.g. {other[0]!r}: '
                        f'{list(saved[other[0]])} in it, {list(model[other[0]])} in the '
                        'model)')
    kinds = _model_type(cfg.get('model'))
    written = _saved_model_type(checkpoint.get('meta'))
    names = [kinds] if kinds else []
    if written and written != kinds:
        names.append(f"the checkpoint's is {written}")
    whose = f" ({'; '.join(names)})" if names else ''
    raise ConfigError(
        f'{arg} {path!r} does not fit this config\'s model{whose}: {"; ".join(problems)}; '
        'expected a checkpoint of this config: resume with the config that wrote it, or '
        f'pass --cfg-options load_from={path} without --resume to start a new run from its '
        'weights')


def _model_shapes(cfg: Any) -> Optional[Dict[str, Tuple[int, ...]]]:
    """Name -> shape of every entry of the config's model's ``state_dict`` (None where
    the model cannot be built: :func:`build_offline`)."""
    model = build_offline(cfg)
    return None if model is None else {k: tuple(v.shape)
                                       for k, v in model.state_dict().items()}


def build_offline(cfg: Any) -> Any:
    """The config's model, built without weights: for its weight names and shapes.

    Built from a copy of ``cfg.model`` (detectors edit the dicts they are built from) on
    the meta device (nothing allocated), else on the CPU, with torch's random state put
    back after; None where the model cannot be built.
    """
    import torch
    from mmengine.registry import MODELS, DefaultScope
    for device in ('meta', 'cpu'):
        try:
            with torch.device(device), torch.random.fork_rng(devices=[]), \
                    DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
                return MODELS.build(copy.deepcopy(cfg.get('model')))
        except Exception:  # the Runner builds the model again and reports what fails
            continue
    return None


def _model_type(model: Any) -> Optional[str]:
    """``type`` of a model config (a registry name, or the class's name)."""
    kind = model.get('type') if isinstance(model, Mapping) else None
    return kind if isinstance(kind, str) else getattr(kind, '__name__', None)


def _saved_model_type(meta: Any) -> Optional[str]:
    """``model.type`` of the config text MMEngine keeps in a checkpoint's ``meta['cfg']``.

    Read with ``ast`` (a literal, never run): the checkpoint may come from anywhere.
    """
    text = meta.get('cfg') if isinstance(meta, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == 'model' and isinstance(node.value, ast.Call)):
            for keyword in node.value.keywords:
                if keyword.arg == 'type' and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
    return None
