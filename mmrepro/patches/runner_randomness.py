"""Route ``Runner.set_randomness`` through mmrepro's seeding core."""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Dict, Optional

import torch
from mmengine.runner import Runner
from mmengine.runner.checkpoint import find_latest_checkpoint

from ..determinism import cpu
from ..resume.checkpoint_io import peek
from ..resume.section import check_section
from ..rng.seeding import init_random_seed, set_random_seed
from ..run.enable import enabled_by_config
from ..run.settings import parse_randomness
from ..run.state import ResumeSource, log_pending, run_state
from .runner_init import requested_config

_original_set_randomness = Runner.set_randomness
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


def set_randomness(self: Runner, seed: Optional[int] = None, **kwargs: Any) -> None:
    """``Runner.set_randomness`` with validation and a seed that is never None.

    On the first call (from ``Runner.__init__``), when the config resumes, the
    checkpoint to resume is peeked at (memory-mapped) and its ``mmrepro`` section
    validated, so that its seed and data position are known before any sampler or
    DataLoader is built (:class:`~mmrepro.run.state.ResumeSource`). Without a seed in the
    config, one is drawn on rank 0 and broadcast. The seed is written back into
    ``randomness`` of the runner's config, so the config dump and every checkpoint
    meta record it.

    A Runner whose config does not enable mmrepro (:mod:`mmrepro.run.enable`) gets
    MMEngine's ``set_randomness`` unchanged, and so every other patch leaves it alone.

    Args:
        seed: ``randomness.seed``.
        **kwargs: The other ``randomness`` keys (see
            :data:`mmrepro.run.settings.RANDOMNESS_DEFAULTS`).
    """
    state = run_state(self)
    first_call = not state.enabled
    if first_call and not enabled_by_config(requested_config(self)):
        return _original_set_randomness(self, seed=seed, **kwargs)
    settings = parse_randomness(dict(kwargs, seed=seed))
    cpu.check_process(settings.cpu_isa)  # before anything is built or written
    if first_call:
        state.resume = _peek_resume_checkpoint(self)
    resume = state.resume
    source = 'config'
    if settings.seed is not None and settings.seed == _seed_source.get('seed'):
        source = _seed_source['source']  # --seed or --cfg-options (tools/train.py)
    if first_call and resume is not None and resume.seed is not None:
        if settings.seed is not None and settings.seed != resume.seed:
            state.note(logging.WARNING,
                       f'mmrepro: randomness.seed={settings.seed} differs from the seed '
                       f'{resume.seed} of the checkpoint being resumed ({resume.path}); '
                       'using the checkpoint\'s so the resumed run continues the original.')
        settings = dataclasses.replace(settings, seed=resume.seed)
        source = f'checkpoint {resume.path}'
    if settings.seed is None:
        settings = dataclasses.replace(settings, seed=init_random_seed())
        source = 'drawn on rank 0 and broadcast; pass it back with --seed to rerun'
    base_seed = settings.seed
    self._randomness_cfg = settings.to_dict()
    self.cfg['randomness'] = {**dict(self.cfg.get('randomness') or {}), 'seed': base_seed}
    os.environ.setdefault('PYTHONHASHSEED', str(base_seed))
    self._deterministic = settings.deterministic
    self._seed = set_random_seed(
        base_seed, deterministic=settings.deterministic,
        diff_rank_seed=settings.diff_rank_seed, warn_only=settings.warn_only,
        fill_uninitialized_memory=settings.fill_uninitialized_memory)
    if settings.threads is not None:  # CPU rounding depends on the thread count
        torch.set_num_threads(int(settings.threads))
    state.settings = settings
    if first_call:
        threads = ''.join(f', {key}={value}' for key, value in (
            ('threads', settings.threads), ('cpu_isa', settings.cpu_isa)) if value is not None)
        state.note(logging.INFO, f'mmrepro: seed {base_seed} ({source}); deterministic='
                   f'{settings.deterministic}, diff_rank_seed='
                   f'{settings.diff_rank_seed}, sample_seeding='
                   f'{settings.sample_seeding}{threads}')
    log_pending(self)


def _peek_resume_checkpoint(runner: Runner) -> Optional[ResumeSource]:
    """Seed and validated mmrepro section of the checkpoint the config resumes, if any."""
    cfg = requested_config(runner)
    if not cfg.get('resume', False):
        return None
    path = cfg.get('load_from') or find_latest_checkpoint(runner._work_dir)
    if not path or '://' in str(path):
        return None
    checkpoint = peek(path)
    if not isinstance(checkpoint, dict):
        return None
    section = checkpoint.get('mmrepro')
    meta = checkpoint.get('meta') or {}
    return ResumeSource(path=str(path), seed=meta.get('seed'),
                        section=None if section is None else check_section(section, path))


def apply() -> None:
    """Install :func:`set_randomness` on MMEngine's Runner."""
    Runner.set_randomness = set_randomness
