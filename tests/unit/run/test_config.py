"""mmrepro.run.config: a config and its --cfg-options loaded with one-line errors; the
training checks every tool runs before anything is built."""
from __future__ import annotations

import pytest

from mmrepro.run.config import (
    LAUNCHER_VARIABLES,
    ConfigError,
    check_launcher_environment,
    check_training_config,
    check_work_dir,
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
    ('a=[1,2', "--cfg-options a: cannot parse the value '[1,2' (its brackets do not balance"),
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


@pytest.mark.parametrize('value, opened, closed', [('[1', 1, 0), ('[1,2', 1, 0), ('(1', 1, 0),
                                                   ('1]', 0, 1), ('[[1,2]', 2, 1)])
def test_a_value_whose_brackets_do_not_balance_is_refused(value, opened, closed):
    with pytest.raises(ConfigError) as info:
        parse_cfg_options([f'train_cfg.max_epochs={value}'])
    assert str(info.value) == (
        f'--cfg-options train_cfg.max_epochs: cannot parse the value {value!r} (its brackets '
        f'do not balance: {opened} opened, {closed} closed); expected a number, '
        'True/False/None, a string or a bracketed list such as [1,2]')


def test_balanced_and_quoted_values_parse():
    assert parse_cfg_options(['a=[(1,2),3]', 'b="[1"', 'c=[]']) == {
        'a': [(1, 2), 3], 'b': '[1', 'c': []}


@pytest.mark.parametrize('option, message', [
    ('train_cfg.max_epochs=three',
     "--cfg-options train_cfg.max_epochs='three': expected a number (the config has "
     'train_cfg.max_epochs=12), got a string; write e.g. train_cfg.max_epochs=12'),
    ('optim_wrapper.optimizer.lr=fast',
     "--cfg-options optim_wrapper.optimizer.lr='fast': expected a number (the config has "
     'optim_wrapper.optimizer.lr=0.02), got a string; write e.g. optim_wrapper.optimizer.lr=0.02'),
    ('model.flags.0=yes',
     "--cfg-options model.flags.0='yes': expected True or False (the config has "
     'model.flags.0=True), got a string; write e.g. model.flags.0=True'),
])
def test_a_string_for_a_number_or_a_flag_is_refused(tmp_path, option, message):
    path = tmp_path / 'cfg.py'
    path.write_text("train_cfg = dict(max_epochs=12)\nmodel = dict(flags=[True], name='a')\n"
                    "optim_wrapper = dict(optimizer=dict(lr=0.02))\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(path), [option])
    assert str(info.value) == message
    cfg = load_config(str(path), ['model.name=b', 'train_cfg.max_epochs=2.5', 'model.new=x'])
    assert (cfg.model.name, cfg.train_cfg.max_epochs, cfg.model.new) == ('b', 2.5, 'x')


LAUNCH_PYTORCH = ('launch it with bash tools/dist_train.sh CONFIG NPROC or torchrun '
                  '--nproc_per_node NPROC tools/train.py CONFIG --launcher pytorch')


@pytest.fixture
def no_launcher(monkeypatch):
    """No launcher variable in the environment."""
    for names, _ in LAUNCHER_VARIABLES.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_launcher_needs_the_variables_it_sets(no_launcher):
    check_launcher_environment('none')
    with pytest.raises(ConfigError) as info:
        check_launcher_environment('pytorch')
    assert str(info.value) == (
        '--launcher pytorch needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the '
        'environment (the launcher sets them for each process), but none is set; '
        f'{LAUNCH_PYTORCH}, or leave out --launcher pytorch to train in one process')
    for name, value in dict(RANK='0', WORLD_SIZE='2').items():
        no_launcher.setenv(name, value)
    with pytest.raises(ConfigError, match=r'but MASTER_ADDR, MASTER_PORT are not set; '):
        check_launcher_environment('pytorch')
    no_launcher.setenv('MASTER_ADDR', '127.0.0.1')
    no_launcher.setenv('MASTER_PORT', 'x')
    with pytest.raises(ConfigError) as info:
        check_launcher_environment('pytorch')
    assert str(info.value) == ("--launcher pytorch: MASTER_PORT='x', expected a whole number "
                               f'>= 0; {LAUNCH_PYTORCH}, which sets it')
    no_launcher.setenv('MASTER_PORT', '29500')
    check_launcher_environment('pytorch')
    no_launcher.setenv('WORLD_SIZE', '0')
    with pytest.raises(ConfigError, match=r"^--launcher pytorch: WORLD_SIZE='0', expected a "
                       r'whole number >= 1; '):
        check_launcher_environment('pytorch')


def test_slurm_and_mpi_name_their_variables(no_launcher):
    with pytest.raises(ConfigError, match=r'^--launcher slurm needs SLURM_PROCID, SLURM_NTASKS '
                       r'and SLURM_NODELIST in the environment .* launch it with srun '):
        check_launcher_environment('slurm')
    no_launcher.setenv('OMPI_COMM_WORLD_RANK', '0')
    with pytest.raises(ConfigError, match=r'but OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,'
                       r' MASTER_ADDR are not set; launch it with MASTER_ADDR=HOST mpirun '):
        check_launcher_environment('mpi')


def test_a_check_for_the_whole_world_needs_only_its_size(no_launcher):
    with pytest.raises(ConfigError) as info:
        check_launcher_environment('pytorch', whole_world=True)
    assert str(info.value) == (
        '--check-config --launcher pytorch checks the arguments for every process the '
        'launcher will start and needs their number in WORLD_SIZE, but it is not set; run it '
        'as WORLD_SIZE=NPROC tools/train.py CONFIG --check-config --launcher pytorch '
        '(tools/dist_train.sh does)')
    no_launcher.setenv('WORLD_SIZE', '2')
    check_launcher_environment('pytorch', whole_world=True)


def test_the_work_dir_is_checked_and_not_made(tmp_path):
    check_work_dir(str(tmp_path))
    check_work_dir(str(tmp_path / 'new' / 'deeper'))
    assert not (tmp_path / 'new').exists()
    afile = tmp_path / 'afile'
    afile.write_text('')
    with pytest.raises(ConfigError) as info:
        check_work_dir(str(afile), 'work_dir')
    assert str(info.value) == (f"work_dir {str(afile)!r} is a file, expected a directory (made "
                               'if missing) for the checkpoints and logs; choose another path')
    with pytest.raises(ConfigError) as info:
        check_work_dir(str(afile / 'w'))
    assert str(info.value) == (f"--work-dir {str(afile / 'w')!r} cannot be made: "
                               f"{str(afile)!r} is a file, expected a directory; choose "
                               'another path')
