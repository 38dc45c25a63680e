"""mmrepro.run.settings: the ``randomness`` keys, their defaults and their messages."""
import dataclasses
import json

import pytest
import torch

from mmrepro.determinism.mode import has_fill_uninitialized_memory
from mmrepro.rng.seeding import set_random_seed
from mmrepro.run.settings import (
    RANDOMNESS_DEFAULTS,
    RunSettings,
    check_seed,
    parse_randomness,
    validate_randomness,
)


@pytest.fixture(autouse=True)
def _deterministic_mode_off():
    """Start from PyTorch's default: a Runner of an earlier test that asked for
    deterministic mode left it on (it is process-wide), and a refused setting must be
    seen to turn nothing on."""
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize('seed, exc, match', [
    (True, TypeError, r'randomness.seed must be an int in \[0, 4294967295\], got True'),
    ('1', TypeError, r"got '1' \(str\)"),
    (1.5, TypeError, r'got 1.5 \(float\)'),
    (-1, ValueError, r'must be in \[0, 4294967295\] \(2\*\*32 - 1\), got -1'),
    (2**32, ValueError, r'got 4294967296'),
])
def test_bad_seed_messages(seed, exc, match):
    with pytest.raises(exc, match=match):
        validate_randomness(dict(seed=seed))


#: The accepted keys, as an unknown key's message lists them.
ACCEPTED = ("['cpu_isa', 'deterministic', 'diff_rank_seed', 'fill_uninitialized_memory', "
            "'global_batch', 'global_stream', 'keyed_cache', 'sample_seeding', 'seed', "
            "'strict', 'threads', 'verify_checkpoints', 'warn_only']")


@pytest.mark.parametrize('key, guess', [('sede', 'seed'), ('sead', 'seed'),
                                        ('determinstic', 'deterministic'),
                                        ('keyed_caches', 'keyed_cache')])
def test_a_misspelt_key_gets_the_closest_key_suggested(key, guess):
    with pytest.raises(ValueError) as info:
        validate_randomness({key: 1})
    assert str(info.value) == (
        f"Unknown key(s) ['{key}'] in `randomness`: did you mean '{guess}'? Rename "
        f'randomness.{key} to randomness.{guess} (in the config or --cfg-options), or '
        'remove it.')


def test_an_unknown_key_close_to_none_lists_the_accepted_keys():
    with pytest.raises(ValueError) as info:
        validate_randomness(dict(colour=1))
    assert str(info.value) == (
        "Unknown key(s) ['colour'] in `randomness`, and no accepted key is close; accepted "
        f'keys are {ACCEPTED}. Check the spelling or remove them.')


def test_several_unknown_keys_each_get_their_guess_in_one_line():
    with pytest.raises(ValueError) as info:
        validate_randomness(dict(sead=1, colour=2, strikt=True))
    assert str(info.value) == (
        "Unknown key(s) ['colour', 'sead', 'strikt'] in `randomness`: did you mean 'seed' "
        "for 'sead', 'strict' for 'strikt'? No accepted key is close to ['colour']; "
        f'accepted keys are {ACCEPTED}. Fix the spelling or remove them.')
    assert '\n' not in str(info.value)


@pytest.mark.parametrize('key', ['deterministic', 'diff_rank_seed', 'sample_seeding',
                                 'keyed_cache', 'global_stream', 'verify_checkpoints'])
def test_flags_must_be_bool(key):
    with pytest.raises(TypeError, match=rf'randomness.{key} must be True or False, got 1 '
                       r'\(int\)'):
        validate_randomness({key: 1})


@pytest.mark.parametrize('value, shown, seed', [([('seed', 1)], "[('seed', 1)] (list)", 0),
                                                (5, '5 (int)', 5), (-5, '-5 (int)', 0),
                                                (True, 'True (bool)', 0)])
def test_randomness_must_be_a_dict(value, shown, seed):
    """A whole number in range was probably meant as the seed: the fix says so."""
    with pytest.raises(TypeError) as info:
        validate_randomness(value)
    assert str(info.value) == (
        f'randomness must be a dict such as dict(seed=0, deterministic=True), got {shown}. '
        f'Set its keys, e.g. `--cfg-options randomness.seed={seed}` or `randomness = '
        f'dict(seed={seed})` in the config.')


@pytest.mark.parametrize('seed, suggested', [(-1, 1), (-5, 5), (2**32, 0), (2**32 + 7, 7)])
def test_an_out_of_range_seed_gets_a_seed_in_range_suggested(seed, suggested):
    with pytest.raises(ValueError) as info:
        check_seed(seed, '--seed')
    assert str(info.value) == (f'--seed must be in [0, 4294967295] (2**32 - 1), got {seed}. '
                               f'Pick a seed in that range, e.g. `{suggested}`.')


def test_defaults_filled():
    out = parse_randomness(dict(seed=3))
    assert out.seed == 3 and out.deterministic is False
    assert out.sample_seeding is True and out.keyed_cache is True


def test_fill_uninitialized_memory_switch():
    if not has_fill_uninitialized_memory():  # torch 2.1: a clear error, nothing set
        with pytest.raises(ValueError, match=(
                r'^randomness\.fill_uninitialized_memory=False needs torch >= 2\.2 '
                r'\(torch\.utils\.deterministic\), but torch 2\.1\.2\S* is installed\. '
                r"Remove the key to keep this torch's behaviour, or upgrade torch\.$")):
            validate_randomness(dict(fill_uninitialized_memory=False))
        with pytest.raises(ValueError, match=r'^fill_uninitialized_memory=True needs torch'):
            set_random_seed(1, deterministic=True, fill_uninitialized_memory=True)
        assert not torch.are_deterministic_algorithms_enabled()
        return
    try:
        set_random_seed(1, deterministic=True, fill_uninitialized_memory=False)
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        set_random_seed(1, deterministic=True, fill_uninitialized_memory=True)
        assert torch.utils.deterministic.fill_uninitialized_memory is True
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = True


@pytest.mark.parametrize('threads, exc', [(0, ValueError), ('2', TypeError), (True, TypeError),
                                          (1.0, TypeError)])
def test_bad_threads_messages(threads, exc):
    with pytest.raises(exc) as info:
        validate_randomness(dict(threads=threads))
    assert str(info.value) == (
        f'randomness.threads must be a whole number >= 1 (PyTorch intra-op threads per '
        f"process), got {threads!r}. Set e.g. `randomness=dict(threads=1)`, or remove the "
        "key to keep PyTorch's default (OMP_NUM_THREADS, else the number of cores).")


@pytest.mark.parametrize('value, exc', [(0, ValueError), (16.0, TypeError)])
def test_bad_global_batch_messages(value, exc):
    with pytest.raises(exc) as info:
        validate_randomness(dict(global_batch=value))
    assert str(info.value) == (
        'randomness.global_batch must be a whole number >= 1 (samples per optimizer step '
        f'over all ranks), got {value!r}. Set e.g. `randomness=dict(global_batch=16)`, or '
        'remove the key to accept any layout.')


def test_threads_default_to_pytorchs_own():
    assert parse_randomness({}).threads is None
    assert parse_randomness(dict(threads=3)).threads == 3


def test_run_settings_are_frozen():
    settings = RunSettings(seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.seed = 2
    assert dataclasses.replace(settings, seed=2).seed == 2 and settings.seed == 1


def test_run_settings_fields_are_the_randomness_keys_with_their_defaults():
    fields = dataclasses.fields(RunSettings)
    assert [f.name for f in fields] == list(RANDOMNESS_DEFAULTS)
    assert {f.name: f.default for f in fields} == RANDOMNESS_DEFAULTS
    assert RunSettings().to_dict() == RANDOMNESS_DEFAULTS


def test_to_dict_round_trips_in_the_order_of_the_defaults():
    settings = parse_randomness(dict(threads=2, seed=5, deterministic=True))
    out = settings.to_dict()
    assert list(out) == list(RANDOMNESS_DEFAULTS)
    assert RunSettings(**out) == settings
    assert out == dict(RANDOMNESS_DEFAULTS, seed=5, deterministic=True, threads=2)
    assert validate_randomness(dict(threads=2, seed=5, deterministic=True)) == out
    assert json.dumps(validate_randomness({})) == json.dumps(RANDOMNESS_DEFAULTS)
