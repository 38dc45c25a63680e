"""Every tool's exit statuses and what each means: the table ``docs/tools.md`` shows.

:data:`EXIT_CODES` is the one list; the documentation's table repeats it cell for cell
and each tool's ``--help`` names the same statuses (``tests/unit/cli/test_exit_codes.py``
holds all three to it). :func:`epilog` writes a tool's ``--help`` line from it.
"""
from __future__ import annotations

from typing import Dict

__all__ = ['EXIT_CODES', 'epilog']

#: ``{tool: {status: meaning}}``, in the order of ``docs/tools.md``'s table. Statuses
#: 3 and 4 are ``check_repro``'s and ``repro_diff``'s only.
EXIT_CODES: Dict[str, Dict[int, str]] = {
    'train': {
        0: 'trained (with `--check-config`: arguments and config valid)',
        1: 'training failed (traceback), or a checkpoint could not be written (one `error:` '
           'line: no space, permission denied, a read-only file system)',
        2: 'bad arguments or config: one `error:` line, before anything is built or written',
    },
    'test': {
        0: 'tested (with `--check-config`: arguments, config and checkpoint valid)',
        1: 'the test failed (traceback)',
        2: 'bad arguments, config or checkpoint: one `error:` line, before anything is built '
           'or written',
    },
    'check_repro': {
        0: 'every comparison bit-identical and real runs of the config reproducible; with '
           '`--against`: the baseline reproduced bit for bit, or, without `--bitwise`, '
           'equivalent within rounding (within the rounding envelope measured here)',
        1: 'a run diverged (iteration and module named), or real runs of the config would '
           'not be reproducible (no seed, `deterministic=False`, an operation a real run '
           'stops at); with `--against`: the initial weights, data or numerics differ (sample '
           'or module, and the recorded causes; numerics beyond rounding, or with '
           '`--bitwise` at all), or the initial weights, config or data '
           'differ before training, or the baseline '
           'is reproduced only with a seed the config lacks or with `deterministic=False`',
        2: 'bad arguments, config or file, checked before training; or a training run failed '
           '(its log named)',
        3: 'nothing to compare',
    },
    'repro_diff': {
        0: 'identical in everything compared (logged losses, traces, weights) and no setting '
           'that can change training differs, or, without `--bitwise`, traces that differ '
           'only within the rounding envelope measured here; settings that cannot (`num_workers`, '
           '`persistent_workers`, `prefetch_factor`, validation, logging, checkpoints, '
           "mmrepro's own hooks and those a check adds) are listed as information",
        1: 'the outcomes differ (the first iteration, the module and the recorded causes '
           'named, each with what removes it; where only the numbers differ, whether beyond '
           'rounding); or nothing could be compared and settings '
           'that can change training differ',
        2: 'bad arguments, or a run record, trace, log or checkpoint missing or corrupted '
           '(file and problem named)',
        3: 'inconclusive: nothing both runs hold could be compared, and no setting that can '
           'change training differs',
        4: 'identical in everything compared, although settings that can change training '
           'differ (named, each with what removes it)',
    },
    'support_matrix': {
        0: 'every family bit-exact',
        1: 'some family is not',
        2: "bad arguments, or `--cfg-options` a family's config refuses (before anything is "
           'written)',
    },
    'make_demo_data': {
        0: 'data written (or already there)',
        2: 'bad arguments, or the directory holds annotations it did not write (nothing '
           'changed)',
    },
    'weights_digest': {
        0: 'every digest printed',
        2: 'bad arguments, or a file missing, unreadable or holding no weights (named)',
    },
    'bundle': {
        0: 'bundle written',
        2: 'bad arguments, no run record in the work dir, the output exists (never '
           'overwritten) or its directory does not, or a checkpoint unreadable',
    },
}


def epilog(tool: str) -> str:
    """``exit status: 0 ...; 1 ...`` for ``tool``'s ``--help`` (plain text)."""
    return 'exit status: ' + '; '.join(f'{status} {meaning.replace("`", "")}'
                                       for status, meaning in EXIT_CODES[tool].items())
