"""mmrepro.checks.real_runs: what real runs of a config do that a check's runs did not."""
from __future__ import annotations

from mmengine.config import Config

from mmrepro.checks.real_runs import cause_lines, real_run_causes

ENABLED = dict(custom_imports=dict(imports=['mmrepro']))
SEED = ('the config has no randomness.seed: the check trained with mmrepro-check\'s seed 0, '
        'but every real run draws a new seed, so two real runs train on other samples and end '
        'with other weights')


def test_a_seeded_deterministic_config_that_enables_mmrepro_has_no_cause():
    cfg = Config(dict(ENABLED, randomness=dict(seed=3, deterministic=True)))
    assert real_run_causes(cfg, 0, alerts={}) == []


def test_no_seed_and_nondeterministic_mode_both_fail_with_their_fixes():
    causes = real_run_causes(Config(dict(ENABLED)), 0)
    assert [(c.short, c.fails) for c in causes] == [
        ('the config has no seed (every real run draws a new one)', True),
        ('randomness.deterministic is False', True)]
    assert cause_lines(causes) == [
        'real runs of this config (what the check filled in or cannot show):',
        f'  {SEED}',
        '    fix: set randomness.seed in the config, e.g. randomness = dict(seed=0, '
        'deterministic=True), or pass --seed 0 to mmrepro-train',
        '  randomness.deterministic is False: nothing makes PyTorch choose deterministic '
        'kernels (on GPU: cuDNN autotuning, atomicAdd), and a few identical iterations '
        'neither list the nondeterministic operations nor catch each one',
        '    fix: set randomness.deterministic=True in the config (try it here with '
        '--cfg-options randomness.deterministic=True), or pass --deterministic to '
        'mmrepro-train']
    assert real_run_causes(Config(dict(ENABLED)), None)[0].short == \
        'randomness.deterministic is False'  # the caller names the seed itself


def test_an_operation_a_real_run_stops_at_fails_the_check():
    cfg = Config(dict(ENABLED, randomness=dict(seed=0, deterministic=True)))
    [cause] = real_run_causes(cfg, 0, alerts={'put_': ['run_a', 'run_b']})
    assert cause.short == ('PyTorch has no deterministic implementation of put_ (a real run '
                           'stops there)')
    assert cause.fix == ('replace put_ in the model with deterministic operations, or set '
                         'randomness.warn_only=True to train with them (runs may then differ)')
    cfg.randomness.warn_only = True
    [cause] = real_run_causes(cfg, 0, alerts={'put_': ['run_a']})
    assert cause.text == ('PyTorch has no deterministic implementation of put_: real runs '
                          'warn and go on, and differ wherever it computes nondeterministically')


def test_a_config_without_mmrepro_is_a_note_not_a_failure():
    [cause] = real_run_causes(Config(dict(randomness=dict(seed=0, deterministic=True))), 0)
    assert not cause.fails
    assert cause.fix == ("add custom_imports = dict(imports=['mmrepro'], "
                         'allow_failed_imports=False) to the config, or train it with '
                         'mmrepro-train')
    hook = Config(dict(randomness=dict(seed=0, deterministic=True),
                       custom_hooks=[dict(type='ReproducibilityHook')]))
    assert real_run_causes(hook, 0) == []  # the hook alone enables it
