"""mmrepro.cli.support_matrix: bad arguments are named, exit 2."""
import importlib.util
import os

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


@pytest.mark.skipif(importlib.util.find_spec('mmyolo') is not None,
                    reason='mmyolo is installed here: the error needs a stack without it')
def test_a_family_of_a_missing_codebase_is_named_before_anything_is_written(tmp_path,
                                                                            capsys):
    argv = ['--families', 'fcos', 'mmyolo-yolov8', '--work-dir', str(tmp_path / 'work'),
            '--data-root', str(tmp_path / 'data'), '--out', str(tmp_path / 'matrix.md')]
    assert matrix_main(argv) == 2
    assert capsys.readouterr().err == (
        'mmrepro-matrix: error: family mmyolo-yolov8 needs mmyolo, which this environment '
        'does not have; install it (docs/install.md) or leave the family out\n')
    assert os.listdir(tmp_path) == []
