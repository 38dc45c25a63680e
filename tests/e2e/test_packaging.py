"""setup.cfg promises the Python, torch and numpy versions the test stacks run on."""
import ast
import configparser
import glob
import os.path as osp
import re

from packaging.specifiers import SpecifierSet
from support.repro_utils import REPO


def _options():
    cfg = configparser.ConfigParser()
    cfg.read(osp.join(REPO, 'setup.cfg'))
    requires = {}
    for line in cfg['options']['install_requires'].strip().splitlines():
        name, spec = re.match(r'([A-Za-z0-9_.-]+)(.*)', line.strip()).groups()
        requires[name] = SpecifierSet(spec)
    return cfg, SpecifierSet(cfg['options']['python_requires']), requires


def _floor_pins():
    pins = {}
    with open(osp.join(REPO, 'requirements', 'stack-floor.txt')) as f:
        for line in f:
            match = re.match(r'([A-Za-z0-9_.-]+)==(\S+)', line.strip())
            if match:
                pins[match.group(1)] = match.group(2)
    return pins


def _uses_zip_strict() -> bool:
    for path in glob.glob(osp.join(REPO, 'mmrepro', '**', '*.py'), recursive=True):
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'zip' and \
                    any(k.arg == 'strict' for k in node.keywords):
                return True
    return False


def test_python_floor_is_the_one_zip_strict_needs():
    _, python, _ = _options()
    assert _uses_zip_strict()  # zip(strict=True) exists from Python 3.10 on
    assert '3.9.18' not in python and '3.10.0' in python


def test_minimums_are_the_tested_floor_stack():
    _, _, requires = _options()
    floor = _floor_pins()
    assert floor['torch'] == '2.1.2' and floor['numpy'] == '1.26.4'
    assert '2.0.1' not in requires['torch'] and floor['torch'] in requires['torch']
    assert '1.25.2' not in requires['numpy'] and floor['numpy'] in requires['numpy']
    assert floor['mmengine'] in requires['mmengine']


def test_install_pulls_neither_mmcv_nor_a_torch_build():
    cfg, _, requires = _options()
    assert set(requires) == {'torch', 'mmengine', 'numpy'}
    extras = cfg['options.extras_require']
    assert 'mmcv' not in extras['mmdet'] and 'mmdet>=3.0,<3.4' in extras['mmdet']
