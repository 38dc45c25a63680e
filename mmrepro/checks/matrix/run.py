"""The support matrix: which MMDetection families train bit-exactly, measured.

For every family config in ``configs/zoo/`` (mmdet 3.3 configs inherited through
``mmdet::``, random init, the generated tiny data), and for the other codebases'
families (:data:`CODEBASE_FAMILIES`: a model of mmpretrain's, mmpose's, mmrotate's or
MMYOLO's zoo, :mod:`~mmrepro.checks.matrix.codebases`), this runs ``check_repro``: a few
iterations twice through ``tools/train.py``, traced at every iteration, once more with
another ``num_workers`` (0, or 2 where the config has 0) and once resumed from the
middle checkpoint (mid-epoch); then :mod:`~mmrepro.checks.matrix.epoch_resume`: a short schedule
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

``tools/support_matrix.py`` (:mod:`mmrepro.cli.support_matrix`) prints the Markdown
table (:func:`format_table`) and writes it to ``--out``. The device is the one training
uses: CUDA when visible, else CPU.
"""
from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import os.path as osp
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, TextIO

import torch

from ...configs import CONFIG_ROOT
from ...demo import derive_codebase_data
from ...resume.checkpoint_io import safe_load
from ..check.run import CheckOptions, run_check
from ..run_data import SCALARS, read_scalars
from ..runs import Run, load_config, train
from .codebases import CONFIGS, write_codebase_config
from .epoch_resume import EpochResume, run_epoch_resume_check

REPO = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
ZOO_DIR = osp.join(CONFIG_ROOT, 'zoo')
#: Where the table goes by default: the checkout's benchmarks/results, else the cwd.
RESULTS_DIR = osp.join(REPO, 'benchmarks', 'results')
#: Family -> config file name in ``configs/zoo`` (the twelve families, in the table's order).
FAMILIES = ('faster-rcnn', 'mask-rcnn', 'cascade-rcnn', 'retinanet', 'fcos', 'atss',
            'yolox', 'rtmdet', 'dcn-faster-rcnn', 'deformable-detr', 'dino', 'mask2former')
#: The other codebases' families (``<package>-<model>``) -> their model (a key of
#: :data:`~mmrepro.checks.matrix.codebases.CONFIGS`); checked when named.
CODEBASE_FAMILIES = {f"{CONFIGS[model][0]}-{model.replace('_', '-')}": model
                     for model in CONFIGS}
#: Where, under the data root, the other codebases' data is derived.
CODEBASE_DATA = 'codebases'
#: Where, under the work dir, their configs are written (beside the families' runs).
CODEBASE_CONFIGS = 'codebase_configs'
#: Environment variable the zoo configs read their data root from.
DATA_ENV = 'MMREPRO_DEMO_DATA'
#: The checks beyond the rerun, each a column of the table.
CHECKS = ('workers', 'resume', 'epochs')


@dataclass
class FamilyResult:
    """What :func:`run_family_check` found for one family."""

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
    """The zoo config of ``family`` (one of :data:`FAMILIES`)."""
    if family not in FAMILIES:
        raise ValueError(f'unknown family {family!r}; expected one of '
                         f'{", ".join((*FAMILIES, *CODEBASE_FAMILIES))}')
    return osp.join(ZOO_DIR, f'{family}.py')


def family_config(family: str, directory: str, data_root: str) -> str:
    """The config ``family`` is checked with: its zoo config; for one of
    :data:`CODEBASE_FAMILIES`, its config written into ``directory``, over the demo data
    at ``data_root`` and what :func:`derive_codebase_data` derives from it there.

    Raises:
        ValueError: ``family`` is unknown, or its codebase is not installed.
    """
    if family not in CODEBASE_FAMILIES:
        return config_path(family)
    model = CODEBASE_FAMILIES[family]
    package = CONFIGS[model][0]
    if importlib.util.find_spec(package) is None:
        raise ValueError(f'family {family} needs {package}, which this environment does not '
                         f'have; install it (docs/install.md) or leave the family out')
    return write_codebase_config(model, data_root, osp.join(data_root, CODEBASE_DATA),
                                 osp.join(directory, f'{family}.py'))


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
    run = Run('nondeterministic', 'randomness.deterministic=False',
              cfg_options=['randomness.deterministic=False'])
    child = osp.join(work_dir, 'check_repro_config.py')
    fast = _mean_iter_time(train(run, child, work_dir, []))
    slow = _mean_iter_time(deterministic_log)
    return None if not fast or not slow else slow / fast


def _final_weights_identical(work_dir: str, iters: int) -> bool:
    """Whether run_a's and run_b's last checkpoints hold the same ``state_dict`` bytes."""
    states = [safe_load(osp.join(work_dir, run, f'iter_{iters}.pth'))['state_dict']
              for run in ('run_a', 'run_b')]
    return list(states[0]) == list(states[1]) and all(
        states[0][k].dtype == states[1][k].dtype and states[0][k].shape == states[1][k].shape
        and states[0][k].contiguous().view(-1).view(torch.uint8).equal(
            states[1][k].contiguous().view(-1).view(torch.uint8)) for k in states[0])


def run_family_check(family: str, iters: int, work_dir: str, data_root: str,
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
    with _environment({DATA_ENV: osp.join(osp.abspath(data_root), '')}):
        return _run_family_check(family, iters, work_dir, osp.abspath(data_root), speed,
                                 cfg_options, keep_checkpoints, checks, epochs)


def _run_family_check(family: str, iters: int, work_dir: str, data_root: str,
                      speed: Optional[bool], cfg_options: Sequence[str],
                      keep_checkpoints: bool, checks: Sequence[str],
                      epochs: int) -> FamilyResult:
    """:func:`run_family_check` with the data's variable set."""
    result = FamilyResult(family, device_name())
    speed = torch.cuda.is_available() if speed is None else speed
    try:
        config = family_config(family, osp.join(work_dir, CODEBASE_CONFIGS), data_root)
        options = _family_check_options(config, iters, osp.join(work_dir, family), checks,
                                        cfg_options)
        options.validate()
        found = run_check(options, say=_quiet)
        failed = {text.split(' ')[0]: text for text in found.failed}
        result.identical = 'run_b' not in failed
        result.weights_identical = _final_weights_identical(options.work_dir, iters)
        for run in found.log_dirs:
            cell = 'yes' if run not in failed else 'NO: ' + failed[run].split(') ', 1)[1]
            if run.startswith('workers'):
                result.workers = cell
            elif run == 'resume':
                result.resume = cell
        if 'epochs' in checks:
            result.epochs = run_epoch_resume_check(config,
                                                   osp.join(work_dir, family, 'epochs'),
                                                   epochs, cfg_options=cfg_options)
        if not keep_checkpoints:
            for path in glob.glob(osp.join(work_dir, family, '**', '*.pth'),
                                  recursive=True):
                os.remove(path)
        if speed:
            result.speed_ratio = _speed_ratio(options.work_dir, found.log_dirs['run_a'])
    except (ValueError, RuntimeError, OSError, KeyError) as err:
        result.error = f'{type(err).__name__}: {str(err).splitlines()[0]}'
        return result
    audit = found.audit
    if isinstance(audit, str):
        result.error = audit
    for entry in audit if isinstance(audit, list) else []:
        if entry['action'] == 'replaced':
            result.replaced.append(entry['op'])
        else:
            result.remaining.append(f"{entry['name']} ({entry['op']})")
    counts = Counter(result.replaced)
    result.replaced = [f'{op} x{n}' for op, n in counts.items()]
    result.alerts = sorted(found.alerts or {})
    return result


def _family_check_options(config: str, iters: int, work_dir: str, checks: Sequence[str],
                          cfg_options: Sequence[str]) -> CheckOptions:
    """The check of a family's ``config``: resume mid-run, other num_workers (0 or 2), as
    ``checks`` say."""
    workers = None
    if 'workers' in checks:
        cfg = load_config(config, list(cfg_options))
        workers = 2 if cfg.train_dataloader.get('num_workers') == 0 else 0
    return CheckOptions(config, iters, work_dir, list(cfg_options),
                        resume_check='resume' in checks, workers_check=workers)


def _quiet(*args: object, **kwargs: object) -> None:
    """Say nothing: the table says it all."""


def run_family_checks(families: Sequence[str], iters: int, work_dir: str, data_root: str,
                      jobs: int = 1, cfg_options: Sequence[str] = (),
                      progress: Optional[TextIO] = None,
                      keep_checkpoints: bool = True, checks: Sequence[str] = CHECKS,
                      epochs: int = 4) -> List[FamilyResult]:
    """:func:`run_family_check` for each family, ``jobs`` at a time.

    With ``jobs > 1`` the families' runs share the CPU cores (each training process
    gets ``cores // jobs`` OpenMP threads, both runs of a family the same number), and
    nothing is timed: the throughput column needs ``jobs=1``.

    Returns:
        The results in ``families`` order.
    """
    speed = torch.cuda.is_available() and jobs == 1
    progress = progress or sys.stdout
    if any(family in CODEBASE_FAMILIES for family in families):  # once, before the jobs
        derive_codebase_data(data_root, osp.join(data_root, CODEBASE_DATA))

    def one(family: str) -> FamilyResult:
        start = time.perf_counter()
        result = run_family_check(family, iters, work_dir, data_root, speed, cfg_options,
                                  keep_checkpoints, checks, epochs)
        state = 'bit-exact' if result.bit_exact else f'NOT bit-exact {result.error or ""}'
        print(f'{family}: {state} ({time.perf_counter() - start:.0f} s)', file=progress,
              flush=True)
        return result
    # Read by the training subprocesses; the caller's values are put back after.
    variables = {DATA_ENV: osp.join(osp.abspath(data_root), '')}
    if jobs > 1:
        variables['OMP_NUM_THREADS'] = str(max(1, (os.cpu_count() or 1) // jobs))
    with _environment(variables), ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, families))


@contextlib.contextmanager
def _environment(variables: Dict[str, str]) -> Iterator[None]:
    """Set ``variables`` (read by the training subprocesses); put the caller's back."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def format_table(results: List[FamilyResult]) -> str:
    """The Markdown table of ``results`` (one row per family). Its second column names
    the zoo config each family inherits: mmdet 3.3's, or where another codebase's family
    is among them, each with its package (``mmpretrain::...``)."""
    mmdet_only = all(r.family not in CODEBASE_FAMILIES for r in results)
    rows = [f"| family | {'mmdet 3.3 config' if mmdet_only else 'zoo config'} | rerun | "
            'num_workers | resume mid-epoch | resume every epoch | replaced by mmrepro | '
            'nondeterministic on CUDA (module: op) | PyTorch alerts | throughput det/nondet |',
            '|---|---|---|---|---|---|---|---|---|---|']
    for r in results:
        base = _mmdet_base(r.family) if r.family not in CODEBASE_FAMILIES else (
            CONFIGS[CODEBASE_FAMILIES[r.family]][1][0])
        base = base if mmdet_only or r.family in CODEBASE_FAMILIES else f'mmdet::{base}'
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
