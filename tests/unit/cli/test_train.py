"""mmrepro.cli.train: the command line and the config it builds; its re-executions.

The tests taken from the end-to-end module of tools/train.py keep its ``slow`` marker.
"""
import os
import re
import subprocess
import sys

import pytest
from support.repro_utils import CONFIGS, REPO, pythonpath

from mmrepro.cli.train import build_config, parse_args, seed_source


def _cfg(*argv):
    return build_config(parse_args([CONFIGS['retinanet'], *argv]))


@pytest.mark.slow
def test_cli_overrides_config_and_adds_hook():
    cfg = _cfg('--seed', '5', '--deterministic', '--diff-rank-seed', '--work-dir', '/tmp/x')
    assert cfg.randomness == dict(seed=5, deterministic=True, diff_rank_seed=True)
    assert [h['type'] for h in cfg.custom_hooks].count('ReproducibilityHook') == 1
    assert 'mmrepro' in cfg.custom_imports['imports'] and cfg.work_dir == '/tmp/x'
    assert _cfg('--resume').resume is True and _cfg('--resume').load_from is None
    assert _cfg('--resume', 'a.pth').load_from == 'a.pth'
    # The demo config turns deterministic mode on; the CLI can turn it off again.
    assert _cfg().randomness['deterministic'] is True
    assert _cfg('--no-deterministic').randomness['deterministic'] is False
    assert _cfg('--no-verify-checkpoints').randomness['verify_checkpoints'] is False
    assert 'verify_checkpoints' not in _cfg().randomness  # the default: verify


@pytest.mark.slow
@pytest.mark.parametrize('argv, match', [
    (['--seed', '-3'], r'--seed must be in \[0, 4294967295\]'),
    (['--seed', 'abc'], r"--seed must be an integer in \[0, 2\*\*32 - 1\], got 'abc'"),
])
def test_bad_cli_seed_exits_with_message(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        _cfg(*argv)
    assert exc.value.code == 2 and re.search(match, capsys.readouterr().err)


@pytest.mark.slow
def test_unknown_randomness_key_fails_before_training():
    with pytest.raises(ValueError, match=r"Unknown key\(s\) \['sede'\] in `randomness`"):
        _cfg('--cfg-options', 'randomness.sede=1')


def test_hash_seed_reexec_fixes_hashing_in_the_process(tmp_path):
    script = tmp_path / 'probe.py'
    script.write_text(
        'import sys\n'
        'if sys.argv[1] == "fix":\n'
        '    from mmrepro.cli.train import reexec_with_hash_seed\n'
        '    reexec_with_hash_seed(5, sys.argv)\n'
        'print(hash("mmrepro"))\n')
    # mmrepro from this checkout, whether or not it is pip-installed.
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONHASHSEED'}
    env['PYTHONPATH'] = pythonpath(REPO)

    def run(mode):
        return subprocess.run([sys.executable, str(script), mode], env=env, check=True,
                              capture_output=True, text=True).stdout.split()[-1]

    assert run('fix') == run('fix')
    assert run('free') != run('free')  # randomised without it


@pytest.mark.parametrize('argv, source', [
    ([], 'config'),
    (['--seed', '3'], '--seed'),
    (['--seed', '3', '--cfg-options', 'randomness.seed=4'], '--seed'),
    (['--cfg-options', 'randomness.seed=4'], '--cfg-options randomness.seed'),
    (['--cfg-options', 'randomness.deterministic=True'], 'config'),
])
def test_the_seed_source_is_the_argument_that_set_it(argv, source):
    assert seed_source(parse_args([CONFIGS['retinanet'], *argv])) == source
