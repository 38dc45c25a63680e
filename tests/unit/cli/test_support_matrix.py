"""mmrepro.cli.support_matrix: bad arguments are named, exit 2."""
import pytest

from mmrepro.cli.support_matrix import main as matrix_main


@pytest.mark.parametrize('argv,message', [
    (['--families', 'yolo'], "unknown family 'yolo'; expected one of faster-rcnn, "),
    (['--iters', '1'], '--iters must be >= 2 (the first iteration is not timed), got 1'),
    (['--jobs', '0'], '--jobs must be >= 1, got 0'),
    (['--epochs', '1'], '--epochs must be >= 2 (resumed from each but the last), got 1'),
])
def test_bad_arguments_are_named(argv, message, capsys):
    assert matrix_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith('mmrepro-matrix: error: ') and message in err
