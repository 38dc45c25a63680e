"""A config and its ``--cfg-options``, loaded for the tools with one-line errors.

Every tool that takes a config and ``--cfg-options`` (``train``, ``check_repro``,
``support_matrix``) and every check loads it here, so a bad input reads the same
everywhere: a :class:`ConfigError` whose message is one line naming the key, the value,
what was expected and how to fix it. The tools print it as ``<tool>: error: <message>``
and exit with status 2, before anything is built or written
(:func:`mmrepro.cli.config_args.report`). The layout the config trains on is checked
here too: the launcher's environment (:func:`check_launcher_environment`), the work dir
(:func:`check_work_dir`) and ``randomness`` with its global batch
(:func:`check_training_config`).
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
        problem = _unbalanced(value)
        if problem is None:
            try:
                parsed[key] = DictAction._parse_iterable(value)
            except Exception as err:  # MMEngine asserts on what it cannot split
                problem = str(err)
        if problem is not None:
            raise ConfigError(f'--cfg-options {key}: cannot parse the value {value!r} '
                              f'({problem}); expected a number, True/False/None, a string or '
                              'a bracketed list such as [1,2]')
    return parsed


def _unbalanced(value: str) -> Optional[str]:
    """What is wrong with the brackets of an unquoted value (None where they balance).

    MMEngine's parser takes ``[1`` for the string ``'[1'``: a value meant as a list
    whose closing bracket was lost would reach the config as a string.
    """
    if value.strip()[:1] in ('"', "'"):
        return None
    depth = 0
    for char in value:
        depth += (char in '([') - (char in ')]')
        if depth < 0:
            break
    if depth == 0:
        return None
    return f"its brackets do not balance: {value.count('[') + value.count('(')} opened, " \
        f"{value.count(']') + value.count(')')} closed"


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
        _check_kind(cfg, key, value)
        try:
            cfg.merge_from_dict({key: value})
        except Exception as err:
            raise ConfigError(f'--cfg-options {key}={value!r} cannot be merged into '
                              f'{path!r}: {type(err).__name__}: {str(err).rstrip(".")}; '
                              'a dotted KEY must '
                              'follow the dicts of the config (list items by index)') from None
    return cfg


def _check_kind(cfg: Any, key: str, value: Any) -> None:
    """Refuse a string for a key whose value in the config is a number or a flag.

    A value MMEngine cannot read as a number, list or True/False/None becomes a string
    (``max_epochs=three``), which the config's code would only trip over after the run
    has started writing.

    Raises:
        ConfigError: The config holds an int, float or bool at ``key``; ``value`` is a str.
    """
    old = _lookup(cfg, key.split('.'))
    if not isinstance(value, str) or not isinstance(old, (bool, int, float)):
        return
    expected = 'True or False' if isinstance(old, bool) else 'a number'
    raise ConfigError(f'--cfg-options {key}={value!r}: expected {expected} (the config has '
                      f'{key}={old!r}), got a string; write e.g. {key}={old!r}')


def _lookup(node: Any, parts: Sequence[str]) -> Any:
    """The value at the dotted key ``parts`` (list items by index); None where absent."""
    for part in parts:
        if isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif hasattr(node, 'get') and not isinstance(node, (list, tuple)):
            node = node.get(part)
        else:
            return None
    return node


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


#: Variables each launcher's processes need (MMEngine's ``init_dist`` reads them), and how
#: to start processes that have them.
LAUNCHER_VARIABLES = {
    'pytorch': (('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT'),
                'launch it with bash tools/dist_train.sh CONFIG NPROC or torchrun '
                '--nproc_per_node NPROC tools/train.py CONFIG --launcher pytorch'),
    'slurm': (('SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_NODELIST'),
              'launch it with srun (srun -n NPROC python tools/train.py CONFIG --launcher '
              'slurm)'),
    'mpi': (('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK',
             'MASTER_ADDR'),
            'launch it with MASTER_ADDR=HOST mpirun -n NPROC python tools/train.py CONFIG '
            '--launcher mpi'),
}
_INTEGERS = ('RANK', 'WORLD_SIZE', 'MASTER_PORT', 'SLURM_PROCID', 'SLURM_NTASKS',
             'OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK')


def check_launcher_environment(launcher: str, whole_world: bool = False) -> None:
    """Check that the launcher's variables are set, before anything is built.

    Args:
        launcher: ``--launcher``: none, pytorch, slurm or mpi.
        whole_world: Check the arguments once for every process the launcher will start
            (``--check-config``, as ``tools/dist_train.sh`` runs it): only the variable
            with the number of processes is needed.

    Raises:
        ConfigError: A variable is not set, or is not a whole number where one is needed.
    """
    if launcher not in LAUNCHER_VARIABLES:
        return
    names, how = LAUNCHER_VARIABLES[launcher]
    if whole_world:
        names = (WORLD_SIZE_VARIABLES[launcher],)
    missing = [name for name in names if not os.environ.get(name)]
    if missing and whole_world:
        raise ConfigError(
            f'--check-config --launcher {launcher} checks the arguments for every process '
            f'the launcher will start and needs their number in {names[0]}, but it is not '
            f'set; run it as {names[0]}=NPROC tools/train.py CONFIG --check-config '
            f'--launcher {launcher} (tools/dist_train.sh does)')
    if missing:
        unset = ('none is set' if len(missing) == len(names) else
                 f'{", ".join(missing)} {"is" if len(missing) == 1 else "are"} not set')
        raise ConfigError(
            f'--launcher {launcher} needs {", ".join(names[:-1])} and {names[-1]} in the '
            f'environment (the launcher sets them for each process), but {unset}; '
            f'{how}, or leave out --launcher {launcher} to train in one process')
    for name in names:
        value, least = os.environ[name], int(name.endswith(('SIZE', 'NTASKS')))
        if name in _INTEGERS and not (value.isdigit() and int(value) >= least):
            raise ConfigError(f'--launcher {launcher}: {name}={value!r}, expected a whole '
                              f'number >= {least}; {how}, which sets it')


def check_work_dir(path: str, key: str = '--work-dir') -> None:
    """Check that the run can make (or use) its work dir, without making it.

    Args:
        path: The work dir.
        key: How the user gave it, for the message (``--work-dir`` or ``work_dir``).

    Raises:
        ConfigError: ``path`` or a directory above it is a file, or cannot be written.
    """
    if osp.exists(path) and not osp.isdir(path):
        raise ConfigError(f'{key} {path!r} is a file, expected a directory (made if missing) '
                          'for the checkpoints and logs; choose another path')
    above = osp.abspath(path)
    while not osp.exists(above):
        above = osp.dirname(above)
    if not osp.isdir(above):
        raise ConfigError(f'{key} {path!r} cannot be made: {above!r} is a file, expected a '
                          'directory; choose another path')
    if not os.access(above, os.W_OK | os.X_OK):
        raise ConfigError(f'{key} {path!r}: {above!r} is not writable by this user, expected '
                          'a directory the run can write its checkpoints and logs in; choose '
                          'another path')


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
            (:func:`mmrepro.run.layout.check_global_batch`'s message).
    """
    from .layout import Layout, accumulative_counts, check_global_batch
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
    accumulation = accumulative_counts(cfg.get('optim_wrapper') or {})
    try:
        check_global_batch(expected, Layout(batch_size, 0, world_size, accumulation))
    except ValueError as err:
        raise ConfigError(str(err)) from None
