"""mmrepro.checks.against.verdict: the verdict of a check against a baseline and its next
steps, from step comparisons written by hand."""
from __future__ import annotations

from mmrepro.checks.against.predicted import Obstacle
from mmrepro.checks.against.verdict import fix_steps, judge_steps, seed_obstacle
from mmrepro.checks.real_runs import Cause
from mmrepro.checks.run_data import RunData
from mmrepro.trace.compare import TraceDiff

#: A baseline whose optimizer steps 1 and 2 are its iterations 2 and 4 (accumulate 2).
BASELINE = RunData('baseline', 'base.tar.gz', {}, 'base.tar.gz',
                   trace=({}, [dict(iter=2, step=1), dict(iter=4, step=2)]))
SAME = TraceDiff(common=[1, 2], compared=['losses'])
REPRODUCED = ('reproduces base.tar.gz bit for bit through iteration 4 (2 traced optimizer '
              'step(s): samples, losses, gradients and weights)')
TRAIN = ('next: train it here as usual (mmrepro-train cfg.py --work-dir DIR); mmrepro-diff '
         'base.tar.gz DIR compares the whole run')
THREADS = Obstacle('CPU/GPU numerics', 'the intra-op thread count: devices.torch_threads: 2 '
                   'in the baseline, 1 here', 'export OMP_NUM_THREADS=2')


def _judge(diff, found=(), causes=(), pinned=None):
    return judge_steps(diff, BASELINE, 'base.tar.gz', list(found), list(causes), pinned, 'cfg.py')


def test_a_reproduced_baseline_says_to_train():
    assert _judge(SAME) == (0, REPRODUCED, [TRAIN])
    note = Cause('no mmrepro', 'text', 'add mmrepro', fails=False)
    assert _judge(SAME, causes=[note]) == (0, REPRODUCED, ['next: add mmrepro', TRAIN])


def test_a_pinned_seed_or_a_failing_cause_is_never_reproduced():
    assert _judge(SAME, pinned=7) == (
        1, REPRODUCED + ", but only with the baseline's seed 7, which the check pinned: the "
        'config has none, so a real run draws a new one',
        ['next: set randomness.seed=7 in the config (or pass --seed 7 to mmrepro-train)'])
    fails = Cause('randomness.deterministic is False', 'text', 'set it True')
    assert _judge(SAME, causes=[fails]) == (
        1, REPRODUCED + ', but real runs of this config may not: randomness.deterministic is '
        'False', ['next: set it True'])


def test_numerics_that_differ_name_each_cause_s_fix_or_what_to_run():
    diff = TraceDiff(common=[1, 2], iteration=1, first={'grad': ('neck.conv.weight', 'a', 'b')})
    status, verdict, steps = _judge(diff, [THREADS, THREADS])
    assert status == 1 and verdict.startswith('numerics differ from iteration 2: first module '
                                              'neck.conv (gradient of neck.conv.weight)')
    assert steps == ['next: export OMP_NUM_THREADS=2']  # each fix once
    assert _judge(diff)[2] == [
        'next: nothing recorded explains it, so the computation is not reproducible here: '
        'mmrepro-check cfg.py --resume-check --workers-check 2 names the module or transform']


def test_data_that_differ_name_the_data_and_config_fixes_only():
    diff = TraceDiff(common=[1], iteration=1, data_iteration=1,
                     data_first=('0', 'img_id=3 aa', 'img_id=4 bb'))
    data = Obstacle('data', 'the data files (fingerprint): data.x: 1 in the baseline, 2 here',
                    'copy the files')
    status, verdict, steps = _judge(diff, [data, THREADS])
    assert (status, steps) == (1, ['next: copy the files'])
    assert verdict == ('data differs from iteration 2: sample 0 of the global batch (img_id=3 '
                       'in the baseline, img_id=4 here), because the data files (fingerprint): '
                       'data.x: 1 in the baseline, 2 here')


def test_nothing_to_compare_says_how_to_reach_a_traced_step():
    assert _judge(TraceDiff()) == (
        3, 'inconclusive: no optimizer step was traced in both runs',
        ["next: pass --iters N to reach one of the baseline's traced optimizer steps"])


def test_the_seed_obstacle_blocks_with_its_fix():
    obstacle = seed_obstacle(0)
    assert obstacle.blocking and fix_steps([obstacle, obstacle]) == [
        'next: set randomness.seed=0 in the config (or pass --seed 0 to mmrepro-train)']
