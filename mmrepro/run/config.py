"""A config and its ``--cfg-options``, loaded for the tools with one-line errors.

Every tool that takes a config and ``--cfg-options`` (``train``, ``check_repro``,
``support_matrix``) and every check loads it here, so a bad input reads the same
everywhere: a :class:`ConfigError` whose message is one line naming the key, the value,
what was expected and how to fix it. The tools print it as ``<tool>: error: <message>``
and exit with status 2, before anything is built or written
(:func:`mmrepro.cli.config_args.report`).
"""
from __future__ import annotations

import ast
import contextlib
import os
import os.path as osp
import warnings
from typing import Any, ContextManager, Dict, Optional, Sequence, Tuple

#: Variables that give the number of processes a launcher starts, by launcher.
WORLD_SIZE_VARIABLES = {'pytorch': 'WORLD_SIZE', 'slurm': 'SLURM_NTASKS',
                        'mpi': 'OMPI_COMM_WORLD_SIZE'}


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) folded into one space."""
    return ' '.join(str(text).split())


class ConfigError(ValueError):
    """A bad argument or config; its message is one line (whitespace runs are folded)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def parse_cfg_options(options: Sequence[str]) -> Dict[str, Any]:
    """``KEY=VALUE`` strings parsed as MMEngine's ``DictAction`` parses them.

    Raises:
        ConfigError: An option has no ``=``, no key, or a value that does not parse.
    """
    from mmengine.config import DictAction
    parsed: Dict[str, Any] = {}
    for option in options:
        key, sep, value = option.partition('=')
        if not sep or not key:
            fix = (f'no value): write it as {key}=VALUE' if key else
                   'no key): write it as KEY=VALUE, e.g. randomness.seed=0')
            raise ConfigError(f'--cfg-options expects KEY=VALUE pairs, got {option!r} ({fix}')
        try:
            parsed[key] = DictAction._parse_iterable(value)
        except Exception as err:  # MMEngine asserts on unbalanced brackets
            raise ConfigError(f'--cfg-options {key}: cannot parse the value {value!r} '
                              f'({err}); expected a number, True/False/None, a string or a '
                              'bracketed list such as [1,2]') from None
    return parsed


def load_config(path: str, options: Sequence[str] = (),
                lock: Optional[ContextManager] = None) -> Any:
    """The config at ``path`` with the ``--cfg-options`` strings ``options`` merged in.

    Args:
        path: The config file.
        options: ``KEY=VALUE`` strings, as given on the command line.
        lock: Held while MMEngine parses the file (it edits ``sys.path`` and
            ``sys.modules``), for callers that load from several threads.

    Raises:
        ConfigError: The file is missing or does not load (its syntax or its
            ``_base_`` files), or an option is malformed or cannot be merged.
    """
    from mmengine.config import Config
    if not osp.isfile(path):
        raise ConfigError(f'config file not found: {path!r}; expected the path of a config '
                          'file, check its spelling and the working directory')
    parsed = parse_cfg_options(options)  # before the (slower) config parse
    try:
        with lock or contextlib.nullcontext(), warnings.catch_warnings():
            # MMEngine resolves ``package::`` bases through the deprecated pkg_resources:
            # setuptools' notice about it says nothing about the config.
            warnings.filterwarnings('ignore', message='pkg_resources is deprecated')
            cfg = Config.fromfile(path)
    except SyntaxError as err:
        where, text = _syntax(err, path)
        raise ConfigError(f'config {path!r} is not valid Python: {text}; fix the file '
                          f'(python -m py_compile {where} shows the line)') from None
    except Exception as err:
        raise ConfigError(f'cannot load config {path!r}: {type(err).__name__}: '
                          f'{str(err).rstrip(".")}; fix the config or the _base_ files it '
                          'inherits') from None
    for key, value in parsed.items():
        try:
            cfg.merge_from_dict({key: value})
        except Exception as err:
            raise ConfigError(f'--cfg-options {key}={value!r} cannot be merged into '
                              f'{path!r}: {type(err).__name__}: {str(err).rstrip(".")}; '
                              'a dotted KEY must '
                              'follow the dicts of the config (list items by index)') from None
    return cfg


def _syntax(err: SyntaxError, path: str) -> Tuple[str, str]:
    """The file with the syntax error and a description: message, file, line and its text.

    MMEngine parses without file names, so the file (the config or one of its local
    ``_base_`` files) is found again here.
    """
    where, found = _file_with_syntax_error(path)
    inner = found or err
    line = f', line {inner.lineno}' if inner.lineno else ''
    code = f': {inner.text.strip()!r}' if inner.text and inner.text.strip() else ''
    return where, f'{inner.msg} ({where}{line}{code})'


def _file_with_syntax_error(path: str, depth: int = 0) -> Tuple[str, Optional[SyntaxError]]:
    """``(file, its error)`` for the first of ``path`` and its local bases that does not
    parse; ``(path, None)`` where none is found (a base from another package)."""
    try:
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), filename=path)
    except SyntaxError as err:
        return path, err
    except OSError:
        return path, None
    for node in tree.body if depth < 20 else []:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == '_base_'):
            try:
                bases = ast.literal_eval(node.value)
            except Exception:  # not a literal: MMEngine said what is wrong
                break
            for base in [bases] if isinstance(bases, str) else list(bases):
                if isinstance(base, str) and '::' not in base:
                    where, found = _file_with_syntax_error(
                        osp.normpath(osp.join(osp.dirname(path), base)), depth + 1)
                    if found is not None:
                        return where, found
    return path, None


def launcher_world_size(launcher: str) -> Optional[int]:
    """Processes the launcher starts (1 for ``none``; None where its variable is unset)."""
    if launcher == 'none':
        return 1
    value = os.environ.get(WORLD_SIZE_VARIABLES.get(launcher, ''), '')
    return int(value) if value.isdigit() and int(value) > 0 else None


def check_training_config(cfg: Any, world_size: Optional[int]) -> None:
    """Check ``randomness``, then its ``global_batch`` against the config's layout.

    The Runner checks both again when it seeds and builds the train loader; this check
    runs before the Runner exists, so a bad value fails before any work dir is written.
    The global batch is not checked where the world size or the per-rank batch size is
    not known yet.

    Args:
        cfg: The config, ``--cfg-options`` and CLI overrides applied.
        world_size: Ranks the run will train on (None: unknown).

    Raises:
        ConfigError: :func:`mmrepro.run.settings.validate_randomness`'s message, or the
            layout trains another number of samples per optimizer step
            (:func:`mmrepro.data.global_stream.check_global_batch`'s message).
    """
    from ..data.global_stream import Layout, accumulative_counts, check_global_batch
    from .settings import validate_randomness
    try:
        validate_randomness(cfg.get('randomness'))
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from None
    expected = (cfg.get('randomness') or {}).get('global_batch')
    loader = cfg.get('train_dataloader') or {}
    batch_size = loader.get('batch_size') if hasattr(loader, 'get') else None
    if not all(isinstance(n, int) for n in (expected, world_size, batch_size)):
        return
    micro = accumulative_counts(cfg.get('optim_wrapper') or {})
    try:
        check_global_batch(expected, Layout(batch_size, 0, world_size, micro))
    except ValueError as err:
        raise ConfigError(str(err)) from None
