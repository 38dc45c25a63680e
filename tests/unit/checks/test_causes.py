"""mmrepro.checks.causes: each cause said once; what cannot change training set apart."""
from mmrepro.checks.causes import inert_by_records, sort_settings
from mmrepro.record.run_record import MISSING


def test_the_seed_is_one_cause_and_inert_keys_are_set_apart():
    diffs = [('seed', 0, 1), ('randomness.seed', 0, 1), ('config.randomness.seed', '0', '1'),
             ('env.PYTHONHASHSEED', '0', '1'), ('config.val_evaluator.metric', "'bbox'",
                                                "'segm'"),
             ('config.default_hooks.checkpoint.interval', '1', '2'),
             ('config.train_cfg.val_interval', '1', '3'),
             ('randomness.strict', False, True), ('config.randomness.warn_only', 'False',
                                                  'True'),
             ('torch_flags.deterministic_warn_only', False, True)]
    kept, inert, follows = sort_settings(diffs)
    assert kept == [('seed', 0, 1)]
    assert follows == {'seed': ['randomness.seed', 'config.randomness.seed',
                                'env.PYTHONHASHSEED']}
    assert [key for key, _, _ in inert] == [
        'config.val_evaluator.metric', 'config.default_hooks.checkpoint.interval',
        'config.train_cfg.val_interval', 'randomness.strict', 'config.randomness.warn_only',
        'torch_flags.deterministic_warn_only']
    # a hash seed set apart from the seed is a cause of its own
    kept, _, follows = sort_settings([('seed', 0, 1), ('env.PYTHONHASHSEED', '0', '7')])
    assert kept == [('seed', 0, 1), ('env.PYTHONHASHSEED', '0', '7')] and follows == {}


def _record(hooks, workers='2', sample_seeding=True, imports="['mmrepro']"):
    config = {'train_dataloader.num_workers': workers, 'custom_imports.imports': imports}
    for i, (kind, options) in enumerate(hooks):
        config[f'custom_hooks.{i}.type'] = repr(kind)
        config.update({f'custom_hooks.{i}.{k}': repr(v) for k, v in options.items()})
    return dict(config=config, randomness=dict(sample_seeding=sample_seeding))


def test_the_records_show_workers_and_the_checks_hooks_inert():
    """A check's child config: ReproducibilityHook traced at every step, a stop hook."""
    baseline = _record([('ReproducibilityHook', {}), ('EMAHook', dict(momentum=0.1))],
                       imports="['support.plugin']")
    child = _record([('ReproducibilityHook', dict(trace_interval=1)),
                     ('EMAHook', dict(momentum=0.1)),
                     ('CheckReproStopHook', dict(max_iters=8))], workers='0',
                    imports="['support.plugin', 'mmrepro']")
    diffs = [('config.train_dataloader.num_workers', '2', '0'),
             ('config.custom_hooks.0.trace_interval', MISSING, '1'),
             ('config.custom_hooks.2.type', MISSING, "'CheckReproStopHook'"),
             ('config.custom_hooks.2.max_iters', MISSING, '8'),
             ('config.custom_imports.imports', "['support.plugin']",
              "['support.plugin', 'mmrepro']")]
    assert inert_by_records(diffs, baseline, child) == {key for key, _, _ in diffs}
    kept, inert, _ = sort_settings(diffs, (baseline, child))
    assert kept == [] and inert == diffs
    assert sort_settings(diffs)[0] == diffs  # without the records nothing shows them inert


def test_workers_matter_where_a_run_keeps_mmengines_worker_seeding():
    diffs = [('config.train_dataloader.num_workers', '2', '0')]
    assert inert_by_records(diffs, _record([]), _record([], '0', sample_seeding=False)) == set()


def test_another_hook_in_the_same_place_can_change_training():
    a = _record([('ReproducibilityHook', {}), ('EMAHook', dict(momentum=0.1))])
    b = _record([('ReproducibilityHook', {}), ('EMAHook', dict(momentum=0.2))])
    diffs = [('config.custom_hooks.1.momentum', '0.1', '0.2')]
    assert inert_by_records(diffs, a, b) == set()
    b = _record([], imports="['mmrepro', 'my.plugin']")
    diffs = [('config.custom_imports.imports', "['mmrepro']", "['mmrepro', 'my.plugin']")]
    assert inert_by_records(diffs, a, b) == set()
