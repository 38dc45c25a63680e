"""mmrepro.cli.test: MMDetection's test flags, the config it builds, one-line errors."""
import pytest
import torch
from support.cli import run_console
from support.repro_utils import CONFIGS

from mmrepro.cli.test import build_config, main, parse_args

CONFIG = CONFIGS['retinanet']


@pytest.fixture
def ckpt(tmp_path):
    path = str(tmp_path / 'epoch_1.pth')
    torch.save({'state_dict': {'w': torch.zeros(2)}, 'meta': {'iter': 8}}, path)
    return path


def _cfg(ckpt, *argv):
    return build_config(parse_args([CONFIG, ckpt, *argv]))


def test_the_config_tests_the_checkpoint_with_mmrepro(ckpt, tmp_path):
    cfg = _cfg(ckpt, '--work-dir', str(tmp_path / 'wd'))
    assert cfg.load_from == ckpt and cfg.resume is False and cfg.work_dir == str(tmp_path / 'wd')
    assert [h['type'] for h in cfg.custom_hooks] == ['ReproducibilityHook']
    assert 'mmrepro' in cfg.custom_imports['imports']
    assert cfg.randomness['deterministic'] is True  # from the config
    assert _cfg(ckpt, '--no-deterministic').randomness['deterministic'] is False
    assert _cfg(ckpt, '--no-verify-checkpoints').randomness['verify_checkpoints'] is False
    assert _cfg(ckpt).work_dir == './work_dirs/retinanet_r18_fpn_3e_tinycoco'


def test_tta_wraps_the_model_and_the_pipeline(ckpt):
    cfg = _cfg(ckpt, '--tta')
    assert cfg.model['type'] == 'DetTTAModel' and cfg.model['module']['type'] == 'RetinaNet'
    assert cfg.test_dataloader.dataset.pipeline[-1]['type'] == 'TestTimeAug'


def test_check_config_builds_and_writes_nothing(ckpt, tmp_path, capsys):
    code, out, err = run_console(main, capsys, CONFIG, ckpt, '--check-config', '--work-dir',
                                 str(tmp_path / 'wd'))
    assert code == 0 and out == f'{CONFIG}: arguments, config and checkpoint are valid\n'
    assert not (tmp_path / 'wd').exists()


@pytest.mark.parametrize('argv, message', [
    (['--out', 'results.json'],
     "--out 'results.json': expected a pickle file name ending in .pkl or .pickle "
     '(MMDetection dumps the predictions with pickle); e.g. --out results.pkl'),
    (['--cfg-options', 'test_evaluator=None'],
     f'{CONFIG}: test_dataloader and test_evaluator must be set to test, got '
     'test_dataloader={'),
    (['--cfg-options', 'randomness.sede=1'], "Unknown key(s) ['sede'] in `randomness`"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, ckpt, tmp_path, capsys):
    code, out, err = run_console(main, capsys, CONFIG, ckpt, '--work-dir',
                                 str(tmp_path / 'wd'), *argv)
    assert code == 2 and out == '' and err.count('\n') == 1
    assert err.startswith(f'mmrepro-test: error: {message}'), err
    assert not (tmp_path / 'wd').exists()


def test_a_missing_checkpoint_is_named(tmp_path, capsys):
    missing = str(tmp_path / 'nope.pth')
    code, _, err = run_console(main, capsys, CONFIG, missing)
    assert code == 2 and err == (
        f"mmrepro-test: error: CHECKPOINT {missing!r}: no such file, expected a checkpoint "
        'file (.pth); give the .pth file to test, e.g. work_dirs/NAME/epoch_12.pth\n')
