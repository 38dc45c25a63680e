"""The Runner's seeding goes through mmrepro's core (``ReproRunner.set_randomness``)."""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Dict, Optional, Tuple

import torch
from mmengine.runner import Runner
from mmengine.runner.checkpoint import find_latest_checkpoint

from ..determinism import cpu
from ..resume.checkpoint_io import peek
from ..resume.section import check_section
from ..rng.seeding import init_random_seed, set_random_seed
from ..run.settings import RunSettings, parse_randomness
from ..run.state import ResumeSource, log_pending, run_state
from .checkpoints import verify_loading
from .requested import requested_config

#: ``(seed, where it was given)``, told by the training tool (:func:`note_seed_source`).
_seed_source: Dict[str, Any] = {}


def note_seed_source(seed: Optional[int], source: str) -> None:
    """Say where the seed the next Runner gets was given, for its seed log line.

    ``tools/train.py`` calls it with ``'--seed'``, ``'--cfg-options randomness.seed'``
    or ``'config'``; a Runner whose seed is another one (or none) is not concerned.

    Args:
        seed: The seed the config will give the Runner (None: none given).
        source: Where it was given.
    """
    _seed_source.clear()
    if seed is not None:
        _seed_source.update(seed=seed, source=source)


def set_randomness(runner: Runner, seed: Optional[int], kwargs: Dict[str, Any]) -> None:
    """``Runner.set_randomness`` with validation and a seed that is never None.

    On the first call (from ``Runner.__init__``), when the config resumes, the
    checkpoint to resume is peeked at (memory-mapped), checked against its digests
    (:func:`~mmrepro.runner.checkpoints.verify_loading`) and its ``mmrepro`` section
    validated, so that its seed and data position are known before any sampler or
    DataLoader is built (:class:`~mmrepro.run.state.ResumeSource`). Without a seed in
    the config, one is drawn on rank 0 and broadcast. The seed is written back into
    ``randomness`` of the runner's config, so the config dump and every checkpoint
    meta record it.

    Args:
        runner: The Runner.
        seed: ``randomness.seed``.
        kwargs: The other ``randomness`` keys (see
            :data:`mmrepro.run.settings.RANDOMNESS_DEFAULTS`).
    """
    state = run_state(runner)
    first_call = not state.enabled
    settings = parse_randomness(dict(kwargs, seed=seed))
    cpu.check_process(settings.cpu_isa)  # before anything is built or written
    if first_call:
        state.resume = _peek_resume_checkpoint(runner, settings)
    settings, source = _materialise_seed(settings, state.resume if first_call else None,
                                         state)
    _apply(runner, settings)
    state.settings = settings
    if first_call:
        state.note(logging.INFO, _seed_line(settings, source))
    log_pending(runner)


def _materialise_seed(settings: RunSettings, resume: Optional[ResumeSource],
                      state: Any) -> Tuple[RunSettings, str]:
    """``settings`` with the seed this run trains with, and where that seed came from.

    The checkpoint being resumed wins over the config (a differing config seed is
    warned about); without either, a seed is drawn on rank 0 and broadcast.
    """
    source = 'config'
    if settings.seed is not None and settings.seed == _seed_source.get('seed'):
        source = _seed_source['source']  # --seed or --cfg-options (tools/train.py)
    if resume is not None and resume.seed is not None:
        if settings.seed is not None and settings.seed != resume.seed:
            state.note(logging.WARNING,
                       f'mmrepro: randomness.seed={settings.seed} differs from the seed '
                       f'{resume.seed} of the checkpoint being resumed ({resume.path}); '
                       'using the checkpoint\'s so the resumed run continues the original.')
        return dataclasses.replace(settings, seed=resume.seed), f'checkpoint {resume.path}'
    if settings.seed is None:
        return (dataclasses.replace(settings, seed=init_random_seed()),
                'drawn on rank 0 and broadcast; pass it back with --seed to rerun')
    return settings, source


def _apply(runner: Runner, settings: RunSettings) -> None:
    """Seed every RNG, set deterministic mode and threads, and tell the Runner."""
    runner._randomness_cfg = settings.to_dict()
    runner.cfg['randomness'] = {**dict(runner.cfg.get('randomness') or {}),
                                'seed': settings.seed}
    os.environ.setdefault('PYTHONHASHSEED', str(settings.seed))
    runner._deterministic = settings.deterministic
    runner._seed = set_random_seed(
        settings.seed, deterministic=settings.deterministic,
        diff_rank_seed=settings.diff_rank_seed, warn_only=settings.warn_only,
        fill_uninitialized_memory=settings.fill_uninitialized_memory)
    if settings.threads is not None:  # CPU rounding depends on the thread count
        torch.set_num_threads(int(settings.threads))


def _seed_line(settings: RunSettings, source: str) -> str:
    """The log line that says the seed, where it came from and the settings."""
    extra = ''.join(f', {key}={value}' for key, value in (
        ('threads', settings.threads), ('cpu_isa', settings.cpu_isa)) if value is not None)
    return (f'mmrepro: seed {settings.seed} ({source}); deterministic='
            f'{settings.deterministic}, diff_rank_seed={settings.diff_rank_seed}, '
            f'sample_seeding={settings.sample_seeding}{extra}')


def _peek_resume_checkpoint(runner: Runner, settings: RunSettings) -> Optional[ResumeSource]:
    """Seed and validated mmrepro section of the checkpoint the config resumes, if any,
    once it is verified against its digests.

    Raises:
        IntegrityError: It does not match its digests (and ``settings`` refuse that).
    """
    cfg = requested_config(runner)
    if not cfg.get('resume', False):
        return None
    path = cfg.get('load_from') or find_latest_checkpoint(runner._work_dir)
    if not path or '://' in str(path):
        return None
    checkpoint = peek(path)
    if not isinstance(checkpoint, dict):
        return None
    verify_loading(runner, str(path), True, settings, checkpoint)
    section = checkpoint.get('mmrepro')
    meta = checkpoint.get('meta') or {}
    return ResumeSource(path=str(path), seed=meta.get('seed'),
                        section=None if section is None else check_section(section, path))
