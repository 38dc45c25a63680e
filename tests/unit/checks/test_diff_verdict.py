"""mmrepro.checks.diff_verdict: a data or a numeric difference, and its causes ranked."""
from mmrepro.checks.diff_verdict import settings_verdict, sort_settings, verdict_lines

EXPECTED_NO = '  bitwise equality expected: no, settings that change results differ'


def test_numeric_causes_are_ranked_most_likely_first():
    diffs = [('env.CUBLAS_WORKSPACE_CONFIG', None, ':4096:8'),
             ('versions.torch', '2.1.2', '2.13.0'),
             ('numerics.cpu.capability', 'AVX512', 'AVX2'),
             ('config.model.neck.out_channels', '32', '64'),
             ('devices.host', 'a', 'b')]  # a place: explains nothing
    assert verdict_lines(diffs, True, 4, None, True) == [
        'verdict: the same samples in every traced iteration; the numbers differ from '
        'iteration 4',
        '  explained by (most likely first): the config (config.model.neck.out_channels); '
        'library versions (versions.torch); the CPU kernel set (numerics.cpu.capability); '
        'environment variables (env.CUBLAS_WORKSPACE_CONFIG)', EXPECTED_NO]


def test_data_difference_names_its_causes():
    diffs = [('world_size', 1, 2), ('config.train_dataloader.num_workers', '4', '2')]
    assert verdict_lines(diffs, True, 1, 1, True) == [
        'verdict: the data differ from iteration 1',
        '  why: the process layout (ranks, per-rank batch, accumulation) (world_size); the '
        'data loader or pipeline config (config.train_dataloader.num_workers)']
    # without traced samples, a different fingerprint is the evidence
    assert verdict_lines([('data.annotations_sha256', 'a', 'b')], True, 2, None, False) == [
        'verdict: the data differ', '  why: the data files (fingerprint) '
        '(data.annotations_sha256)']


def test_same_data_on_another_layout_blames_the_layout_first():
    diffs = [('env.OMP_NUM_THREADS', None, '1'), ('world_size', 1, 2),
             ('config.train_dataloader.batch_size', '4', '2'), ('config.launcher', 'none',
                                                              'pytorch')]
    # The thread count itself is recorded equal: the variable explains nothing more.
    assert verdict_lines(diffs, True, 1, None, True)[1] == (
        '  explained by (most likely first): the process layout (ranks, per-rank batch, '
        'accumulation) (world_size, config.train_dataloader.batch_size, config.launcher); '
        'environment variables (env.OMP_NUM_THREADS)')


def test_data_difference_with_nothing_recorded_says_so():
    assert verdict_lines([], True, 3, 3, True) == [
        'verdict: the data differ from iteration 3',
        '  why: nothing recorded: the same files and settings, so the data order or '
        'augmentation is not reproducible']


def test_unexplained_divergence_was_expected_to_be_bitwise():
    assert verdict_lines([('devices.host', 'a', 'b')], True, 2, None, True)[1] == (
        '  bitwise equality expected: yes: nothing recorded that changes results differs, '
        'so an operation is nondeterministic or a setting is not recorded (run '
        'tools/check_repro.py on the config)')


def test_equal_runs():
    assert verdict_lines([], False, None, None, False) == [
        'verdict: bit-identical, as expected (no setting that changes results differs)']
    assert verdict_lines([('torch_flags.cudnn_benchmark', False, True)], False, None, None,
                         True) == [
        'verdict: the same samples in every traced iteration; bit-identical, although '
        'settings differ: PyTorch numerics flags (torch_flags.cudnn_benchmark)']


def test_the_seed_is_one_cause_and_inert_keys_are_set_apart():
    diffs = [('seed', 0, 1), ('randomness.seed', 0, 1), ('config.randomness.seed', '0', '1'),
             ('env.PYTHONHASHSEED', '0', '1'), ('config.val_evaluator.metric', "'bbox'",
                                                "'segm'"),
             ('config.default_hooks.checkpoint.interval', '1', '2'),
             ('config.train_cfg.val_interval', '1', '3')]
    kept, inert, follows = sort_settings(diffs)
    assert kept == [('seed', 0, 1)]
    assert follows == {'seed': ['randomness.seed', 'config.randomness.seed',
                                'env.PYTHONHASHSEED']}
    assert [key for key, _, _ in inert] == ['config.val_evaluator.metric',
                                            'config.default_hooks.checkpoint.interval',
                                            'config.train_cfg.val_interval']
    # a hash seed set apart from the seed is a cause of its own
    kept, _, follows = sort_settings([('seed', 0, 1), ('env.PYTHONHASHSEED', '0', '7')])
    assert kept == [('seed', 0, 1), ('env.PYTHONHASHSEED', '0', '7')] and follows == {}


def test_settings_alone_differ_when_no_outcome_compares():
    assert settings_verdict([('data.annotations_sha256', 'a', 'b'),
                             ('versions.torch', '2.1.2', '2.13.0')]) == [
        'verdict: settings that change training differ: the data files (fingerprint) '
        '(data.annotations_sha256); library versions (versions.torch)',
        '  no outcome was compared: the runs hold no common logged or traced iteration and '
        'no common weights']
