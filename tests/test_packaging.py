"""setup.cfg promises only the Python and torch versions the code runs on."""
import ast
import configparser
import glob
import os.path as osp
import re

from packaging.specifiers import SpecifierSet
from repro_utils import REPO

from mmrepro.checkpoint_io import allowed_globals


def _options():
    cfg = configparser.ConfigParser()
    cfg.read(osp.join(REPO, 'setup.cfg'))
    requires = {}
    for line in cfg['options']['install_requires'].strip().splitlines():
        name, spec = re.match(r'([A-Za-z0-9_.-]+)(.*)', line.strip()).groups()
        requires[name] = SpecifierSet(spec)
    return SpecifierSet(cfg['options']['python_requires']), requires


def _uses_zip_strict() -> bool:
    for path in glob.glob(osp.join(REPO, 'mmrepro', '**', '*.py'), recursive=True):
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'zip' and \
                    any(k.arg == 'strict' for k in node.keywords):
                return True
    return False


def test_python_floor_is_the_one_zip_strict_needs():
    python, _ = _options()
    assert _uses_zip_strict()  # zip(strict=True) exists from Python 3.10 on
    assert '3.9.18' not in python and '3.10.0' in python


def test_torch_floor_is_the_one_named_safe_globals_need():
    _, requires = _options()
    # A (callable, 'module.name') allow-list entry: torch >= 2.6 (pytorch#142153).
    assert any(isinstance(entry, tuple) for entry in allowed_globals())
    assert '2.5.1' not in requires['torch'] and '2.6.0' in requires['torch']
