"""``tools/train.py``: MMDetection 3.x's training entry point, made reproducible, for any
MMEngine codebase (MMSegmentation too).

Same arguments as MMDetection's ``tools/train.py`` plus ``--seed``,
``--deterministic`` and ``--diff-rank-seed`` (CLI over config).
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
from typing import Dict, List, Optional

from ..determinism import cpu
from ..determinism.mode import prepare_cublas_workspace_config
from ..run.config import (
    ConfigError,
    check_launcher_environment,
    check_training_config,
    check_work_dir,
    launcher_world_size,
    load_config,
)
from ..run.enable import enable_in_config
from ..run.settings import check_seed
from .config_args import (
    ArgumentParser,
    add_run_arguments,
    parse_run_args,
    report,
    set_work_dir,
)

PROG = 'mmrepro-train'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse MMDetection's training arguments and mmrepro's seeding flags.

    ``--cfg-options`` stays a list of ``KEY=VALUE`` strings, parsed by
    :func:`build_config` (so a malformed one is an ``error:`` line, not a traceback).
    """
    parser = ArgumentParser(
        prog=PROG, description='Train an MMEngine config reproducibly (mmrepro): MMDetection, '
        'MMSegmentation and other OpenMMLab codebases',
        epilog='exit status: 0 trained (with --check-config: arguments and config valid); '
        '2 bad arguments or config (one error: line, before anything is built or written); '
        '1 training failed (traceback), or a checkpoint could not be written (one error: '
        'line: no space, permission denied, a read-only file system)')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument('--amp', action='store_true', default=False,
                        help='enable automatic-mixed-precision training')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='enable automatically scaling LR.')
    parser.add_argument(
        '--resume', nargs='?', type=str, const='auto',
        help='If specify checkpoint path, resume from it, while if not specify, try to '
        'auto resume from the latest checkpoint in the work directory.')
    add_run_arguments(parser)
    parser.add_argument('--seed', type=_seed_arg, default=None,
                        help='random seed (overrides randomness.seed)')
    parser.add_argument('--diff-rank-seed', action='store_true', default=None,
                        help='a different seed per rank (overrides randomness.diff_rank_seed)')
    parser.add_argument('--check-config', action='store_true',
                        help='only check the arguments and the config (exit 0 if good, 2 '
                        'with one error: line), building and writing nothing')
    parser.add_argument('--hash-seed-reexec', action='store_true',
                        help='re-execute this process with PYTHONHASHSEED set from the seed '
                        '(0 when the seed is drawn), so str/bytes hashing (set iteration '
                        'order) is fixed in this process too, not only in its children')
    return parse_run_args(parser, argv)


def _seed_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'--seed must be an integer in [0, 2**32 - 1], got {text!r}') from None
    try:
        return check_seed(value, '--seed')
    except (TypeError, ValueError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_config(args: argparse.Namespace):
    """Load the config and apply the CLI, as MMDetection's ``tools/train.py`` does.

    Adds what mmrepro enforces: ``randomness`` validated with CLI overrides, the
    global batch checked against the launcher's world size, the
    ``ReproducibilityHook`` in ``custom_hooks`` and ``mmrepro`` in ``custom_imports``.

    Raises:
        ConfigError: A bad argument or config (one line; nothing is written).
    """
    cfg = load_config(args.config, args.cfg_options)
    cfg.launcher = args.launcher

    set_work_dir(cfg, args.work_dir, args.config)

    if args.amp:
        _enable_amp(cfg)
    if args.auto_scale_lr:
        _enable_auto_scale_lr(cfg)
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume

    randomness = cfg.get('randomness')
    randomness = {} if randomness is None else randomness
    if not hasattr(randomness, 'keys'):
        check_training_config(cfg, 1)  # the message that names randomness and its value
    randomness = dict(randomness)
    for key in ('seed', 'deterministic', 'diff_rank_seed', 'verify_checkpoints'):
        value = getattr(args, key)
        if value is not None:
            randomness[key] = value
    cfg.randomness = randomness
    check_training_config(cfg, launcher_world_size(args.launcher))  # before anything is built

    cfg.custom_imports, cfg.custom_hooks, _ = enable_in_config(cfg.get('custom_imports'),
                                                               cfg.get('custom_hooks'))
    return cfg


def check_run_inputs(args: argparse.Namespace, cfg) -> None:
    """Check what the run will open or make besides the config, before anything is.

    The Runner class (``runner_type``), ``compile``, the launcher's environment (with
    ``--check-config``: the number of processes only, as ``tools/dist_train.sh``
    checks once for all of them), the work dir, and the checkpoint to resume or load
    (:mod:`mmrepro.resume.preflight`).

    Raises:
        ConfigError: One line naming the argument, the value, what was expected and the fix.
    """
    from ..determinism.compile import check_compile
    from ..resume.preflight import check_checkpoint_inputs
    from ..runner.entry import check_runner_type
    check_runner_type(cfg)
    check_compile(cfg)
    check_launcher_environment(args.launcher, whole_world=args.check_config)
    check_work_dir(cfg.work_dir, '--work-dir' if args.work_dir is not None else 'work_dir')
    check_checkpoint_inputs(cfg, args.resume)


def seed_source(args: argparse.Namespace) -> str:
    """Where the run's ``randomness.seed`` was given: ``--seed``, ``--cfg-options`` or the
    config (the seed log line says it)."""
    if args.seed is not None:
        return '--seed'
    for option in args.cfg_options:
        key, _, value = option.partition('=')
        if key == 'randomness.seed' or (key == 'randomness' and 'seed' in value):
            return f'--cfg-options {key}'
    return 'config'


def _enable_auto_scale_lr(cfg) -> None:
    scale = cfg.get('auto_scale_lr')
    base = scale.get('base_batch_size') if hasattr(scale, 'get') else None
    if isinstance(base, bool) or not isinstance(base, int) or base < 1:
        raise ConfigError(
            f'--auto-scale-lr needs auto_scale_lr.base_batch_size in the config (the batch '
            f'size its learning rate is for), got auto_scale_lr={scale!r}; add e.g. '
            '`auto_scale_lr = dict(enable=False, base_batch_size=16)` to the config')
    cfg.auto_scale_lr.enable = True


def _enable_amp(cfg) -> None:
    from mmengine.logging import print_log
    optim_wrapper = cfg.get('optim_wrapper')
    kind = optim_wrapper.get('type', 'OptimWrapper') if hasattr(optim_wrapper, 'get') else None
    if kind == 'AmpOptimWrapper':
        print_log('AMP training is already enabled in your config.', logger='current')
    elif kind != 'OptimWrapper':
        raise ConfigError(
            f'--amp needs optim_wrapper.type OptimWrapper (or AmpOptimWrapper), got '
            f'optim_wrapper.type={kind!r}; remove --amp, or set optim_wrapper.type')
    else:
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.loss_scale = 'dynamic'


def prepare_environment(randomness: dict) -> None:
    """Set what must be in the environment before CUDA / cuBLAS start."""
    if randomness.get('deterministic'):
        prepare_cublas_workspace_config()
    if randomness.get('seed') is not None:
        os.environ.setdefault('PYTHONHASHSEED', str(randomness['seed']))


def reexec_with_hash_seed(seed: Optional[int], argv: List[str]) -> None:
    """Re-execute ``argv`` with ``PYTHONHASHSEED`` fixed, unless it already is.

    ``PYTHONHASHSEED`` only takes effect when the interpreter starts, so the only way
    to fix hashing in the running process is to start it again. Returns only when
    the variable already has the wanted value.

    Args:
        seed: The run's seed (None: a seed will be drawn later; use 0).
        argv: What follows the interpreter on its command line (``sys.orig_argv[1:]``:
            a script, ``-m module`` or a console script, and the arguments).
    """
    reexec_with_environment(hash_seed_environment(seed), argv)


def hash_seed_environment(seed: Optional[int]) -> Dict[str, str]:
    """``PYTHONHASHSEED`` for the run's seed (0 when a seed will be drawn later)."""
    return {'PYTHONHASHSEED': str(seed if seed is not None else 0)}


def reexec_with_environment(variables: Dict[str, str], argv: List[str]) -> None:
    """Re-execute ``argv`` with ``variables`` set, unless they already are.

    For what a library reads only when it starts (``PYTHONHASHSEED``, the CPU kernel
    set of ``randomness.cpu_isa``). Returns only when every variable has its value.

    Args:
        variables: Names and values to set.
        argv: What follows the interpreter on its command line (``sys.orig_argv[1:]``).
    """
    if all(os.environ.get(name) == value for name, value in variables.items()):
        return
    os.environ.update(variables)
    os.execv(sys.executable, [sys.executable, *argv])


def main(argv: Optional[List[str]] = None):
    """Train the config; return the Runner."""
    args = parse_args(argv)
    try:
        cfg = build_config(args)
        check_run_inputs(args, cfg)
    except (ValueError, TypeError) as err:
        sys.exit(report(PROG, err))
    if args.check_config:
        print(f'{args.config}: arguments and config are valid')
        sys.exit(0)
    variables = cpu.environment(cfg.randomness.get('cpu_isa'))
    if args.hash_seed_reexec:
        variables.update(hash_seed_environment(cfg.randomness.get('seed')))
    reexec_with_environment(variables, sys.orig_argv[1:])
    prepare_environment(cfg.randomness)
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from ..runner.randomness import note_seed_source
    note_seed_source(cfg.randomness.get('seed'), seed_source(args))
    try:
        from mmdet.utils import setup_cache_size_limit_of_dynamo
        setup_cache_size_limit_of_dynamo()
    except ImportError:
        pass
    from ..resume.atomic_write import SaveError
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    try:
        runner.train()
    except SaveError as err:  # the disk or file system refused a checkpoint: one line
        sys.exit(report(PROG, err, status=1))
    _report(runner)
    close_process_group(runner)
    return runner


def close_process_group(runner) -> None:
    """Wait for every rank (rank 0 may still be saving), then close the process group.

    A rank that exits while its peers still hold gloo connections can abort in
    gloo's threads ("terminate called without an active exception"). So can one whose
    group outlives ``destroy_process_group``: the ``DistributedDataParallel`` wrapper's
    reducer holds the group, and would release it only when the interpreter tears
    down. The Runner keeps the unwrapped model, and the wrapper is freed first.
    """
    import gc

    import torch.distributed as torch_dist
    from mmengine.model import is_model_wrapper
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        if is_model_wrapper(runner.model):
            runner.model = runner.model.module
        gc.collect()
        torch_dist.destroy_process_group()


def _report(runner) -> None:
    from mmengine.dist import is_main_process
    if not is_main_process():
        return
    from mmengine.runner.checkpoint import find_latest_checkpoint
    last = find_latest_checkpoint(runner.work_dir)
    lines = [
        'mmrepro: training finished',
        f'  seed:        {runner.seed}',
        f'  checkpoint:  {last}',
        f'  log:         {osp.join(runner.log_dir, runner.timestamp + ".log")}',
        f'  config dump: {osp.join(runner.work_dir, _config_name(runner))}',
    ]
    record = osp.join(runner.log_dir, 'run_record.json')
    if osp.exists(record):
        lines.append(f'  run record:  {record}')
    runner.logger.info('\n'.join(lines))


def _config_name(runner) -> str:
    filename = runner.cfg.filename
    return osp.basename(filename) if filename else f'{runner.timestamp}.py'


def console_main() -> int:
    """``mmrepro-train`` and ``python -m mmrepro.cli.train``: train, exit 0."""
    main()
    return 0


if __name__ == '__main__':
    sys.exit(console_main())
