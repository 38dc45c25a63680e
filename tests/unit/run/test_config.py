"""mmrepro.run.config: a config and its --cfg-options loaded with one-line errors; the
training checks every tool runs before anything is built."""
from __future__ import annotations

import pytest

from mmrepro.run.config import (
    ConfigError,
    check_training_config,
    launcher_world_size,
    load_config,
    one_line,
    parse_cfg_options,
)


def test_errors_are_one_line():
    assert one_line('a\n  b\tc  ') == 'a b c'
    err = ConfigError('config\nfile   not\n found')
    assert str(err) == 'config file not found' and isinstance(err, ValueError)


def test_cfg_options_parse_as_mmengine_parses_them():
    assert parse_cfg_options(['a.b=1', 'c=[1,2]', 'd=True', 'e=x', 'f=0.5', 'g=None']) == {
        'a.b': 1, 'c': [1, 2], 'd': True, 'e': 'x', 'f': 0.5, 'g': None}
    assert parse_cfg_options([]) == {}


@pytest.mark.parametrize('option, message', [
    ('randomness.seed', "--cfg-options expects KEY=VALUE pairs, got 'randomness.seed' (no "
                        'value): write it as randomness.seed=VALUE'),
    ('=3', "--cfg-options expects KEY=VALUE pairs, got '=3' (no key): write it as KEY=VALUE, "
           'e.g. randomness.seed=0'),
    ('a=[1,2', "--cfg-options a: cannot parse the value '[1,2' ("),
])
def test_bad_cfg_options_name_what_to_write(option, message):
    with pytest.raises(ConfigError) as info:
        parse_cfg_options([option])
    assert str(info.value).startswith(message)


def test_load_config_merges_the_options(tmp_path):
    path = tmp_path / 'cfg.py'
    path.write_text("model = dict(type='M', depth=18)\nrandomness = dict(seed=0)\n")
    cfg = load_config(str(path), ['model.depth=50', 'randomness.seed=7'])
    assert cfg.model == dict(type='M', depth=50) and cfg.randomness.seed == 7


def test_load_config_names_a_missing_file_and_a_syntax_error_with_its_file(tmp_path):
    missing = str(tmp_path / 'nope.py')
    with pytest.raises(ConfigError) as info:
        load_config(missing)
    assert str(info.value) == (f'config file not found: {missing!r}; expected the path of a '
                               'config file, check its spelling and the working directory')
    bad = tmp_path / 'bad.py'
    bad.write_text('a = 1\nb = dict(\n')
    child = tmp_path / 'child.py'
    child.write_text("_base_ = './bad.py'\nc = 2\n")
    for path in (bad, child):
        with pytest.raises(ConfigError) as info:
            load_config(str(path))
        assert str(info.value) == (
            f"config {str(path)!r} is not valid Python: '(' was never closed ({bad}, line 2: "
            f"'b = dict('); fix the file (python -m py_compile {bad} shows the line)")


def test_an_option_that_does_not_merge_is_named(tmp_path):
    path = tmp_path / 'cfg.py'
    path.write_text('model = dict(layers=[1, 2])\n')
    with pytest.raises(ConfigError, match=r"^--cfg-options model\.layers\.x=1 cannot be merged "
                       r"into '.*cfg\.py': .*; a dotted KEY must follow the dicts of the config "
                       r'\(list items by index\)$'):
        load_config(str(path), ['model.layers.x=1'])


def test_the_world_size_each_launcher_starts(monkeypatch):
    assert launcher_world_size('none') == 1
    monkeypatch.setenv('WORLD_SIZE', '4')
    assert launcher_world_size('pytorch') == 4
    monkeypatch.setenv('WORLD_SIZE', '0')
    assert launcher_world_size('pytorch') is None
    monkeypatch.delenv('SLURM_NTASKS', raising=False)
    assert launcher_world_size('slurm') is None
    monkeypatch.setenv('SLURM_NTASKS', '8')
    assert launcher_world_size('slurm') == 8
    assert launcher_world_size('other') is None


def _training(**cfg):
    from mmengine.config import Config
    return Config(dict(train_dataloader=dict(batch_size=2),
                       optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1),
                                          accumulative_counts=2), **cfg))


def test_training_config_checks_randomness_then_the_global_batch():
    check_training_config(_training(randomness=dict(seed=0, global_batch=8)), 2)  # 2 x 2 x 2
    check_training_config(_training(randomness=dict(global_batch=8)), None)  # unknown: later
    with pytest.raises(ConfigError, match=r"^Unknown key\(s\) \['sede'\] in `randomness`"):
        check_training_config(_training(randomness=dict(sede=1)), 1)
    with pytest.raises(ConfigError) as info:
        check_training_config(_training(randomness=dict(global_batch=8)), 1)
    assert str(info.value) == (
        'randomness.global_batch=8, but this run trains 1 rank(s) x batch_size 2 x '
        'accumulative_counts 2 = 4 samples per optimizer step. Set train_dataloader.batch_size '
        'x optim_wrapper.accumulative_counts to 8 for 1 rank(s).')
