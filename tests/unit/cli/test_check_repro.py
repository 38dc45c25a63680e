"""mmrepro.cli.check_repro: bad arguments are exit 2 with a message, before any run."""
import pytest
from support.repro_utils import write_config

from mmrepro.cli.check_repro import main


@pytest.mark.parametrize('args, message', [
    (['missing.py'], "config file not found: 'missing.py'"),
    (['{cfg}', '--iters', '0'], '--iters must be >= 1, got 0'),
    (['{cfg}', '--iters', '1', '--resume-check'],
     '--resume-check resumes in the middle of the run, so it needs --iters >= 2, got 1'),
    (['{cfg}', '--workers-check', '-1'], '--workers-check must be >= 0, got -1'),
    (['{cfg}', '--cfg-options', 'lr'], "--cfg-options expects KEY=VALUE pairs, got 'lr'"),
    (['{empty}'], "has no model; mmrepro-check needs a training config"),
    (['{cfg}', '--cfg-options', 'randomness.seed=-5'],
     'randomness.seed must be in [0, 4294967295] (2**32 - 1), got -5'),
])
def test_bad_arguments_are_exit_2_with_a_message(tmp_path, capsys, args, message):
    cfg = write_config(str(tmp_path / 'cfg.py'), 'retinanet', str(tmp_path))
    empty = tmp_path / 'empty.py'
    empty.write_text('a = 1\n')
    argv = [a.format(cfg=cfg, empty=empty) for a in args]
    assert main(argv + ['--work-dir', str(tmp_path / 'check')]) == 2
    err = capsys.readouterr().err
    assert err.startswith('mmrepro-check: error: ') and message in err


def test_malformed_command_line_is_exit_2():
    with pytest.raises(SystemExit) as exc:
        main(['--iters', 'many'])
    assert exc.value.code == 2
