"""``tools/support_matrix.py``: which MMDetection families train bit-exactly, measured.

For every family config in ``configs/zoo/`` (mmdet 3.3 configs inherited through
``mmdet::``, random init, the generated tiny data) this runs ``check_repro``: a few
iterations twice through ``tools/train.py``, traced at every iteration, once more with
another ``num_workers`` (0, or 2 where the config has 0) and once resumed from the
middle checkpoint (mid-epoch); then :mod:`~mmrepro.cli.epoch_resume`: a short schedule
crossing the family's switch hooks, resumed from every epoch. Each column is measured:

- rerun: every traced iteration (forward outputs, gradients, parameters and buffers)
  identical, and the final checkpoints' ``state_dict`` bytes identical;
- num_workers, resume mid-epoch: every traced iteration identical to the first run;
- resume every epoch: the final weights, EMA weights and optimizer state identical to
  the uninterrupted run's, resumed from each epoch;
- replaced: the ops mmrepro made deterministic (the mmcv op audit);
- remaining: what stays nondeterministic on CUDA, with module paths (the audit), and
  the operations PyTorch reported in deterministic mode (``warn_only=True``);
- on CUDA, throughput: a third run with ``randomness.deterministic=False``, and the
  ratio of iteration times (deterministic over nondeterministic, iterations after the
  first).

It prints a Markdown table and writes it to ``--out`` (default
``benchmarks/results/support_matrix_<device>.md``). The device is the one training
uses: CUDA when visible, else CPU.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import io
import os
import os.path as osp
import platform
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, TextIO

import torch

from ..configs import CONFIG_ROOT
from . import check_repro
from .config_args import ArgumentParser, parse_cfg_options, report
from .epoch_resume import EpochResume, check_epoch_resume
from .repro_diff import SCALARS, read_scalars

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
ZOO_DIR = osp.join(CONFIG_ROOT, 'zoo')
#: Where the table goes by default: the checkout's benchmarks/results, else the cwd.
RESULTS_DIR = osp.join(REPO, 'benchmarks', 'results')
#: Family -> config file name in ``configs/zoo`` (the twelve families, in the table's order).
FAMILIES = ('faster-rcnn', 'mask-rcnn', 'cascade-rcnn', 'retinanet', 'fcos', 'atss',
            'yolox', 'rtmdet', 'dcn-faster-rcnn', 'deformable-detr', 'dino', 'mask2former')
#: Environment variable the zoo configs read their data root from.
DATA_ENV = 'MMREPRO_DEMO_DATA'
#: The checks beyond the rerun, each a column of the table.
CHECKS = ('workers', 'resume', 'epochs')


@dataclass
class FamilyResult:
    """What :func:`check_family` found for one family."""

    family: str
    device: str
    identical: bool = False
    weights_identical: bool = False
    workers: Optional[str] = None  # 'yes', 'NO (...)'; None: not checked
    resume: Optional[str] = None
    epochs: Optional[EpochResume] = None
    replaced: List[str] = field(default_factory=list)
    remaining: List[str] = field(default_factory=list)
    alerts: List[str] = field(default_factory=list)
    speed_ratio: Optional[float] = None
    error: Optional[str] = None

    @property
    def bit_exact(self) -> bool:
        """Every column checked is identical, and the checks ran."""
        return (self.error is None and self.identical and self.weights_identical
                and all(c in (None, 'yes') for c in (self.workers, self.resume))
                and (self.epochs is None or self.epochs.identical))


def config_path(family: str) -> str:
    """The zoo config of ``family``."""
    if family not in FAMILIES:
        raise ValueError(f'unknown family {family!r}; expected one of '
                         f'{", ".join(FAMILIES)}')
    return osp.join(ZOO_DIR, f'{family}.py')


def device_name() -> str:
    """The training device, in words."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'


def _mean_iter_time(log_dir: str) -> Optional[float]:
    """Mean ``time`` of the logged iterations after the first (MMEngine's scalars)."""
    rows = read_scalars(osp.join(log_dir, SCALARS))
    times = [row['time'] for row in rows if 'time' in row and row['iter'] > 1]
    return sum(times) / len(times) if times else None


def _speed_ratio(work_dir: str, deterministic_log: str) -> Optional[float]:
    """Deterministic over nondeterministic iteration time (a third, nondeterministic run)."""
    run = check_repro.Run('nondeterministic', 'randomness.deterministic=False',
                          cfg_options=['randomness.deterministic=False'])
    child = osp.join(work_dir, 'check_repro_config.py')
    fast = _mean_iter_time(check_repro.train(run, child, work_dir, []))
    slow = _mean_iter_time(deterministic_log)
    return None if not fast or not slow else slow / fast


def _final_weights_identical(work_dir: str, iters: int) -> bool:
    """Whether run_a's and run_b's last checkpoints hold the same ``state_dict`` bytes."""
    from ..checkpoint_io import safe_load
    states = [safe_load(osp.join(work_dir, run, f'iter_{iters}.pth'))['state_dict']
              for run in ('run_a', 'run_b')]
    return list(states[0]) == list(states[1]) and all(
        states[0][k].dtype == states[1][k].dtype and states[0][k].shape == states[1][k].shape
        and states[0][k].contiguous().view(-1).view(torch.uint8).equal(
            states[1][k].contiguous().view(-1).view(torch.uint8)) for k in states[0])


def check_family(family: str, iters: int, work_dir: str, data_root: str,
                 speed: Optional[bool] = None, cfg_options: Sequence[str] = (),
                 keep_checkpoints: bool = True, checks: Sequence[str] = CHECKS,
                 epochs: int = 4) -> FamilyResult:
    """Run ``check_repro`` on ``family``'s zoo config and tabulate what it found.

    Args:
        family: One of :data:`FAMILIES`.
        iters: Iterations per run (>= 2 when ``speed``).
        work_dir: Where the runs go (``<work_dir>/<family>``).
        data_root: The generated tiny COCO data (:func:`mmrepro.demo.make_tiny_coco`).
        speed: Also time a nondeterministic run; default: on CUDA only.
        cfg_options: ``KEY=VALUE`` overrides for every run (``--cfg-options``).
        keep_checkpoints: False deletes the runs' checkpoints once compared (a
            Cascade R-CNN pair is about 0.9 GB).
        checks: Which of :data:`CHECKS` to run besides the rerun.
        epochs: Length of the schedule of the ``epochs`` check.

    Returns:
        The family's row. A run that fails is reported in ``error``, not raised.
    """
    result = FamilyResult(family, device_name())
    speed = torch.cuda.is_available() if speed is None else speed
    os.environ[DATA_ENV] = osp.join(osp.abspath(data_root), '')
    found: dict = {}
    try:
        args = check_repro.parse_args([
            config_path(family), '--iters', str(iters), '--work-dir',
            osp.join(work_dir, family), *_check_flags(family, checks, cfg_options),
            *(['--cfg-options', *cfg_options] if cfg_options else [])])
        check_repro.validate_args(args)
        check_repro.run_check(args, found)
        failed = {text.split(' ')[0]: text for text in found['failed']}
        result.identical = 'run_b' not in failed
        result.weights_identical = _final_weights_identical(args.work_dir, iters)
        for run in found['log_dirs']:
            cell = 'yes' if run not in failed else 'NO: ' + failed[run].split(') ', 1)[1]
            if run.startswith('workers'):
                result.workers = cell
            elif run == 'resume':
                result.resume = cell
        if 'epochs' in checks:
            result.epochs = check_epoch_resume(config_path(family),
                                               osp.join(work_dir, family, 'epochs'),
                                               epochs, cfg_options=cfg_options)
        if not keep_checkpoints:
            for path in glob.glob(osp.join(work_dir, family, '**', '*.pth'),
                                  recursive=True):
                os.remove(path)
        if speed:
            result.speed_ratio = _speed_ratio(args.work_dir, found['log_dirs']['run_a'])
    except (ValueError, RuntimeError, OSError, KeyError) as err:
        result.error = f'{type(err).__name__}: {str(err).splitlines()[0]}'
        return result
    audit = found.get('audit')
    if isinstance(audit, str):
        result.error = audit
    for entry in audit if isinstance(audit, list) else []:
        if entry['action'] == 'replaced':
            result.replaced.append(entry['op'])
        else:
            result.remaining.append(f"{entry['name']} ({entry['op']})")
    counts = Counter(result.replaced)
    result.replaced = [f'{op} x{n}' for op, n in counts.items()]
    result.alerts = sorted(found.get('alerts') or {})
    return result


def _check_flags(family: str, checks: Sequence[str], cfg_options: Sequence[str]) -> List[str]:
    """check_repro's flags for ``checks``: resume mid-run, other num_workers (0 or 2)."""
    flags = ['--resume-check'] if 'resume' in checks else []
    if 'workers' in checks:
        cfg = check_repro.load_config(config_path(family), list(cfg_options))
        flags += ['--workers-check', '2' if cfg.train_dataloader.get('num_workers') == 0
                  else '0']
    return flags


def check_families(families: Sequence[str], iters: int, work_dir: str, data_root: str,
                   jobs: int = 1, cfg_options: Sequence[str] = (),
                   progress: Optional[TextIO] = None,
                   keep_checkpoints: bool = True, checks: Sequence[str] = CHECKS,
                   epochs: int = 4) -> List[FamilyResult]:
    """:func:`check_family` for each family, ``jobs`` at a time.

    With ``jobs > 1`` the families' runs share the CPU cores (each training process
    gets ``cores // jobs`` OpenMP threads, both runs of a family the same number), and
    nothing is timed: the throughput column needs ``jobs=1``.

    Returns:
        The results in ``families`` order.
    """
    speed = torch.cuda.is_available() and jobs == 1
    progress = progress or sys.stdout

    def one(family: str) -> FamilyResult:
        start = time.perf_counter()
        result = check_family(family, iters, work_dir, data_root, speed, cfg_options,
                              keep_checkpoints, checks, epochs)
        state = 'bit-exact' if result.bit_exact else f'NOT bit-exact {result.error or ""}'
        print(f'{family}: {state} ({time.perf_counter() - start:.0f} s)', file=progress,
              flush=True)
        return result
    threads = os.environ.get('OMP_NUM_THREADS')
    if jobs > 1:  # read by the training subprocesses
        os.environ['OMP_NUM_THREADS'] = str(max(1, (os.cpu_count() or 1) // jobs))
    try:
        # check_repro prints its own report; the table says it all, so that goes nowhere.
        with contextlib.redirect_stdout(io.StringIO()):
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                return list(pool.map(one, families))
    finally:
        if threads is None:
            os.environ.pop('OMP_NUM_THREADS', None)
        else:
            os.environ['OMP_NUM_THREADS'] = threads


def format_table(results: List[FamilyResult]) -> str:
    """The Markdown table of ``results`` (one row per family)."""
    rows = ['| family | mmdet 3.3 config | rerun | num_workers | resume mid-epoch | '
            'resume every epoch | replaced by mmrepro | nondeterministic on CUDA '
            '(module: op) | PyTorch alerts | throughput det/nondet |',
            '|---|---|---|---|---|---|---|---|---|---|']
    for r in results:
        base = _mmdet_base(r.family)
        if r.error:
            cells = ['error: ' + r.error, '-', '-', '-']
        else:
            cells = ['yes' if r.identical and r.weights_identical else 'NO',
                     r.workers or '-', r.resume or '-',
                     r.epochs.describe() if r.epochs else '-']
        ratio = f'{r.speed_ratio:.2f}x' if r.speed_ratio else 'n/a'
        rows.append(f"| {r.family} | `{base}` | {' | '.join(cells)} | "
                    f"{', '.join(r.replaced) or '-'} | {', '.join(r.remaining) or 'none'} | "
                    f"{', '.join(r.alerts) or 'none'} | {ratio} |")
    return '\n'.join(rows)


def _mmdet_base(family: str) -> str:
    with open(config_path(family)) as f:
        text = f.read()
    start = text.index("'mmdet::") + len("'mmdet::")
    return text[start:text.index("'", start)]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Command-line arguments of ``tools/support_matrix.py``."""
    parser = ArgumentParser(
        prog='support_matrix', description=__doc__.split('\n\n')[0].replace('``', ''),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='exit status: 0 every family bit-exact; 1 some family is not (named in the '
        'table); 2 bad arguments or --cfg-options (one error: line, before anything is '
        'written)')
    parser.add_argument('--families', nargs='+', default=list(FAMILIES), metavar='NAME',
                        help=f'families to check (default: all: {" ".join(FAMILIES)})')
    parser.add_argument('--iters', type=int, default=4,
                        help='iterations per run (default: 4)')
    parser.add_argument('--checks', nargs='*', default=list(CHECKS), choices=CHECKS,
                        metavar='CHECK', help='columns to measure besides the rerun: '
                        f'{" ".join(CHECKS)} (default: all; none: reruns only)')
    parser.add_argument('--epochs', type=int, default=4,
                        help='schedule length of the "epochs" check, switch hooks in its '
                        'middle (default: 4)')
    parser.add_argument('--work-dir', default=osp.join('work_dirs', 'support_matrix'),
                        help='where the runs go (default: work_dirs/support_matrix)')
    parser.add_argument('--data-root', default=osp.join('data', 'demo'),
                        help='tiny COCO data; generated there if missing (default: '
                        'data/demo)')
    parser.add_argument('--jobs', type=int, default=1,
                        help='families checked at a time (default: 1; the throughput '
                        'column needs 1)')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='overrides for every run, as in tools/train.py')
    parser.add_argument('--discard-checkpoints', action='store_true',
                        help="delete each family's checkpoints once compared")
    parser.add_argument('--out', default=None,
                        help='Markdown file to write (default: benchmarks/results/'
                        'support_matrix_<device>.md)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Check every family, print and write the table; 0 if all are bit-exact, else 1."""
    args = parse_args(argv)
    try:
        for family in args.families:
            config_path(family)
        if args.iters < 2:
            raise ValueError(f'--iters must be >= 2 (the first iteration is not timed), got '
                             f'{args.iters}')
        if args.epochs < 2:
            raise ValueError(f'--epochs must be >= 2 (resumed from each but the last), '
                             f'got {args.epochs}')
        if args.jobs < 1:
            raise ValueError(f'--jobs must be >= 1, got {args.jobs}')
        parse_cfg_options(args.cfg_options)
        for family in args.families:  # every config with the options, before any run
            try:
                check_repro.load_config(config_path(family), args.cfg_options)
            except ValueError as err:
                raise ValueError(f'family {family}: {err}') from None
    except ValueError as err:
        return report('support_matrix', err)
    from ..demo import make_tiny_coco
    make_tiny_coco(args.data_root)
    device = device_name()
    results = check_families(args.families, args.iters, args.work_dir, args.data_root,
                             args.jobs, args.cfg_options,
                             keep_checkpoints=not args.discard_checkpoints,
                             checks=args.checks, epochs=args.epochs)
    table = format_table(results)
    header = (f'# Support matrix on {device}\n\nMeasured by `python tools/support_matrix.py '
              f'--iters {args.iters} --jobs {args.jobs} --checks {" ".join(args.checks)} '
              f'--epochs {args.epochs}` on {time.strftime("%Y-%m-%d")}, '
              f'{os.cpu_count()} CPU cores: torch {torch.__version__}, CUDA '
              f'{torch.version.cuda or "n/a"}, Python {platform.python_version()}.\n\n')
    name = f"support_matrix_{device.replace(' ', '_').lower()}.md"
    out = args.out or (osp.join(RESULTS_DIR, name) if osp.isdir(RESULTS_DIR) else name)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        f.write(header + table + '\n')
    print('\n' + table + f'\n\nwritten to {out}')
    return 0 if all(r.bit_exact for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
