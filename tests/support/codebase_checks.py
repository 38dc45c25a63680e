"""The codebase tests, shared by every ``tests/e2e/test_codebases_<codebase>.py``: each
module names its model (``MODEL``, a key of
:data:`mmrepro.checks.matrix.codebases.CONFIGS`) and imports these tests and their
module-scoped ``runs`` fixture, which trains the model's base run once per module
(:class:`support.codebase_runs.CodebaseRuns`).

Default tier (CI; 30-50 s a codebase on 2 idle cores, 65-80 s on busy ones): a rerun and
a mid-epoch resume end with the base run's weights and losses, byte for byte. The full
tier (marker ``full``) adds the second proofs, each another run or two (~20 s each,
mostly start-up) beyond CI's budget: ``num_workers`` 0 against 2, a resume from an
epoch's checkpoint, 2 ranks rerun, and ``mmrepro-check``, ``mmrepro-diff`` and
``mmrepro-test`` on the model's runs.
"""
from __future__ import annotations

import glob
import json
import os.path as osp

import pytest

from mmrepro.record.run_record import TEST_RECORD_NAME
from support.codebase_runs import (
    EPOCH_CHECKPOINT,
    ITERS,
    MID,
    MID_CHECKPOINT,
    CodebaseRuns,
    run_tool,
)
from support.repro_utils import checkpoint, state_digest

__all__ = ['runs', 'test_rerun_is_byte_identical', 'test_mid_epoch_resume_is_byte_identical',
           'test_num_workers_0_is_byte_identical', 'test_epoch_resume_is_byte_identical',
           'test_two_ranks_rerun_is_byte_identical', 'test_check_repro_passes',
           'test_diff_finds_the_rerun_identical', 'test_mmrepro_test_repeats_its_predictions']


@pytest.fixture(scope='module')
def runs(request, tmp_path_factory, data_root) -> CodebaseRuns:
    """The calling module's ``MODEL``, its base run trained."""
    model = request.module.MODEL
    runs = CodebaseRuns(model, str(tmp_path_factory.mktemp(model)), data_root)
    runs.train('base')
    return runs


def test_rerun_is_byte_identical(runs: CodebaseRuns):
    runs.train('rerun')
    runs.assert_same_run('rerun')


def test_mid_epoch_resume_is_byte_identical(runs: CodebaseRuns):
    runs.assert_resume('mid', MID_CHECKPOINT, MID + 1)


@pytest.mark.full
def test_num_workers_0_is_byte_identical(runs: CodebaseRuns):
    runs.train('workers0', num_workers=0)
    runs.assert_same_run('workers0')


@pytest.mark.full
def test_epoch_resume_is_byte_identical(runs: CodebaseRuns):
    runs.assert_resume('epoch', EPOCH_CHECKPOINT, ITERS + 1)


@pytest.mark.full
def test_two_ranks_rerun_is_byte_identical(runs: CodebaseRuns):
    """2 CPU ranks (gloo) through torchrun and the codebase's script, twice."""
    first, again = runs.train_ranks('ranks2'), runs.train_ranks('ranks2_rerun')
    assert state_digest(checkpoint(first)) == state_digest(checkpoint(again))


@pytest.mark.full
def test_check_repro_passes(runs: CodebaseRuns):
    """mmrepro-check on the model's config: a rerun, a resume and 0 workers."""
    proc = run_tool('check_repro', runs.config(), '--iters', '6', '--resume-check',
                    '--workers-check', '0', '--work-dir', runs.root + '/check')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 'result: REPRODUCIBLE: 3 comparison(s) bit-identical' in proc.stdout


@pytest.mark.full
def test_diff_finds_the_rerun_identical(runs: CodebaseRuns):
    proc = run_tool('repro_diff', runs.train('base'), runs.train('rerun'))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f'weights: identical at iterations {ITERS}, {MID}, {2 * ITERS} (the final ' \
        'weights)' in proc.stdout
    assert 'bit-identical, as expected (no setting that changes results differs)' in proc.stdout


@pytest.mark.full
def test_mmrepro_test_repeats_its_predictions(runs: CodebaseRuns):
    """mmrepro-test on the base run's final checkpoint, twice, with the codebase's own
    metric: the same metrics and the same digest of every image's predictions."""
    config, weights = runs.config(test=True), checkpoint(runs.train('base'))
    evaluations = []
    for k in (1, 2):
        work_dir = f'{runs.root}/test{k}'
        proc = run_tool('test', config, weights, '--work-dir', work_dir)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (record, ) = glob.glob(osp.join(work_dir, '*', TEST_RECORD_NAME))
        with open(record) as f:
            evaluations.append([(e['metrics'], e['predictions_sha256'])
                                for e in json.load(f)['evaluation']])
    assert len(evaluations[0]) == 1 and evaluations[0][0][1]
    assert evaluations[0] == evaluations[1]
