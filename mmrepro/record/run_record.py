"""The run record: everything needed to compare a run with a teammate's.

:func:`collect_run_record` gathers, at the start of training: the seed and
``randomness`` settings, world size and distributed backend, versions (python, torch,
CUDA, cuDNN, numpy, every installed OpenMMLab ``mm*`` package and albumentations), device
names, the generators the train pipeline owns (keyed or not), PyTorch's
numerics flags, the hardware and libraries that change rounding
(:mod:`mmrepro.record.numerics`: CPU model and kernel set, GPU capability and SMs, driver,
MKL, oneDNN, NCCL, AMP dtype), the environment variables that change results, a hash of the
resolved config and the config itself flattened to dotted keys (so two records can
name the keys that differ, e.g. ``optim_wrapper.optimizer.lr``), a fingerprint of
the training data (:mod:`mmrepro.record.fingerprint`: annotation files and every
sample's files), the image decoders and a decode canary (:mod:`mmrepro.record.decoding`),
the code (every source file of mmdet, mmengine, mmcv, mmrepro and the modules the config
imports: :mod:`mmrepro.record.code_digest`; the git commit and uncommitted changes), and
the files the model is initialised from (:mod:`mmrepro.record.initial_weights`), and
for a run whose ``train_step`` MMEngine compiles, the ``compile`` settings with the
inductor and dynamo settings in force (:func:`mmrepro.determinism.compile.compile_record`).
``ReproducibilityHook`` writes it to ``<log_dir>/run_record.json`` and into every
checkpoint's ``meta['run_record']``; ``tools/repro_diff.py`` compares two of them.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import os.path as osp
import platform
import re
import sys
from importlib import metadata
from typing import Any, Dict, Iterable, List, Optional, Tuple

import torch

from ..determinism.compile import compile_options, compile_record
from ..determinism.cpu import THREAD_ENV
from .code_digest import code_fingerprint, import_digests
from .decoding import decoding_record
from .fingerprint import data_fingerprint
from .numerics import numerics_record

#: Environment variables that change numerical results or their reproducibility.
#: (The CPU kernel variables are the numerics section's: :data:`mmrepro.determinism.cpu.ISA_ENV`.)
RELEVANT_ENV = ('CUBLAS_WORKSPACE_CONFIG', 'PYTHONHASHSEED', 'CUDA_VISIBLE_DEVICES',
                *THREAD_ENV, 'KMP_DETERMINISTIC_REDUCTION',
                'NCCL_ALGO', 'NCCL_PROTO', 'NVIDIA_TF32_OVERRIDE',
                'TORCH_ALLOW_TF32_CUBLAS_OVERRIDE', 'TORCH_CUDNN_V8_API_ENABLED',
                'CUDA_LAUNCH_BLOCKING')
#: Packages named in every record; every installed OpenMMLab (``mm*``) distribution
#: is added (mmsegmentation, mmpretrain...).
PACKAGES = ('torch', 'numpy', 'mmengine', 'mmcv', 'mmrepro')
#: Augmentation libraries named in a record where installed (their draws are keyed or
#: named by :mod:`mmrepro.data.pipeline_rngs`; their version changes what they draw).
AUGMENTATION_PACKAGES = ('albumentations',)
RECORD_NAME = 'run_record.json'
#: The record of a run that only evaluates (``mmrepro-test``, ``Runner.test()``): its own
#: name, so that a training work dir's newest record stays the training run's.
TEST_RECORD_NAME = 'test_record.json'
#: Version of the record's layout (``record_version``).
RECORD_VERSION = 1
#: Config keys that only name places; left out of :func:`config_hash`.
LOCATION_KEYS = ('work_dir', 'launcher', 'resume', 'load_from')
#: Record keys that name places or times, not settings; :func:`diff_records` skips them.
IGNORED_KEYS = ('timestamp', 'work_dir', 'argv', 'config.work_dir')
#: Nested record keys that name places (an initial checkpoint's name as given, the file
#: read and how the name was resolved: its sha256 says what it is; the directory of a
#: module the config imports).
IGNORED_FIELDS = re.compile(
    r'^(initial\.files\..+\.(name|resolved|how)|code\.imports\..+\.origin)$')
#: Record sections that are evidence, not settings (the weights digests, the
#: evaluations, a test run's checkpoint, how the checkpoint loaded was verified): compared by
#: ``repro_diff`` on their own, skipped by :func:`diff_records`.
EVIDENCE_SECTIONS = ('weights', 'evaluation', 'checkpoint', 'checkpoint_verification')
#: Keys every record has (:func:`load_run_record` checks them).
REQUIRED_KEYS = ('seed', 'world_size', 'versions', 'config_sha256')
#: Stands for a key one of two records lacks (:func:`diff_records`).
MISSING = '<missing>'
_ADDRESS = re.compile(r' at 0x[0-9a-fA-F]+')


def versions() -> Dict[str, Optional[str]]:
    """Versions of python, torch, numpy, every installed ``mm*`` package, albumentations
    where installed, CUDA and cuDNN.

    mmrepro used from a checkout (not pip-installed) reports its own ``__version__``.
    """
    out: Dict[str, Optional[str]] = {'python': platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    for name in AUGMENTATION_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    for dist in metadata.distributions():
        name = (dist.metadata['Name'] or '').lower().replace('_', '-')
        if name.startswith('mm') and name not in out:
            out[name] = dist.version
    if out['mmrepro'] is None:
        from ..version import __version__
        out['mmrepro'] = __version__
    out['cuda'] = torch.version.cuda
    out['cudnn'] = (str(torch.backends.cudnn.version())
                    if torch.backends.cudnn.is_available() else None)
    return out


def devices() -> Dict[str, Any]:
    """The host, the CPU and every visible CUDA device, by name."""
    cuda = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available() else [])
    return dict(host=platform.node(), platform=platform.platform(),
                cpu=platform.processor() or platform.machine(), cpu_count=os.cpu_count(),
                cuda=cuda, torch_threads=torch.get_num_threads())


def torch_flags() -> Dict[str, Any]:
    """PyTorch settings that change numerical results (TF32, cuDNN, determinism)."""
    fill = getattr(getattr(torch.utils, 'deterministic', None),
                   'fill_uninitialized_memory', None)
    return dict(
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
        fill_uninitialized_memory=fill,
        cudnn_enabled=torch.backends.cudnn.enabled,
        cudnn_benchmark=torch.backends.cudnn.benchmark,
        cudnn_deterministic=torch.backends.cudnn.deterministic,
        cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
        matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32,
        float32_matmul_precision=torch.get_float32_matmul_precision(),
    )


def config_hash(cfg_text: str) -> str:
    """sha256 of the resolved config text, without the keys that only name places."""
    kept = [line for line in cfg_text.splitlines() if not line.startswith(LOCATION_KEYS)]
    return hashlib.sha256('\n'.join(kept).encode()).hexdigest()


def _text(value: Any) -> str:
    """``repr`` without memory addresses (functions and classes by qualified name)."""
    if isinstance(value, type) or callable(value) and hasattr(value, '__qualname__'):
        return f'{getattr(value, "__module__", "?")}.{value.__qualname__}'
    return _ADDRESS.sub('', repr(value))


def flatten_config(cfg: Any, prefix: str = '') -> Dict[str, str]:
    """A config as ``{dotted key: repr(value)}``, e.g. ``optim_wrapper.optimizer.lr``.

    Dicts are walked into; lists and tuples only when they hold dicts (pipelines,
    hooks: ``train_pipeline.2.prob``), otherwise they are one value (``(1333, 800)``).

    Args:
        cfg: An MMEngine ``Config``, a ``ConfigDict`` or a plain dict.
        prefix: Prefix of every key (used in recursion).

    Returns:
        dict: Keys in config order; values are ``repr`` texts.
    """
    if hasattr(cfg, 'to_dict'):
        cfg = cfg.to_dict()
    out: Dict[str, str] = {}
    if isinstance(cfg, dict):
        items: Iterable = cfg.items()
    elif isinstance(cfg, (list, tuple)) and any(isinstance(v, dict) for v in cfg):
        items = enumerate(cfg)
    else:
        out[prefix] = _text(cfg)
        return out
    empty = True
    for key, value in items:
        empty = False
        out.update(flatten_config(value, f'{prefix}.{key}' if prefix else str(key)))
    if empty and prefix:
        out[prefix] = _text(cfg)
    return out


def environment_facts(optim_wrapper: Any = None) -> Dict[str, Any]:
    """The record's sections that describe this process's machine and software:
    ``versions``, ``devices``, ``env``, ``torch_flags``, ``numerics`` and ``code``.

    Args:
        optim_wrapper: The run's optimizer wrapper or its config (for ``numerics.amp``).
    """
    return dict(versions=versions(), devices=devices(),
                env={k: os.environ.get(k) for k in RELEVANT_ENV}, torch_flags=torch_flags(),
                numerics=numerics_record(optim_wrapper), code=code_fingerprint())


def collect_run_record(runner: Any, fingerprint: str = 'labels',
                       kind: str = 'train') -> Dict[str, Any]:
    """The record of ``runner``'s run (settings from ``Runner.set_randomness``).

    Args:
        runner: The Runner.
        fingerprint: How sample files are fingerprinted
            (:data:`mmrepro.record.fingerprint.MODES`). Defaults to ``'labels'``.
        kind: ``train``, or ``val``/``test`` for a run that only evaluates
            (``Runner.val()``/``test()``): its record says so in ``run`` and fingerprints
            the evaluated data instead of the training data.
    """
    from ..rng.seeding import get_world_size
    from ..run.state import find_state
    state = find_state(runner)
    settings = state.settings if state is not None else None
    seed, randomness = (settings.seed, settings.to_dict()) if settings is not None else (None, {})
    backend = (torch.distributed.get_backend()
               if torch.distributed.is_available() and torch.distributed.is_initialized()
               else None)
    facts = environment_facts(getattr(runner, 'optim_wrapper', None))
    code = facts.pop('code')  # after the config, as records have always listed it
    code['imports'] = import_digests(runner.cfg.get('custom_imports'))
    record = dict(
        record_version=RECORD_VERSION, timestamp=getattr(runner, 'timestamp', None),
        work_dir=getattr(runner, 'work_dir', None),
        seed=seed, randomness=randomness, world_size=get_world_size(),
        backend=backend, launcher=runner.launcher, **facts,
        config_sha256=config_hash(runner.cfg.pretty_text),
        config=flatten_config(runner.cfg),
        code=code,
        argv=sys.argv,
        layout=layout_record(state),
        ddp=dict(state.ddp) if state is not None else {},
        audit=[dict(entry) for entry in state.audit] if state is not None else [],
    )
    if state is not None and state.pipeline_generators:  # older records have no such key
        record['pipeline_generators'] = list(state.pipeline_generators)
    if kind != 'train':  # older records have no such key: training runs
        record['run'] = kind
    elif compile_options(runner.cfg.get('compile')) is not None:  # none: an eager run
        record['compile'] = compile_record(runner.cfg.get('compile'),
                                           settings is None or settings.deterministic)
    try:
        dataset = getattr(runner, f'{kind}_dataloader').dataset
        record['data'] = data_fingerprint(dataset, fingerprint)
        record['decoding'] = decoding_record(dataset)
    except Exception as err:  # a Runner without such data
        record['data'] = dict(error=f'{type(err).__name__}: {err}')
    return record


def layout_record(state: Any) -> Dict[str, Any]:
    """The train loader's layout from the run's state (empty before it is built)."""
    layout = getattr(state, 'layout', None)
    if layout is None:
        return {}
    return dict(batch_size=layout.batch_size, world_size=layout.world_size,
                accumulative_counts=layout.accumulation, global_batch=layout.global_batch,
                global_stream=bool(state.global_stream))


def record_name(record: Dict[str, Any]) -> str:
    """The file a record is written to: :data:`RECORD_NAME` for training,
    :data:`TEST_RECORD_NAME` for a run that only evaluates."""
    return TEST_RECORD_NAME if record.get('run', 'train') != 'train' else RECORD_NAME


def write_run_record(runner: Any, record: Dict[str, Any]) -> str:
    """Write ``record`` as JSON into the run's log dir; return the path."""
    path = osp.join(runner.log_dir, record_name(record))
    with open(path, 'w') as f:
        json.dump(record, f, indent=2, default=str)
    return path


# ------------------------------------------------------------------ reading records
class RunRecordError(ValueError):
    """A run record is missing, unreadable or not a run record."""


def find_log_dir(path: str, filename: str = RECORD_NAME) -> str:
    """The log dir holding ``filename``: ``path`` itself or its newest timestamp dir.

    Args:
        path: A work dir (``work_dir/<timestamp>/run_record.json`` inside) or a log dir.
        filename: The file that marks a log dir.

    Raises:
        RunRecordError: ``path`` does not exist or has no such log dir.
    """
    if not osp.exists(path):
        raise RunRecordError(f'{path}: no such file or directory')
    if osp.isfile(osp.join(path, filename)):
        return path
    found = sorted(glob.glob(osp.join(glob.escape(path), '*', filename)))
    if not found:
        raise RunRecordError(
            f'{path}: no {filename} in it or in a timestamped log dir under it '
            f'({osp.join(path, "<timestamp>", filename)}); ReproducibilityHook writes it '
            'when training starts')
    return osp.dirname(found[-1])


def load_run_record(path: str) -> Tuple[Dict[str, Any], str]:
    """Read a run record from a work dir, a log dir, a ``run_record.json`` or a checkpoint.

    Args:
        path: A work dir (its newest log dir is used), a log dir, the JSON file, or a
            ``.pth`` checkpoint (its ``meta['run_record']``).

    Returns:
        tuple: ``(record, source)`` where ``source`` is the file it was read from.

    Raises:
        RunRecordError: The record is missing, not valid JSON, not an object or lacks
            :data:`REQUIRED_KEYS`; the message names the file and what is wrong.
    """
    if osp.isfile(path) and path.endswith(('.pth', '.pt', '.ckpt')):
        from ..resume.checkpoint_io import safe_load
        try:
            checkpoint = safe_load(path, mmap=True)
        except Exception as err:
            raise RunRecordError(f'{path}: cannot load the checkpoint '
                                 f'({type(err).__name__}: {err})') from None
        record = (checkpoint.get('meta') or {}).get('run_record') \
            if isinstance(checkpoint, dict) else None
        if record is None:
            raise RunRecordError(f"{path}: the checkpoint has no meta['run_record'] "
                                 '(not written with ReproducibilityHook?)')
        source = path
    else:
        source = path if osp.isfile(path) else osp.join(find_log_dir(path), RECORD_NAME)
        try:
            with open(source, encoding='utf-8') as f:
                record = json.load(f)
        except json.JSONDecodeError as err:
            raise RunRecordError(f'{source}: not valid JSON ({err.msg} at line {err.lineno} '
                                 f'column {err.colno}); the run record is corrupted') from None
        except (OSError, UnicodeDecodeError) as err:
            raise RunRecordError(f'{source}: cannot read the run record ({err})') from None
    if not isinstance(record, dict):
        raise RunRecordError(f'{source}: a run record is a JSON object, got '
                             f'{type(record).__name__}')
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise RunRecordError(f'{source}: not a complete run record, missing key(s): '
                             f'{", ".join(missing)}')
    return record, source


def _flatten_record(record: Dict[str, Any], prefix: str = '') -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in record.items():
        name = f'{prefix}.{key}' if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(_flatten_record(value, name))
        else:
            out[name] = value
    return out


def diff_records(a: Dict[str, Any], b: Dict[str, Any]) -> List[Tuple[str, Any, Any]]:
    """Every setting that differs between two run records.

    Nested sections are compared key by key (``versions.torch``,
    ``config.optim_wrapper.optimizer.lr``, ``data.ann_files.annotations/train.json``);
    :data:`IGNORED_KEYS` and :data:`EVIDENCE_SECTIONS` are skipped.

    Returns:
        list: ``(dotted key, value in a, value in b)``, in ``a``'s key order then
        ``b``'s; a key missing on one side has the value :data:`MISSING`.
    """
    flat_a, flat_b = _flatten_record(a), _flatten_record(b)
    keys = list(flat_a) + [k for k in flat_b if k not in flat_a]
    out = []
    for key in keys:
        if key in IGNORED_KEYS or key.split('.', 1)[0] in EVIDENCE_SECTIONS or \
                IGNORED_FIELDS.match(key):
            continue
        value_a, value_b = flat_a.get(key, MISSING), flat_b.get(key, MISSING)
        if json.dumps(value_a, default=str) != json.dumps(value_b, default=str):
            out.append((key, value_a, value_b))
    return out
