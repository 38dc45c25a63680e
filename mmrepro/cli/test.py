"""``tools/test.py`` / ``mmrepro-test``: MMDetection's test entry point, recorded.

Same arguments as MMDetection 3.x's ``tools/test.py`` (``--work-dir``, ``--out``,
``--show``, ``--show-dir``, ``--wait-time``, ``--cfg-options``, ``--launcher``, ``--tta``)
plus ``--deterministic``/``--no-deterministic`` and ``--check-config``. It enables
mmrepro for the run (the config's ``randomness`` applies: deterministic algorithms, the
CPU kernel set, threads), evaluates the checkpoint, and writes ``test_record.json`` in
the log dir: the checkpoint's weights digest, the metrics and a digest of every image's
predictions in dataset order (:mod:`mmrepro.record.evaluation`), beside the versions,
devices and settings of a run record. ``mmrepro-diff`` compares two test runs and names
the first image whose predictions differ.
"""
from __future__ import annotations

import argparse
import os.path as osp
import sys
from copy import deepcopy
from typing import Any, List, Optional

from ..determinism import cpu
from ..run.config import (
    ConfigError,
    check_launcher_environment,
    check_training_config,
    check_work_dir,
    load_config,
)
from ..run.enable import enable_in_config
from .config_args import (
    ArgumentParser,
    add_run_arguments,
    parse_run_args,
    report,
    set_work_dir,
)
from .exit_codes import epilog
from .train import close_process_group, prepare_environment, reexec_with_environment

PROG = 'mmrepro-test'
#: The test-time augmentation ``--tta`` uses where the config has none (MMDetection's).
DEFAULT_TTA_MODEL = dict(type='DetTTAModel',
                         tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))
TTA_META_KEYS = ('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'flip',
                 'flip_direction')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse MMDetection's test arguments and mmrepro's."""
    parser = ArgumentParser(
        prog=PROG, description='Test (and evaluate) a checkpoint reproducibly (mmrepro), '
        'recording the metrics and a digest of every image\'s predictions',
        epilog=epilog('test'))
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the directory to save the file containing '
                        'evaluation metrics (and the test record)')
    parser.add_argument('--out', help='dump predictions to a pickle file for offline '
                        'evaluation (its bytes differ on every run; the test record\'s '
                        'digests compare the values)')
    parser.add_argument('--show', action='store_true', help='show prediction results')
    parser.add_argument('--show-dir', help='directory where painted images will be saved '
                        '(under work_dir/timestamp/)')
    parser.add_argument('--wait-time', type=float, default=2,
                        help='the interval of show (s)')
    add_run_arguments(parser)
    parser.add_argument('--tta', action='store_true', help='test-time augmentation '
                        '(the config\'s tta_model and tta_pipeline, else a flip)')
    parser.add_argument('--check-config', action='store_true',
                        help='only check the arguments, the config and the checkpoint (exit '
                        '0 if good, 2 with one error: line), building and writing nothing')
    return parse_run_args(parser, argv)


def build_config(args: argparse.Namespace) -> Any:
    """Load the config and apply the CLI, as MMDetection's ``tools/test.py`` does, with
    mmrepro enabled (``custom_imports``, ``ReproducibilityHook``).

    Raises:
        ConfigError: A bad argument, config or checkpoint (one line; nothing is written).
    """
    from ..resume.preflight import check_checkpoint_file
    if args.out is not None and not args.out.endswith(('.pkl', '.pickle')):
        raise ConfigError(f'--out {args.out!r}: expected a pickle file name ending in .pkl '
                          'or .pickle (MMDetection dumps the predictions with pickle); e.g. '
                          '--out results.pkl')
    check_checkpoint_file(args.checkpoint, 'CHECKPOINT',
                          'give the .pth file to test, e.g. work_dirs/NAME/epoch_12.pth')
    cfg = load_config(args.config, args.cfg_options)
    cfg.launcher = args.launcher
    set_work_dir(cfg, args.work_dir, args.config)
    cfg.load_from = args.checkpoint
    cfg.resume = False
    if not cfg.get('test_dataloader') or not cfg.get('test_evaluator'):
        raise ConfigError(f'{args.config}: test_dataloader and test_evaluator must be set to '
                          'test, got test_dataloader='
                          f'{_short(cfg.get("test_dataloader"))}, test_evaluator='
                          f'{_short(cfg.get("test_evaluator"))}; set them (MMDetection '
                          'configs set test_dataloader = val_dataloader)')
    randomness = dict(cfg.get('randomness') or {})
    if args.deterministic is not None:
        randomness['deterministic'] = args.deterministic
    if args.verify_checkpoints is not None:
        randomness['verify_checkpoints'] = args.verify_checkpoints
    cfg.randomness = randomness
    check_training_config(cfg, None)  # randomness, before anything is built
    check_checkpoint_file(args.checkpoint, 'CHECKPOINT', 'give the .pth file to test',
                          randomness)  # against its weights digest
    if args.show or args.show_dir:
        from mmdet.engine.hooks.utils import trigger_visualization_hook
        cfg = trigger_visualization_hook(cfg, args)
    if args.tta:
        _enable_tta(cfg)
    cfg.custom_imports, cfg.custom_hooks, _ = enable_in_config(cfg.get('custom_imports'),
                                                               cfg.get('custom_hooks'))
    check_work_dir(cfg.work_dir, '--work-dir' if args.work_dir is not None else 'work_dir')
    check_launcher_environment(args.launcher, whole_world=args.check_config)
    return cfg


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'


def _enable_tta(cfg: Any) -> None:
    """Wrap the model and the test pipeline for test-time augmentation, as MMDetection's
    ``tools/test.py --tta`` does (a flip where the config has no ``tta_pipeline``)."""
    from mmengine.config import ConfigDict
    from mmengine.logging import print_log
    if 'tta_model' not in cfg:
        print_log('mmrepro-test --tta: the config has no tta_model; using DetTTAModel with '
                  'nms 0.5 and 100 boxes per image (MMDetection\'s default)', logger='current')
        cfg.tta_model = deepcopy(DEFAULT_TTA_MODEL)
    if 'tta_pipeline' not in cfg:
        print_log('mmrepro-test --tta: the config has no tta_pipeline; using the test '
                  'pipeline with a flip (MMDetection\'s default)', logger='current')
        data = cfg.test_dataloader.dataset
        while 'dataset' in data:
            data = data['dataset']
        pipeline = deepcopy(data.pipeline)
        pipeline[-1] = dict(type='TestTimeAug', transforms=[
            [dict(type='RandomFlip', prob=1.), dict(type='RandomFlip', prob=0.)],
            [dict(type='PackDetInputs', meta_keys=TTA_META_KEYS)]])
        cfg.tta_pipeline = pipeline
    cfg.model = ConfigDict(**cfg.tta_model, module=cfg.model)
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline


def _dump_metric(out: str) -> Any:
    """The metric that writes ``--out``: MMDetection's where installed, else MMEngine's."""
    try:
        from mmdet.evaluation import DumpDetResults
        return DumpDetResults(out_file_path=out)
    except ImportError:
        from mmengine.evaluator import DumpResults
        return DumpResults(out_file_path=out)


def main(argv: Optional[List[str]] = None) -> Any:
    """Test the checkpoint; return the metrics (exit 2 on bad input)."""
    args = parse_args(argv)
    try:
        cfg = build_config(args)
    except (ValueError, TypeError) as err:
        sys.exit(report(PROG, err))
    if args.check_config:
        print(f'{args.config}: arguments, config and checkpoint are valid')
        sys.exit(0)
    reexec_with_environment(cpu.environment(cfg.randomness.get('cpu_isa')),
                            sys.orig_argv[1:])
    prepare_environment(cfg.randomness)
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner
    try:
        from mmdet.utils import setup_cache_size_limit_of_dynamo
        setup_cache_size_limit_of_dynamo()
    except ImportError:
        pass
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    if args.out is not None:
        runner.test_evaluator.metrics.append(_dump_metric(args.out))
    metrics = runner.test()
    _report(runner)
    close_process_group(runner)
    return metrics


def _report(runner: Any) -> None:
    from mmengine.dist import is_main_process

    from ..record.run_record import TEST_RECORD_NAME
    if not is_main_process():
        return
    record = osp.join(runner.log_dir, TEST_RECORD_NAME)
    runner.logger.info(f'mmrepro: test finished\n  test record: {record}\n'
                       f'  compare:     mmrepro-diff BASELINE_TEST_RECORD {record}')


def console_main() -> int:
    """``mmrepro-test`` and ``python -m mmrepro.cli.test``: test, exit 0."""
    main()
    return 0


if __name__ == '__main__':
    sys.exit(console_main())
