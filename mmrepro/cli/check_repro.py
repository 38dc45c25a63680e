"""``mmrepro-check`` (``tools/check_repro.py``): is this config reproducible here?

Without ``--against``, trains a config twice for a few iterations and compares traces
(:mod:`mmrepro.checks.check`), optionally resumed and with other workers. With
``--against BASELINE``, checks that this machine reproduces a team's baseline
(:mod:`mmrepro.checks.against`): before training, then through the baseline's first
traced optimizer steps, or from one of its checkpoints (``--from``); without CONFIG it
trains the baseline's own config. A baseline that is a test run (``mmrepro-test``) is
checked by testing ``--from CHECKPOINT`` here (:mod:`mmrepro.checks.against.retest`).

Exit status: 0 every comparison bit-identical and real runs of the config reproducible
(the baseline reproduced), 1 a run diverged or real runs of the config would not be
reproducible (no seed, ``deterministic=False``...; or, with ``--against``, the config or
data differ before training), 2 the check cannot be done (bad arguments, missing config
or file, a run fails), 3 nothing to compare.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..checks.against.retest import run_test_against
from ..checks.against.run import AgainstOptions, run_against
from ..checks.check.run import CheckOptions, run_check
from ..checks.run_data import is_test_run
from ..checks.runs import DEFAULT_ITERS, PROG
from ..record.bundle import BundleError
from ..record.run_record import RunRecordError
from ..trace import TraceError
from .config_args import ArgumentParser, report


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line (exits with status 2 and one error: line on a malformed one)."""
    parser = ArgumentParser(
        prog=PROG, description='Train a config twice for a few iterations and check that '
        'the runs are bit-identical (losses, forward outputs, gradients, weights); with '
        '--against, check that this machine reproduces a baseline.',
        epilog='exit status: 0 every comparison bit-identical and real runs of the config '
        'reproducible (with --against: the baseline reproduced bit for bit, or, without '
        '--bitwise, equivalent within rounding); 1 a run diverged (the '
        'first iteration and module are named), or real runs of the config would not be '
        'reproducible (no seed, deterministic=False, an operation a real run stops at; '
        'with --against also: the config or data differ, before training); 2 bad '
        'arguments, config or file, or a training run failed (its log is named); 3 '
        'nothing to compare')
    parser.add_argument('config', nargs='?', default=None,
                        help="train config file (with --against: default the baseline's "
                        'own, its config dump)')
    parser.add_argument('--iters', type=int, default=None,
                        help=f'iterations per run (default: {DEFAULT_ITERS}); with --against, '
                        'optimizer steps to train (default: the baseline\'s traced steps up '
                        f'to {DEFAULT_ITERS}, or up to its next traced step after --from)')
    parser.add_argument('--work-dir', help='where the runs go (default: '
                        'work_dirs/check_repro/<config name>, with --against '
                        'work_dirs/check_against/<config or baseline name>); a previous '
                        "check's work dir is replaced, any other non-empty directory refused")
    parser.add_argument('--keep-checkpoints', action='store_true',
                        help="keep the runs' checkpoints (default: deleted once compared, but "
                        'the one a diverging resume run started from)')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='config overrides, as for tools/train.py')
    parser.add_argument('--resume-check', action='store_true',
                        help='also resume the first run from its middle checkpoint')
    parser.add_argument('--workers-check', type=int, default=None, metavar='K',
                        help='also train with train_dataloader.num_workers=K')
    parser.add_argument('--against', metavar='BASELINE', default=None,
                        help="check that this machine reproduces BASELINE: its work dir or "
                        'the bundle mmrepro-bundle wrote; or a test run of mmrepro-test (its '
                        'test_record.json or log dir), tested here with --from CHECKPOINT')
    parser.add_argument('--from', dest='resume_from', metavar='CHECKPOINT', default=None,
                        help="with --against: start from this checkpoint of the baseline's "
                        'and train to its next traced step (a test run: the checkpoint to '
                        'test)')
    parser.add_argument('--go-on', action='store_true',
                        help='with --against: train and compare even when the config or '
                        'the data differ from the baseline\'s')
    parser.add_argument('--bitwise', action='store_true',
                        help='with --against: require bit for bit; a run that is only '
                        'equivalent within rounding then exits 1 (default: it exits 0)')
    parser.add_argument('--launcher', choices=['none', 'pytorch'], default='none',
                        help='pytorch: every run is --nproc processes launched by '
                        'torch.distributed.run (NCCL on GPUs, gloo on CPU); default: none')
    parser.add_argument('--nproc', type=int, default=None, metavar='N',
                        help='processes per run with --launcher pytorch (default: 2); needs '
                        '--launcher pytorch')
    return parser.parse_args(argv)


def processes(args: argparse.Namespace) -> int:
    """Processes per run: ``--nproc`` (2 by default) with ``--launcher pytorch``, else 0.

    Raises:
        ValueError: ``--nproc`` without ``--launcher pytorch``, or below 1.
    """
    if args.launcher != 'pytorch':
        if args.nproc is not None:
            raise ValueError(f'--nproc {args.nproc} needs --launcher pytorch: without a '
                             'launcher every run is one process; pass --launcher pytorch '
                             f'--nproc {args.nproc}, or leave out --nproc')
        return 0
    nproc = 2 if args.nproc is None else args.nproc
    if nproc < 1:
        raise ValueError(f'--nproc must be >= 1, got {nproc}')
    return nproc


def options_from_args(args: argparse.Namespace) -> CheckOptions:
    """The plain check's options from the parsed command line.

    Raises:
        ValueError: No CONFIG, or ``--nproc`` without ``--launcher pytorch``.
    """
    if args.config is None:
        raise ValueError('CONFIG is missing: give the train config to check (mmrepro-check '
                         'CONFIG), or a baseline to check against (mmrepro-check --against '
                         'BASELINE trains its own config)')
    return CheckOptions(config=args.config,
                        iters=DEFAULT_ITERS if args.iters is None else args.iters,
                        work_dir=args.work_dir, cfg_options=list(args.cfg_options),
                        resume_check=args.resume_check, workers_check=args.workers_check,
                        nproc=processes(args), keep_checkpoints=args.keep_checkpoints)


def against_options(args: argparse.Namespace) -> AgainstOptions:
    """The baseline check's options from the parsed command line.

    Raises:
        ValueError: A flag of the plain check was given with ``--against``, or
            ``--nproc`` without ``--launcher pytorch``.
    """
    for flag, given in (('--resume-check', args.resume_check),
                        ('--workers-check', args.workers_check is not None)):
        if given:
            raise ValueError(f'{flag} checks a config on its own; it cannot be combined with '
                             '--against (use --from CHECKPOINT to check a resumed run)')
    if args.keep_checkpoints:
        raise ValueError('--keep-checkpoints keeps the checkpoints of a check on its own; '
                         'with --against the check writes none: leave it out')
    return AgainstOptions(config=args.config, baseline=args.against, steps=args.iters,
                          resume_from=args.resume_from, go_on=args.go_on,
                          work_dir=args.work_dir, cfg_options=list(args.cfg_options),
                          nproc=processes(args), bitwise=args.bitwise)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``tools/check_repro.py``; returns the exit status."""
    args = parse_args(argv)
    try:
        if args.against is None:
            for flag, given in (('--from', args.resume_from), ('--go-on', args.go_on),
                                ('--bitwise', args.bitwise)):
                if given:
                    raise ValueError(f'{flag} needs --against BASELINE')
            options = options_from_args(args)
            options.validate()
            return run_check(options).status
        against = against_options(args)
        if is_test_run(against.baseline):
            return run_test_against(against)
        against.validate()
        return run_against(against).status
    except (ValueError, TypeError, RuntimeError, RunRecordError, TraceError,
            BundleError) as err:
        return report(PROG, err)


if __name__ == '__main__':
    sys.exit(main())
