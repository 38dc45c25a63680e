"""Generators the pipeline owns, trained for real.

MMDetection's ``Albu``: bitwise on a rerun, with any ``num_workers``, after a mid-epoch
resume and on another layout of the same global batch. RetinaNet on the tiny COCO data
with ``configs/albu_example``'s transform list (less ``JpegCompression``), 1 epoch of
global batch 4. The current stack has albumentations
2.0.8, whose transforms own their generators (mmrepro keys them per sample); the floor
has 1.3.1, which draws from the global generators (mmrepro seeds them per sample).

A custom transform that owns ``np.random.default_rng()``: named in the log, by the check
and by the diff's verdict; ``randomness.strict=True`` refuses to train with it.
"""
import glob
import json
import os.path as osp
import pprint

import pytest
from support.layout_runs import LayoutRuns
from support.mmdet_data import AUG, albu_pipeline
from support.repro_utils import (
    TESTS,
    checkpoint,
    pythonpath,
    run_log,
    run_train,
    state_digest,
    write_config,
)

from mmrepro.cli.check_repro import main as check_main
from mmrepro.cli.repro_diff import main as diff_main
from mmrepro.record.run_record import find_log_dir

pytestmark = pytest.mark.slow
#: The Albu tests run on the floor stack too (albumentations 1.3.1 there).
ALSO_ON_FLOOR = pytest.mark.floor

#: The Albu pipeline, and a checkpoint in the middle of the 2 ranks x 2 run's epoch
#: (iteration 2 of 4).
ALBU = (f'train_dataloader = dict(dataset=dict(pipeline='
        f'{pprint.pformat(albu_pipeline((160, 128)), sort_dicts=False)}))\n'
        'default_hooks = dict(checkpoint=dict(by_epoch=False, interval=2, save_last=True))\n')


@pytest.fixture(scope='module')
def albu_runs(tmp_path_factory, data_root):
    pytest.importorskip('albumentations', reason='albumentations is not installed '
                        '(tools/setup_env.sh installs 2.0.8 on the current stack and '
                        '1.3.1 on the floor)')
    return LayoutRuns(str(tmp_path_factory.mktemp('albu')), data_root, max_epochs=1)


@pytest.fixture(scope='module')
def reference(albu_runs):
    """1 process x 2 x accumulate 2, no loader workers."""
    return albu_runs.get('retinanet', '1x2acc2', ALBU, '-w0')


@ALSO_ON_FLOOR
@pytest.mark.full
def test_a_rerun_is_bitwise(albu_runs, reference):
    """Full tier: a second proof of what ``test_two_workers_are_bitwise`` proves: a run in
    another process (with 2 loader workers) ends with the reference's weights, which it
    could not if a rerun's draws differed."""
    rerun = albu_runs.get('retinanet', '1x2acc2', ALBU, '-w0-rerun')
    assert state_digest(checkpoint(rerun)) == state_digest(checkpoint(reference))


@ALSO_ON_FLOOR
def test_two_workers_are_bitwise(albu_runs, reference):
    workers = albu_runs.get('retinanet', '1x2acc2', ALBU, '-w2', num_workers=2)
    assert state_digest(checkpoint(workers)) == state_digest(checkpoint(reference))


@pytest.mark.full
def test_two_ranks_and_a_mid_epoch_resume_are_bitwise(albu_runs, reference):
    """2 ranks x 2 (2 workers each), and that run resumed mid-epoch as 1 x 2 x 2.

    Full tier, a second proof of Albu's generators keyed per sample, which CI's default
    run proves across loader workers (``test_two_workers_are_bitwise``); the keys do not
    depend on the rank (``test_layouts.py``).
    """
    ranks = albu_runs.get('retinanet', '2x2', ALBU, '-w2', num_workers=2)
    assert state_digest(checkpoint(ranks)) == state_digest(checkpoint(reference))
    resumed = albu_runs.get('retinanet', '1x2acc2', ALBU, '-resumed',
                            args=('--resume', checkpoint(ranks, 'iter_2.pth')))
    assert 'mmrepro: resumed data position (sampler epoch 0, 4 batches done).' in \
        run_log(resumed)
    assert state_digest(checkpoint(resumed)) == state_digest(checkpoint(reference))


@ALSO_ON_FLOOR
def test_the_log_and_the_record_say_how_albumentations_draws(reference):
    import albumentations
    owns = tuple(map(int, albumentations.__version__.split('.')[:3])) >= (1, 4, 21)
    keyed = ("mmrepro: keys the 20 generator(s) that albumentations owns in the pipeline "
             "(in Albu) from each sample's key")
    assert (keyed in run_log(reference)) is owns
    with open(osp.join(find_log_dir(reference), 'run_record.json')) as f:
        record = json.load(f)
    assert record['versions']['albumentations'] == albumentations.__version__
    generators = record.get('pipeline_generators', [])
    assert len(generators) == (20 if owns else 0)
    assert all(g['keyed'] and g['path'].startswith('Albu.aug') for g in generators)


#: The test pipeline with a transform that owns its generator (np.random.default_rng()).
OWN_RNG = ("custom_imports = dict(imports=['mmrepro', 'support.own_rng_transform'], "
           "allow_failed_imports=False)\n"
           'train_dataloader = dict(dataset=dict(pipeline='
           f'{[*AUG[:2], dict(type="OwnRNGNoise"), *AUG[2:]]!r}))\n')
UNKEYED = 'OwnRNGNoise.rng (numpy.random.Generator)'


def test_a_generator_a_transform_owns_is_named_and_fails_the_check(data_root, tmp_path,
                                                                   monkeypatch, capsys):
    config = write_config(str(tmp_path / 'cfg' / 'own_rng.py'), 'retinanet', data_root,
                          num_workers=0, extra=OWN_RNG)
    monkeypatch.setenv('PYTHONPATH', pythonpath(TESTS))  # the runs import support.*
    work_dir = tmp_path / 'check'
    assert check_main([config, '--iters', '2', '--work-dir', str(work_dir)]) == 1
    out = capsys.readouterr().out
    assert (f'generators the train pipeline owns: 1, 0 keyed by mmrepro\n  not keyed: '
            f'{UNKEYED}: their draws change on reruns, with num_workers and after resume; '
            "draw from np.random, random or torch's default generator instead\n") in out
    assert (f'the train pipeline owns generator(s) mmrepro does not key ({UNKEYED})'
            in out.split('result: NOT REPRODUCIBLE: ')[1])
    with open(work_dir / 'run_a.log') as f:
        assert f'mmrepro: the pipeline owns generator(s) mmrepro does not key: {UNKEYED}; ' \
            'their draws change on every rerun' in f.read()
    assert diff_main([str(work_dir / 'run_a'), str(work_dir / 'run_b')]) == 1
    assert ('verdict: the data differ from iteration 1\n  why: the train pipeline owns '
            f'generator(s) mmrepro does not key: {UNKEYED} (draw from np.random, random or '
            "torch's default generator instead)\n") in capsys.readouterr().out


def test_strict_refuses_to_train_with_it(data_root, tmp_path):
    config = write_config(str(tmp_path / 'cfg' / 'own_rng.py'), 'retinanet', data_root,
                          num_workers=0, extra=OWN_RNG)
    proc = run_train(config, str(tmp_path / 'strict'), '--cfg-options',
                     'randomness.strict=True', check=False,
                     env={'PYTHONPATH': pythonpath(TESTS)})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f'ValueError: randomness.strict=True, but the pipeline owns generator(s) mmrepro does '
        f'not key: {UNKEYED}; their draws change on every rerun (unless the transform seeds '
        "them), with num_workers and after a resume. Fix: draw from np.random, random or "
        "torch's default generator instead, which mmrepro seeds for every sample, or set "
        'randomness.strict=False to train with a warning.')
    assert not glob.glob(str(tmp_path / 'strict' / '*.pth'))
