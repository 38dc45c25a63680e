"""The same guarantees on 2 ranks: gloo on CPU, launched by tools/dist_train.sh (torchrun)."""
import os.path as osp
import subprocess
import sys

import pytest
from support.dist_utils import dist_cmd, dist_env, dist_train
from support.repro_utils import RUN_CWD, checkpoint, prune_checkpoints, state_digest, write_config

from mmrepro.resume.checkpoint_io import safe_load

pytestmark = pytest.mark.slow

# 2 ranks x batch 2 -> 4 iterations per epoch; a mid-epoch checkpoint every 6 iterations.
DIST = """
custom_imports = dict(imports=['mmrepro', 'support.rank_probe_hook'], allow_failed_imports=False)
custom_hooks = [dict(type='ReproducibilityHook'), dict(type='RankProbeHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=6, save_last=False)]
"""
KILL = "custom_hooks = custom_hooks + [dict(type='KillRankHook', rank=1, at_iter=8)]\n"
NO_SEED = "randomness = dict(_delete_=True, deterministic=True)\n"


def probes(work_dir):
    return [open(osp.join(work_dir, f'rank{r}.txt')).read().split() for r in (0, 1)]


class DistRuns:
    """2-rank runs shared by the tests of this module."""

    def __init__(self, root, data_root):
        self.root, self.data_root, self._done = root, data_root, {}

    def config(self, tag, extra='', max_epochs=3):
        return write_config(osp.join(self.root, f'cfg-{tag}', 'cfg.py'), 'retinanet',
                            self.data_root, extra=DIST + extra, num_workers=1,
                            max_epochs=max_epochs)

    def get(self, tag, *args, extra='', max_epochs=3):
        if tag not in self._done:
            work_dir = osp.join(self.root, tag)
            dist_train(self.config(tag, extra, max_epochs), work_dir, *args)
            if tag != 'base':  # the runs resumed from; the others keep their last
                prune_checkpoints(work_dir)
            self._done[tag] = work_dir
        return self._done[tag]


@pytest.fixture(scope='module')
def dist_runs(tmp_path_factory, data_root):
    return DistRuns(str(tmp_path_factory.mktemp('dist')), data_root)


@pytest.mark.floor
def test_two_ranks_hold_the_same_weights_and_the_checkpoint_both_rng_states(dist_runs):
    first = dist_runs.get('base')
    (s0, d0), (s1, d1) = probes(first)
    assert s0 == s1 == '0' and d0 == d1  # both ranks hold the same weights
    section = safe_load(checkpoint(first))['mmrepro']
    assert section['world_size'] == 2 and len(section['rng']) == 2
    record = safe_load(checkpoint(first))['meta']['run_record']
    assert record['world_size'] == 2 and record['backend'] == 'gloo'


@pytest.mark.full
def test_two_ranks_identical_across_reruns(dist_runs):
    """Full tier, a second proof: the default run reruns 2 ranks through
    ``mmrepro-check --launcher pytorch --nproc 2`` (``test_check_repro.py``: bit-identical),
    trains 2 ranks to the bits of 1 process accumulating (``test_layouts.py``) and, on
    both stacks, resumes 2 ranks mid-run in a new launch to the uninterrupted run's
    weights (below)."""
    first, second = dist_runs.get('base'), dist_runs.get('rerun')
    assert probes(second) == probes(first)
    assert state_digest(checkpoint(first)) == state_digest(checkpoint(second))


@pytest.mark.floor
def test_resume_mid_run_on_two_ranks_is_exact(dist_runs, tmp_path):
    base = dist_runs.get('base')
    work_dir = str(tmp_path / 'resumed')
    out = dist_train(dist_runs.config('resume'), work_dir, '--resume',
                     checkpoint(base, 'iter_6.pth'))
    assert out.count('mmrepro: resumed RNG states and data position') >= 1
    # dist_train.sh says which interpreter and device type it launched on.
    assert f'dist_train.sh: 2 process(es) with {sys.executable} (torch ' in out
    assert 'no CUDA device: CPU processes over gloo' in out
    assert probes(work_dir) == probes(base)


@pytest.mark.full
def test_kill_one_rank_then_resume_is_exact(dist_runs, tmp_path):
    """Full tier: a second proof of what ``tests/e2e/test_restarts.py``'s
    ``test_torchrun_restarts_after_each_rank_is_killed`` proves: rank 1 killed after
    iteration 7, ``--resume`` from ``iter_6.pth`` on 2 ranks ends as the uninterrupted run."""
    base = dist_runs.get('base')
    # Rank 1 kills itself after iteration 8: iteration 7's gradient all-reduce means rank 0
    # has written iter_6.pth by then; torchrun then ends the group.
    config = dist_runs.config('kill', extra=KILL)
    work_dir = str(tmp_path / 'killed')
    proc = subprocess.run(dist_cmd(config, work_dir), cwd=RUN_CWD, env=dist_env(),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert osp.exists(osp.join(work_dir, 'killed-rank1'))
    assert not osp.exists(osp.join(work_dir, 'iter_12.pth'))
    dist_train(config, work_dir, '--resume')
    assert probes(work_dir) == probes(base)


@pytest.mark.full
def test_no_seed_both_ranks_share_the_drawn_seed(dist_runs):
    """Full tier: a second proof of the seed broadcast that
    ``tests/unit/rng/test_seeding_distributed.py`` proves on two gloo processes."""
    work_dir = dist_runs.get('noseed', extra=NO_SEED, max_epochs=1)
    (s0, d0), (s1, d1) = probes(work_dir)
    assert s0 == s1 and d0 == d1
    again = dist_runs.get('noseed-rerun', '--seed', s0, extra=NO_SEED, max_epochs=1)
    assert probes(again) == probes(work_dir)


@pytest.mark.full
def test_diff_rank_seed_per_rank_streams_still_reproducible(dist_runs):
    """Full tier: a second proof of the rank offset that
    ``tests/unit/rng/test_seeding_distributed.py`` proves on two gloo processes."""
    a = dist_runs.get('diffrank', '--diff-rank-seed', max_epochs=1)
    b = dist_runs.get('diffrank-rerun', '--diff-rank-seed', max_epochs=1)
    (s0, d0), (s1, d1) = probes(a)
    assert (int(s0), int(s1)) == (0, 1) and d0 == d1  # rank seeds differ, DDP keeps sync
    assert probes(b) == probes(a)
    shared = dist_runs.get('shared-1e', max_epochs=1)
    assert probes(shared)[0][1] != d0  # per-rank augmentation changed the training
