"""``tools/check_repro.py``: train a config twice for a few iterations and compare traces.

Each run is ``tools/train.py`` in a subprocess on a generated child config that
inherits the given one and changes only what the check needs: the training loop is
left as it is and :class:`~mmrepro.hooks.CheckReproStopHook` ends the process after ``--iters``
iterations; validation is off, the logger writes every iteration, checkpoints are
saved by iteration, the trace (:mod:`mmrepro.trace`) records every iteration, a seed
is pinned if the config has none, and in deterministic mode
``randomness.warn_only=True`` makes PyTorch report its nondeterministic operations
instead of stopping at the first one. Optionally a third run resumes the first from
its middle checkpoint (``--resume-check``) and a fourth uses another ``num_workers``
(``--workers-check K``).

Exit status: 0 when every run is bit-identical to the first, 1 when one diverges,
2 when the check cannot be done (bad arguments, missing config, a run fails).
"""
from __future__ import annotations

import argparse
import ast
import os
import os.path as osp
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..patches.scope import HOOK_NAMES, enable_in_config
from ..run_record import RunRecordError, diff_records, find_log_dir, load_run_record
from ..trace import TRACE_NAME, TraceError, compare_traces, describe_diff, read_trace
from . import config_args
from .config_args import ArgumentParser, ConfigError

PROG = 'check_repro'
#: Serialises the in-process steps (config parsing, the model audit) for callers that
#: check several configs from threads: MMEngine's ``Config.fromfile`` pushes and pops
#: ``sys.path`` and ``sys.modules`` entries, and building a model sets the default scope.
IN_PROCESS_LOCK = threading.Lock()
#: PyTorch's warning for an operation without a deterministic implementation.
ALERT = re.compile(r'([\w.:<>]+) does not have a deterministic implementation')
#: Seed used when the config has none (a seedless config never reruns identically).
DEFAULT_SEED = 0

CHILD_CONFIG = """\
# Written by mmrepro's check_repro: {config}
# stopped after {iters} iterations, without validation, traced at every iteration.
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
    """One training run of the check.

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


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line (exits with status 2 and one error: line on a malformed one)."""
    parser = ArgumentParser(
        prog=PROG, description='Train a config twice for a few iterations and check that '
        'the runs are bit-identical (losses, forward outputs, gradients, weights).',
        epilog='exit status: 0 every comparison bit-identical; 1 a run diverged (the first '
        'iteration and module are named); 2 bad arguments or config, or a training run '
        'failed (its log is named)')
    parser.add_argument('config', help='train config file')
    parser.add_argument('--iters', type=int, default=8,
                        help='iterations per run (default: 8)')
    parser.add_argument('--work-dir', help='where the runs go (default: '
                        'work_dirs/check_repro/<config name>)')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='config overrides, as for tools/train.py')
    parser.add_argument('--resume-check', action='store_true',
                        help='also resume the first run from its middle checkpoint')
    parser.add_argument('--workers-check', type=int, default=None, metavar='K',
                        help='also train with train_dataloader.num_workers=K')
    parser.add_argument('--launcher', choices=['none', 'pytorch'], default='none',
                        help='pytorch: every run is --nproc processes launched by '
                        'torch.distributed.run (NCCL on GPUs, gloo on CPU); default: none')
    parser.add_argument('--nproc', type=int, default=2, metavar='N',
                        help='processes per run with --launcher pytorch (default: 2)')
    return parser.parse_args(argv)


def validate_args(args: argparse.Namespace) -> None:
    """Check the arguments before anything is trained.

    Raises:
        ValueError: With a message saying what is wrong and how to fix it.
    """
    if args.iters < 1:
        raise ValueError(f'--iters must be >= 1, got {args.iters}')
    if args.resume_check and args.iters < 2:
        raise ValueError(f'--resume-check resumes in the middle of the run, so it needs '
                         f'--iters >= 2, got {args.iters}')
    if args.workers_check is not None and args.workers_check < 0:
        raise ValueError(f'--workers-check must be >= 0, got {args.workers_check}')
    if args.launcher == 'pytorch' and args.nproc < 1:
        raise ValueError(f'--nproc must be >= 1, got {args.nproc}')
    if args.work_dir is not None and osp.isfile(args.work_dir):
        raise ValueError(f'--work-dir {args.work_dir!r} is a file')


def load_config(path: str, options: List[str], world_size: int = 1) -> Any:
    """The config at ``path`` with the ``--cfg-options`` strings ``options`` applied,
    checked for a training run on ``world_size`` ranks (``randomness``, global batch).

    Raises:
        ConfigError: It cannot be loaded, has nothing to train, or is invalid.
    """
    cfg = config_args.load_config(path, options, lock=IN_PROCESS_LOCK)
    for key in ('model', 'train_dataloader', 'optim_wrapper'):
        if not cfg.get(key):
            raise ConfigError(f'config {path!r} has no {key}; check_repro needs a training '
                              'config')
    config_args.check_training_config(cfg, world_size)
    return cfg


def _literal(value: Any, what: str, config: str) -> str:
    text = repr(value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f'{what} of {config!r} are not plain values ({text[:200]}); '
                         'check_repro cannot rewrite them') from None
    return text


def child_config(cfg: Any, config: str, iters: int, ckpt_interval: int) -> str:
    """The text of the child config (see the module docstring)."""
    hooks = []
    for hook in cfg.get('custom_hooks') or []:
        hook = hook.to_dict() if hasattr(hook, 'to_dict') else dict(hook)
        if hook.get('type') in HOOK_NAMES:
            hook.update(trace_interval=1, trace_forward=True)
        hooks.append(hook)
    imports, hooks, _ = enable_in_config(cfg.get('custom_imports'), hooks, trace_interval=1,
                                         trace_forward=True)
    hooks.append(dict(type='CheckReproStopHook', max_iters=iters))
    randomness = dict(seed=_seed(cfg))
    if _deterministic(cfg):
        randomness['warn_only'] = True
    return CHILD_CONFIG.format(config=config, base=osp.abspath(config), iters=iters,
                               ckpt_interval=ckpt_interval,
                               imports=_literal(imports, 'custom_imports', config),
                               hooks=_literal(hooks, 'custom_hooks', config),
                               randomness=repr(randomness))


def _seed(cfg: Any) -> int:
    seed = (cfg.get('randomness') or {}).get('seed')
    return DEFAULT_SEED if seed is None else seed


def _deterministic(cfg: Any) -> bool:
    return bool((cfg.get('randomness') or {}).get('deterministic', False))


def plan_runs(args: argparse.Namespace) -> List[Run]:
    """The runs to train: ``run_a``, ``run_b``, then the optional checks."""
    runs = [Run('run_a', 'reference'), Run('run_b', 'rerun')]
    if args.resume_check:
        middle = args.iters // 2
        ckpt = osp.join(args.work_dir, 'run_a', f'iter_{middle}.pth')
        runs.append(Run('resume', f'run_a resumed from iter_{middle}.pth',
                        args=['--resume', ckpt],
                        expected=('config.resume', 'config.load_from')))
    if args.workers_check is not None:
        k = args.workers_check
        runs.append(Run(f'workers{k}', f'num_workers={k}', cfg_options=[
            f'train_dataloader.num_workers={k}',
            f'train_dataloader.persistent_workers={k > 0}'], expected=(
            'config.train_dataloader.num_workers',
            'config.train_dataloader.persistent_workers')))
    return runs


def record_differences(reference: str, other: str, run: Run) -> List[str]:
    """Run record keys that differ from the reference run although they should not."""
    record_a, _ = load_run_record(reference)
    record_b, _ = load_run_record(other)
    return [f'{key}: {value_a!r} -> {value_b!r}'
            for key, value_a, value_b in diff_records(record_a, record_b)
            if key not in run.expected and key != 'config_sha256']


def _train_command(child: str, work_dir: str, run: Run, user_options: List[str],
                   nproc: int = 0) -> List[str]:
    script = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))),
                      'tools', 'train.py')
    entry = [script] if osp.isfile(script) else ['-m', 'mmrepro.cli.train']
    launch, launcher = [], []
    if nproc:
        launch = ['-m', 'torch.distributed.run', f'--nproc_per_node={nproc}',
                  f'--master_port={_free_port()}']
        launcher = ['--launcher', 'pytorch']
    options = [*user_options, *run.cfg_options]
    return [sys.executable, *launch, *entry, child, '--work-dir', work_dir, *run.args,
            *launcher, *(['--cfg-options', *options] if options else [])]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def train(run: Run, child: str, root: str, user_options: List[str], nproc: int = 0) -> str:
    """Train ``run`` (on ``nproc`` processes launched by torchrun if > 0); return its log
    dir.

    Raises:
        RuntimeError: The training failed (the message names its log).
    """
    work_dir = osp.join(root, run.name)
    log = osp.join(root, f'{run.name}.log')
    shutil.rmtree(work_dir, ignore_errors=True)
    command = _train_command(child, work_dir, run, user_options, nproc)
    with open(log, 'w') as f:
        f.write(' '.join(command) + '\n')
        f.flush()
        code = subprocess.call(command, stdout=f, stderr=subprocess.STDOUT)
    if code != 0:
        with open(log, errors='replace') as f:
            tail = ''.join(f.readlines()[-25:])
        raise RuntimeError(f'training run {run.name!r} failed with exit code {code}; full '
                           f'log: {log}\n--- last lines ---\n{tail}')
    return find_log_dir(work_dir)


def pytorch_alerts(logs: Dict[str, str]) -> Dict[str, List[str]]:
    """Operations PyTorch warned about as nondeterministic -> the runs that hit them."""
    found: Dict[str, List[str]] = {}
    for name, path in logs.items():
        with open(path, errors='replace') as f:
            for op in ALERT.findall(f.read()):
                if name not in found.setdefault(op, []):
                    found[op].append(name)
    return found


def mmcv_op_audit(cfg: Any) -> Optional[List[Dict[str, str]]]:
    """:func:`mmrepro.ops.op_audit.audit_model` on the config's model (None if unavailable)."""
    try:
        from ..ops.op_audit import audit_model
    except ImportError:
        return None
    from mmengine.registry import MODELS, init_default_scope
    with IN_PROCESS_LOCK, warnings.catch_warnings():
        init_default_scope(cfg.get('default_scope', 'mmdet'))
        model = MODELS.build(cfg.model)
        warnings.simplefilter('ignore')
        return audit_model(model, deterministic=True, strict=False, replace=True)


def _report_nondeterminism(cfg: Any, logs: Dict[str, str],
                           result: Optional[Dict[str, Any]] = None) -> List[str]:
    result = {} if result is None else result
    result.update(alerts={}, audit=None)
    if not _deterministic(cfg):
        return ['nondeterministic operations: not reported (randomness.deterministic is '
                'False; pass --cfg-options randomness.deterministic=True to list them)']
    lines = ['nondeterministic operations (deterministic mode, warn_only=True):']
    alerts = result['alerts'] = pytorch_alerts(logs)
    if alerts:
        lines += [f'  PyTorch: {op} (in {", ".join(runs)})' for op, runs in alerts.items()]
    else:
        lines.append('  PyTorch: none reported')
    try:
        entries = result['audit'] = mmcv_op_audit(cfg)
    except Exception as err:  # the audit is informative; never fail the check on it
        result['audit'] = f'audit failed ({type(err).__name__}: {err})'
        lines.append(f"  mmcv ops: {result['audit']}")
        return lines
    if entries is None:
        lines.append('  mmcv ops: not audited (mmrepro.ops.op_audit is not available)')
    elif not entries:
        lines.append('  mmcv ops: none nondeterministic on CUDA in the model')
    for entry in entries or []:
        lines.append(f"  mmcv op: {entry['name']} ({entry['type']}: {entry['op']}), "
                     f"{entry['action']}: {entry['reason']}")
    return lines


def run_check(args: argparse.Namespace, result: Optional[Dict[str, Any]] = None) -> int:
    """Train, compare, print; return the exit status (0 identical, 1 diverged).

    Args:
        args: Parsed and validated arguments.
        result: If given, filled with what the check found, for callers that tabulate
            it (the support matrix): ``work_dir``, ``log_dirs`` (run name -> log dir),
            ``failed`` (descriptions of the runs that diverged), ``alerts`` (PyTorch
            operation -> runs) and ``audit`` (:func:`mmcv_op_audit`'s entries or an
            error string).
    """
    # Checked before anything is written or trained.
    cfg = load_config(args.config, args.cfg_options,
                      args.nproc if args.launcher == 'pytorch' else 1)
    args.work_dir = args.work_dir or osp.join(
        'work_dirs', 'check_repro', osp.splitext(osp.basename(args.config))[0])
    os.makedirs(args.work_dir, exist_ok=True)
    ckpt_interval = max(args.iters // 2, 1) if args.resume_check else args.iters
    child = osp.join(args.work_dir, 'check_repro_config.py')
    with open(child, 'w') as f:
        f.write(child_config(cfg, args.config, args.iters, ckpt_interval))
    seed = (cfg.get('randomness') or {}).get('seed')
    print(f'{PROG}: {args.config}: {args.iters} iteration(s) per run, traced at every '
          f'iteration; seed {_seed(cfg)}{" (the config has none)" if seed is None else ""}, '
          f'deterministic={_deterministic(cfg)}')
    print(f'  work dir: {args.work_dir} (child config {child})')
    if args.launcher == 'pytorch':
        print(f'  every run: {args.nproc} processes launched by torch.distributed.run')
    runs = plan_runs(args)
    log_dirs: Dict[str, str] = {}
    logs: Dict[str, str] = {}
    for i, run in enumerate(runs, 1):
        start = time.perf_counter()
        print(f'[{i}/{len(runs)}] {run.name} ({run.description}) ...', end=' ', flush=True)
        log_dirs[run.name] = train(run, child, args.work_dir, args.cfg_options,
                                   args.nproc if args.launcher == 'pytorch' else 0)
        logs[run.name] = osp.join(args.work_dir, f'{run.name}.log')
        print(f'{time.perf_counter() - start:.1f} s')
    header, lines_a = read_trace(osp.join(log_dirs['run_a'], TRACE_NAME))
    failed = []
    print()
    for run in runs[1:]:
        diff = compare_traces(lines_a, read_trace(osp.join(log_dirs[run.name], TRACE_NAME))[1])
        lines = describe_diff(diff, header.get('modules'), 'run_a', run.name)
        print(f'{run.name} vs run_a: {lines[0]}')
        for line in lines[1:]:
            print(line)
        unexpected = record_differences(log_dirs['run_a'], log_dirs[run.name], run)
        if unexpected:
            print(f'  run records differ from run_a: {"; ".join(unexpected[:6])}'
                  + (f' (+{len(unexpected) - 6} more)' if len(unexpected) > 6 else ''))
        if not diff.identical:
            failed.append(f'{run.name} ({run.description}) ' + (
                f'diverges at iteration {diff.iteration}' if diff.common else
                'has no iteration in common with run_a'))
    print()
    for line in _report_nondeterminism(cfg, logs, result):
        print(line)
    print()
    if result is not None:
        result.update(work_dir=args.work_dir, log_dirs=log_dirs, failed=failed)
    if failed:
        print(f'result: NOT REPRODUCIBLE: {"; ".join(failed)}')
        return 1
    print(f'result: REPRODUCIBLE: {len(runs) - 1} comparison(s) bit-identical')
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``tools/check_repro.py``; returns the exit status."""
    args = parse_args(argv)
    try:
        validate_args(args)
        return run_check(args)
    except (ValueError, TypeError, RuntimeError, RunRecordError, TraceError) as err:
        return config_args.report(PROG, err)


if __name__ == '__main__':
    sys.exit(main())
