"""What real runs of a config do that a check's runs do not show, and how to fix it.

A check fills in what it needs to train: a seed where the config has none (its default,
or with ``--against`` the baseline's), and in deterministic mode
``randomness.warn_only=True``, so that PyTorch names every operation without a
deterministic implementation instead of stopping at the first. A real run of the
config does neither: it draws a new seed each time, and stops at the first such
operation. Without ``randomness.deterministic`` nothing makes PyTorch choose
deterministic kernels, so a few identical iterations say nothing about real runs.
:func:`real_run_causes` names each such difference with the setting that removes it;
any one of them keeps a check from calling the config reproducible. A config that does
not enable mmrepro is noted: the check (and ``mmrepro-train``) enables it, MMDetection's
``tools/train.py`` does not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..run.enable import enabled_by_config


@dataclass
class Cause:
    """Something real runs of the config do that the check's runs did not.

    Attributes:
        short: What it is, for the result line.
        text: What a real run does, and why the check's runs did not show it.
        fix: The setting or command that removes it.
        fails: Whether real runs are then not reproducible (False: a note).
    """

    short: str
    text: str
    fix: str
    fails: bool = True


def seed_cause(seed: int, whose: str) -> Cause:
    """The config has no seed; the check trained with ``seed`` (``whose``: where it is from)."""
    return Cause(
        'the config has no seed (every real run draws a new one)',
        f'the config has no randomness.seed: the check trained with {whose} seed {seed}, '
        'but every real run draws a new seed, so two real runs train on other samples and '
        'end with other weights',
        f'set randomness.seed in the config, e.g. randomness = dict(seed={seed}, '
        f'deterministic=True), or pass --seed {seed} to mmrepro-train')


def real_run_causes(cfg: Any, seed: Optional[int], whose: str = "mmrepro-check's",
                    alerts: Optional[Dict[str, List[str]]] = None) -> List[Cause]:
    """What real runs of ``cfg`` do that the check's runs did not, most decisive first.

    Args:
        cfg: The config as given (``--cfg-options`` applied), not the check's child.
        seed: The seed the check trained with where the config has none (None: the
            caller names a missing seed itself).
        whose: Where that seed is from, for the text (``"the baseline's"``).
        alerts: PyTorch's nondeterministic operations -> the runs that hit them (the
            check trains deterministic configs with ``warn_only=True``); None: not
            listed.
    """
    randomness = dict(cfg.get('randomness') or {})
    found = []
    if randomness.get('seed') is None and seed is not None:
        found.append(seed_cause(seed, whose))
    if not randomness.get('deterministic', False):
        found.append(Cause(
            'randomness.deterministic is False',
            'randomness.deterministic is False: nothing makes PyTorch choose deterministic '
            'kernels (on GPU: cuDNN autotuning, atomicAdd), and a few identical iterations '
            'neither list the nondeterministic operations nor catch each one',
            'set randomness.deterministic=True in the config (try it here with '
            '--cfg-options randomness.deterministic=True), or pass --deterministic to '
            'mmrepro-train'))
    if alerts:
        ops = ', '.join(alerts)
        if randomness.get('warn_only', False):
            found.append(Cause(
                f'PyTorch has no deterministic implementation of {ops}',
                f'PyTorch has no deterministic implementation of {ops}: real runs warn and '
                'go on, and differ wherever it computes nondeterministically',
                f'replace {ops} in the model with deterministic operations'))
        else:
            found.append(Cause(
                f'PyTorch has no deterministic implementation of {ops} (a real run stops '
                'there)',
                f'PyTorch has no deterministic implementation of {ops}: the check trained '
                'with randomness.warn_only=True to name them all, but a real run '
                '(warn_only=False) stops at the first with a RuntimeError',
                f'replace {ops} in the model with deterministic operations, or set '
                'randomness.warn_only=True to train with them (runs may then differ)'))
    if not enabled_by_config(cfg):
        found.append(Cause(
            'the config does not enable mmrepro',
            "the config does not enable mmrepro: the check trained it with mmrepro's "
            "tools/train.py (mmrepro-train), which adds it; MMDetection's tools/train.py "
            'trains it without mmrepro, not reproducibly across num_workers or resume',
            "add custom_imports = dict(imports=['mmrepro'], allow_failed_imports=False) to "
            'the config, or train it with mmrepro-train', fails=False))
    return found


def cause_lines(causes: List[Cause]) -> List[str]:
    """The report's section on ``causes`` (none: no lines)."""
    if not causes:
        return []
    lines = ['real runs of this config (what the check filled in or cannot show):']
    for cause in causes:
        lines += [f'  {cause.text}', f'    fix: {cause.fix}']
    return lines
