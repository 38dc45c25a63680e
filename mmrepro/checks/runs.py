"""Training a config in a subprocess, as the checks do: the run, its command, its config.

A check trains ``tools/train.py`` (or ``mmrepro.cli.train``) in a subprocess on a
generated child config that inherits the user's and changes only what the check needs;
:func:`train` streams the run's output into its log, reports each trained iteration as
MMEngine logs it (:func:`logged_iteration`), and returns the run's log dir, or raises
with the tail of its log. A check's work dir is its own: :func:`prepare_work_dir`
replaces a previous check's and refuses a directory holding anything else, and
:func:`remove_checkpoints` deletes the checkpoints once the runs are compared.
"""
from __future__ import annotations

import ast
import glob
import os
import os.path as osp
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..record.run_record import find_log_dir
from ..run import config as run_config
from ..run.config import ConfigError
from ..run.enable import HOOK_NAMES, enable_in_config

#: Serialises the in-process steps (config parsing, the model audit) for callers that
#: check several configs from threads: MMEngine's ``Config.fromfile`` pushes and pops
#: ``sys.path`` and ``sys.modules`` entries, and building a model sets the default scope.
IN_PROCESS_LOCK = threading.Lock()
#: Seed used when the config has none (a seedless config never reruns identically).
DEFAULT_SEED = 0
#: The checks' program name (the console script users type), in their messages and errors.
PROG = 'mmrepro-check'
#: Iterations (optimizer steps, with ``--against``) a check trains by default: with
#: ``--against``, the baseline's dense early trace points 1, 2, 4 and 8.
DEFAULT_ITERS = 8
#: The child configs the checks write at the top of their work dir (the test check: its
#: log): a directory holding one is a previous check's, which a new check replaces.
CHECK_MARKERS = ('check_repro_config.py', 'check_against_config.py', 'check_against_test.log')
#: A training iteration as MMEngine's ``LoggerHook`` logs it (every iteration in a check
#: run): ``Epoch(train) [1][2/8]  ...  loss: 1.2345 ...`` or ``Iter(train) [2/24] ...``.
_TRAIN_LINE = re.compile(r'\b(?:Epoch|Iter)\(train\)\s*(?:\[\s*\d+\])?\s*\[\s*\d+/\d+\]')
_LOSS = re.compile(r'\bloss: (\S+)')


def check_launch(nproc: int, work_dir: Optional[str]) -> None:
    """Validate the options every check shares.

    Raises:
        ValueError: ``nproc`` is negative or ``work_dir`` names a file.
    """
    if nproc < 0:
        raise ValueError(f'--nproc must be >= 1, got {nproc}')
    if work_dir is not None and osp.isfile(work_dir):
        raise ValueError(f'--work-dir {work_dir!r} is a file; name a new or empty directory, '
                         'or a previous check\'s work dir')


def previous_check(work_dir: str) -> bool:
    """Whether ``work_dir`` must be replaced: it holds a previous check's runs.

    Returns:
        True where it holds a check's child config (:data:`CHECK_MARKERS`); False where
        it does not exist or is empty.

    Raises:
        ValueError: It is a file, or holds files no check wrote (nothing is changed).
    """
    check_launch(0, work_dir)
    if not osp.isdir(work_dir) or not os.listdir(work_dir):
        return False
    if any(osp.isfile(osp.join(work_dir, name)) for name in CHECK_MARKERS):
        return True
    first = sorted(os.listdir(work_dir))[0]
    raise ValueError(f'--work-dir {work_dir!r} holds files no check wrote (e.g. {first!r}) '
                     'and a check replaces its work dir; name a new or empty directory')


def prepare_work_dir(work_dir: str, say: Callable[..., None]) -> None:
    """Make ``work_dir`` an empty directory, replacing a previous check's (and saying so).

    Raises:
        ValueError: It holds files no check wrote (:func:`previous_check`).
    """
    if previous_check(work_dir):
        say(f'  replacing {work_dir}: a previous check\'s runs (name another --work-dir to '
            'keep them)')
        shutil.rmtree(work_dir)
    os.makedirs(work_dir, exist_ok=True)


def remove_checkpoints(root: str, keep: Sequence[str] = ()) -> Tuple[int, int]:
    """Delete every checkpoint under ``root`` but those in ``keep`` (and each
    ``last_checkpoint`` file naming a deleted one).

    Returns:
        ``(files deleted, bytes freed)``.
    """
    kept = {osp.abspath(path) for path in keep}
    count = size = 0
    for path in sorted(glob.glob(osp.join(glob.escape(root), '**', '*.pth'), recursive=True)):
        if osp.abspath(path) not in kept:
            size += osp.getsize(path)
            os.remove(path)
            count += 1
    for path in glob.glob(osp.join(glob.escape(root), '**', 'last_checkpoint'),
                          recursive=True):
        with open(path, errors='replace') as f:
            target = f.read().strip()
        if not osp.isfile(target):
            os.remove(path)
    return count, size


def logged_iteration(line: str) -> Optional[str]:
    """The loss of a training iteration MMEngine logged on ``line`` (``''`` where the
    line holds none), or None where ``line`` logs no training iteration."""
    if not _TRAIN_LINE.search(line):
        return None
    loss = _LOSS.search(line)
    return loss.group(1) if loss else ''


#: A check run's config: the user's, without validation, traced, stopped, seeded.
CHILD_CONFIG = """\
# Written by mmrepro's {tool}: {config}
# {what}
_base_ = {base!r}
val_dataloader = None
val_cfg = None
val_evaluator = None
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval={ckpt_interval},
                    save_last=False, max_keep_ckpts=-1, save_best=None))
custom_imports = {imports}
custom_hooks = {hooks}
randomness = {randomness}
"""


@dataclass
class Run:
    """One training run of a check.

    Attributes:
        name: Its name (``run_a``, ``run_b``, ``resume``, ``workers2``...).
        description: What differs from ``run_a``, for the output.
        args: Extra ``tools/train.py`` arguments.
        cfg_options: Extra ``--cfg-options`` (after the user's).
        expected: Run record keys that differ from ``run_a`` by design.
    """

    name: str
    description: str
    args: List[str] = field(default_factory=list)
    cfg_options: List[str] = field(default_factory=list)
    expected: Tuple[str, ...] = ()


def load_config(path: str, options: List[str], world_size: Optional[int] = 1,
                prog: str = PROG) -> Any:
    """The config at ``path`` with the ``--cfg-options`` strings ``options`` applied,
    checked for a training run on ``world_size`` ranks (``randomness``, and the global
    batch unless ``world_size`` is None).

    Raises:
        ConfigError: It cannot be loaded, has nothing to train, or is invalid.
    """
    cfg = run_config.load_config(path, options, lock=IN_PROCESS_LOCK)
    for key in ('model', 'train_dataloader', 'optim_wrapper'):
        if not cfg.get(key):
            raise ConfigError(f'config {path!r} has no {key}; {prog} needs a training '
                              'config')
    run_config.check_training_config(cfg, world_size)
    return cfg


def progress(say: Callable[..., None], last: int,
             first: int = 0) -> Callable[[int, str], None]:
    """An ``on_iteration`` for :func:`train`: says ``  iteration i/last: loss X (t s)`` per
    trained iteration, ``i`` counted on from ``first`` (a resumed run's start) and ``t``
    the seconds since the run started."""
    begin = time.perf_counter()

    def show(k: int, loss: str) -> None:
        value = f': loss {loss}' if loss else ''
        say(f'  iteration {first + k}/{last}{value} ({time.perf_counter() - begin:.1f} s)',
            flush=True)
    return show


def literal(value: Any, what: str, config: str) -> str:
    """``repr(value)`` for a generated config, if it is a plain Python literal.

    Raises:
        ValueError: ``value`` holds objects a config file cannot write back.
    """
    text = repr(value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f'{what} of {config!r} are not plain values ({text[:200]}); '
                         'mmrepro cannot rewrite them') from None
    return text


def child_config(cfg: Any, config: str, tool: str, what: str, trace: Dict[str, Any],
                 stop_iter: int, ckpt_interval: int, randomness: Dict[str, Any]) -> str:
    """The text of a check run's config (:data:`CHILD_CONFIG`).

    Args:
        cfg: The user's config (loaded).
        config: Its path (the child inherits it).
        tool: Which check writes it, for the header comment.
        what: What the run does, for the header comment.
        trace: ``ReproducibilityHook`` options (the config's hook gets them, or the hook
            is added with them).
        stop_iter: The iteration after which ``CheckReproStopHook`` ends the run.
        ckpt_interval: Iterations between checkpoints.
        randomness: ``randomness`` keys set over the config's.
    """
    hooks = []
    for hook in cfg.get('custom_hooks') or []:
        hook = hook.to_dict() if hasattr(hook, 'to_dict') else dict(hook)
        if hook.get('type') in HOOK_NAMES:
            hook.update(trace)
        hooks.append(hook)
    imports, hooks, _ = enable_in_config(cfg.get('custom_imports'), hooks, **trace)
    hooks.append(dict(type='CheckReproStopHook', max_iters=stop_iter))
    return CHILD_CONFIG.format(tool=tool, config=config, what=what, base=osp.abspath(config),
                               ckpt_interval=ckpt_interval,
                               imports=literal(imports, 'custom_imports', config),
                               hooks=literal(hooks, 'custom_hooks', config),
                               randomness=repr(randomness))


def seed_of(cfg: Any) -> int:
    """The config's seed, or :data:`DEFAULT_SEED` where it has none."""
    seed = (cfg.get('randomness') or {}).get('seed')
    return DEFAULT_SEED if seed is None else seed


def deterministic(cfg: Any) -> bool:
    """Whether the config asks for deterministic mode."""
    return bool((cfg.get('randomness') or {}).get('deterministic', False))


def tool_launch(tool: str, nproc: int = 0) -> Tuple[List[str], List[str]]:
    """``(the command up to the tool's arguments, the launcher arguments)`` of ``tool``
    (``train`` or ``test``): the checkout's ``tools/<tool>.py`` where there is one, else
    ``-m mmrepro.cli.<tool>``; under torchrun with ``nproc`` processes if > 0."""
    script = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))),
                      'tools', f'{tool}.py')
    entry = [script] if osp.isfile(script) else ['-m', f'mmrepro.cli.{tool}']
    if not nproc:
        return [sys.executable, *entry], []
    return ([sys.executable, '-m', 'torch.distributed.run', f'--nproc_per_node={nproc}',
             f'--master_port={free_port()}', *entry], ['--launcher', 'pytorch'])


def train_command(child: str, work_dir: str, run: Run, user_options: List[str],
                  nproc: int = 0) -> List[str]:
    """The command line that trains ``run`` (torchrun with ``nproc`` processes if > 0)."""
    command, launcher = tool_launch('train', nproc)
    options = [*user_options, *run.cfg_options]
    return [*command, child, '--work-dir', work_dir, *run.args,
            *launcher, *(['--cfg-options', *options] if options else [])]


def free_port() -> int:
    """A TCP port free on this machine now."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def train(run: Run, child: str, root: str, user_options: List[str], nproc: int = 0,
          on_iteration: Optional[Callable[[int, str], None]] = None) -> str:
    """Train ``run`` (on ``nproc`` processes launched by torchrun if > 0); return its log
    dir.

    Args:
        run: The run.
        child: The check's child config.
        root: The check's work dir (the run goes to ``<root>/<run name>``, its output to
            ``<root>/<run name>.log``).
        user_options: The user's ``--cfg-options``.
        nproc: Processes launched by torchrun (0: one process, no launcher).
        on_iteration: Called with ``(k, loss)`` as the run logs its ``k``-th trained
            iteration (counted from 1 in this run; ``loss`` as logged, ``''`` if none).

    Raises:
        RuntimeError: The training failed (the message names its log).
    """
    work_dir = osp.join(root, run.name)
    log = osp.join(root, f'{run.name}.log')
    shutil.rmtree(work_dir, ignore_errors=True)
    command = train_command(child, work_dir, run, user_options, nproc)
    with open(log, 'w') as f:
        f.write(' '.join(command) + '\n')
        f.flush()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors='replace')
        count = 0
        for line in proc.stdout:
            f.write(line)
            loss = logged_iteration(line)
            if loss is not None and on_iteration is not None:
                count += 1
                on_iteration(count, loss)
        code = proc.wait()
    if code != 0:
        with open(log, errors='replace') as f:
            tail = ''.join(f.readlines()[-25:])
        raise RuntimeError(f'training run {run.name!r} failed with exit code {code}; full '
                           f'log: {log}\n--- last lines ---\n{tail}')
    return find_log_dir(work_dir)
