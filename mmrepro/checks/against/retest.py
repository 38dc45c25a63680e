"""``mmrepro-check --against TEST_RUN --from CHECKPOINT``: does this machine test the same?

The baseline is a test run (``mmrepro-test``: its ``test_record.json``, log dir or work
dir). The check first compares the checkpoint given with the one the baseline tested (by
weights digest: a different file is a different question), then runs ``mmrepro-test`` on
it here, with the baseline's config dump unless CONFIG is given, on ``--nproc``
processes with ``--launcher pytorch``, and compares the two test runs as ``mmrepro-diff``
does: every image's predictions and the metrics, the first image that differs, and the
settings that differ where the weights are the same.
"""
from __future__ import annotations

import os.path as osp
import subprocess
from typing import Callable, List

from ...record.run_record import diff_records
from ...resume.checkpoint_io import safe_load
from ...resume.digests import weights_digest
from ...resume.preflight import check_checkpoint_file
from ...resume.verification import check_intact
from ..eval_verdict import checkpoint_lines, compare_test_runs
from ..evaluations import evaluation_lines
from ..run_data import RunData, load_run
from ..runs import CHECK_MARKERS, PROG, prepare_work_dir, tool_launch

#: Exit statuses (those of ``mmrepro-check``).
REPRODUCED, DIFFERENT, INCONCLUSIVE = 0, 1, 3


def baseline_test_config(baseline: RunData) -> str:
    """The config dump of the baseline's test run.

    Raises:
        ValueError: Its log dir holds none.
    """
    dump = osp.join(baseline.log_dir or '', 'vis_data', 'config.py')
    if not osp.isfile(dump):
        raise ValueError(f'--against {baseline.path!r}: the test run holds no config dump '
                         '(vis_data/config.py in its log dir); give the config: mmrepro-check '
                         f'CONFIG --against {baseline.path} --from CHECKPOINT')
    return dump


def mmrepro_test_command(config: str, checkpoint: str, work_dir: str, options: List[str],
                         nproc: int) -> List[str]:
    """The command line of ``mmrepro-test`` (torchrun with ``nproc`` processes if > 0)."""
    command, launcher = tool_launch('test', nproc)
    return [*command, config, checkpoint, '--work-dir', work_dir, *launcher,
            *(['--cfg-options', *options] if options else [])]


def run_test_against(options, say: Callable[..., None] = print) -> int:
    """Check a test run here against the baseline test run; return the exit status.

    Args:
        options: The check's :class:`~mmrepro.checks.against.run.AgainstOptions`
            (``resume_from`` is the checkpoint to test).

    Raises:
        ValueError: No checkpoint given, or the baseline cannot be used.
        RuntimeError: The test run failed (the message names its log).
    """
    baseline = load_run('baseline', options.baseline)
    if not options.resume_from:
        tested = ((baseline.record or {}).get('checkpoint') or {}).get('file')
        raise ValueError(f'--against {options.baseline!r} is a test run: give the checkpoint '
                         f'it tested with --from CHECKPOINT (the baseline tested {tested!r})')
    check_checkpoint_file(options.resume_from, '--from', 'give the checkpoint the baseline '
                          'tested')
    check_intact(options.resume_from, False, f'--from {options.resume_from!r}',
                 'give an intact copy of the checkpoint the baseline tested')
    expected = ((baseline.record or {}).get('checkpoint') or {}).get('weights_sha256')
    given = weights_digest(safe_load(options.resume_from, mmap=True))
    if expected and given != expected:
        say(f'{PROG}: --from {options.resume_from}: weights {given[:12]}, but the baseline '
            f'tested weights {expected[:12]}')
        say('verdict: a different checkpoint (before testing): the baseline tested other '
            'weights; give the checkpoint the baseline tested, or compare the training runs')
        return DIFFERENT
    config = options.config or baseline_test_config(baseline)
    work_dir = options.work_dir or osp.join('work_dirs', 'check_against', 'test')
    prepare_work_dir(work_dir, say)
    say(f'{PROG}: testing {options.resume_from} here against {options.baseline} '
        f'({max(options.nproc, 1)} process(es))')
    log = osp.join(work_dir, CHECK_MARKERS[-1])
    command = mmrepro_test_command(config, options.resume_from, work_dir, options.cfg_options,
                           options.nproc)
    with open(log, 'w') as f:
        code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT).returncode
    if code != 0:
        with open(log, errors='replace') as f:
            tail = ''.join(f.readlines()[-25:])
        raise RuntimeError(f'the test run failed with exit code {code}; full log: {log}\n'
                           f'--- last lines ---\n{tail}')
    here = load_run('this run', work_dir)
    checkpoints, same = checkpoint_lines(baseline.record or {}, here.record or {})
    differences = [d for d in diff_records(baseline.record or {}, here.record or {})
                   if d[0] != 'config.load_from']
    diff, verdict, identical = compare_test_runs(baseline.evaluations, here.evaluations, same,
                                                differences)
    for line in (*checkpoints, *evaluation_lines(diff), *verdict):
        say(line)
    if not diff.common:
        return INCONCLUSIVE
    return REPRODUCED if identical else DIFFERENT
