"""A wheel of mmrepro, pip-installed into an existing environment, as a user would.

The "user environment" is a new virtual environment that sees this stack's packages
(torch, mmcv, mmdet, mmengine, numpy) through a ``.pth`` file, so pip's resolver
treats them as installed and anything it changed would land in the new environment
only. Everything then runs from outside the checkout.
"""
from __future__ import annotations

import os
import os.path as osp
import shutil
import site
import subprocess
import sys

import pytest
from repro_utils import REPO

#: Packages whose installed versions a user's environment must keep.
KEPT = ('torch', 'mmcv', 'mmdet', 'mmengine', 'numpy')
#: Left out of the copy the wheel is built from: at the top of the checkout only.
_TOP_IGNORED = {'.git', '.venv', '.venv-floor', 'work_dirs', 'data', 'build', '.pytest_cache',
                '.ruff_cache'}


def _ignored(directory: str, names: list) -> set:
    top = osp.samefile(directory, REPO)
    return {n for n in names if n == '__pycache__' or n.endswith('.egg-info')
            or (top and n in _TOP_IGNORED)}


def _run(*cmd: str, cwd: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PIP_CONSTRAINT')}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f'{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}'
    return proc


def _pip(user_python: str, *args: str, cwd: str) -> subprocess.CompletedProcess:
    return _run(sys.executable, '-m', 'pip', '--disable-pip-version-check', '--python',
                user_python, *args, cwd=cwd)


def _kept_versions(user_python: str, cwd: str) -> dict:
    lines = _pip(user_python, 'list', '--format=freeze', cwd=cwd).stdout.splitlines()
    versions = dict(line.split('==', 1) for line in lines if '==' in line)
    return {name: versions.get(name) for name in (*KEPT, 'mmrepro')}


@pytest.fixture(scope='module')
def user_env(tmp_path_factory) -> dict:
    """Build the wheel from a copy of the checkout and install it into a user env."""
    pytest.importorskip('mmdet', reason='the user environment is torch + mmcv + mmdet')
    root = tmp_path_factory.mktemp('install')
    source, wheels, outside = root / 'src', root / 'wheels', root / 'elsewhere'
    shutil.copytree(REPO, source, symlinks=True, ignore=_ignored)
    outside.mkdir()
    _run(sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q',
         '-w', str(wheels), str(source), cwd=str(root))
    wheel = next(wheels.glob('mmrepro-*.whl'))
    venv = root / 'user'
    _run(sys._base_executable, '-m', 'venv', '--without-pip', str(venv), cwd=str(root))
    python = str(venv / 'bin' / 'python')
    purelib = _run(python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])',
                   cwd=str(root)).stdout.strip()
    with open(osp.join(purelib, '_stack.pth'), 'w') as f:
        f.write(site.getsitepackages()[0] + '\n')
    before = _kept_versions(python, str(outside))
    install = _pip(python, 'install', '--no-index', str(wheel), cwd=str(outside))
    return dict(python=python, bin=str(venv / 'bin'), outside=str(outside), before=before,
                after=_kept_versions(python, str(outside)), install=install.stdout)


def test_install_changes_none_of_the_users_packages(user_env):
    before, after = user_env['before'], user_env['after']
    assert before['mmrepro'] is None and after['mmrepro'] is not None
    assert all(before[name] for name in KEPT), before
    assert {k: after[k] for k in KEPT} == {k: before[k] for k in KEPT}


def test_console_scripts_and_module_entry_points(user_env):
    for script, word in (('mmrepro-train', '--seed'), ('mmrepro-check', '--resume-check'),
                         ('mmrepro-diff', '--plot'), ('mmrepro-matrix', '--families'),
                         ('mmrepro-demo-data', '--num-train')):
        out = _run(osp.join(user_env['bin'], script), '--help', cwd=user_env['outside'])
        assert word in out.stdout, (script, out.stdout[:500])
    out = _run(user_env['python'], '-m', 'mmrepro.cli.train', '--help',
               cwd=user_env['outside'])
    assert '--deterministic' in out.stdout


PROBE = """
import mmrepro
from mmengine.config import Config
cfg = Config.fromfile('child.py')
zoo = Config.fromfile('zoo.py')
print(mmrepro.__file__)
print(cfg.randomness, cfg.custom_imports.imports, cfg.model.type,
      [h['type'] for h in cfg.custom_hooks])
print(zoo.model.type, zoo.randomness)
"""


def test_a_config_elsewhere_inherits_the_installed_configs(user_env):
    outside = user_env['outside']
    with open(osp.join(outside, 'child.py'), 'w') as f:
        f.write("_base_ = ['mmdet::rtmdet/rtmdet_tiny_8xb32-300e_coco.py',\n"
                "          'mmrepro::_base_/repro_runtime.py']\n"
                "randomness = dict(seed=5)\n")
    with open(osp.join(outside, 'zoo.py'), 'w') as f:
        f.write("_base_ = ['mmrepro::zoo/yolox.py']\n")
    out = _run(user_env['python'], '-c', PROBE, cwd=outside).stdout.splitlines()
    assert out[0].startswith(osp.dirname(osp.dirname(user_env['bin'])))  # not the checkout
    # RTMDet's own custom_hooks (EMA, pipeline switch) stay beside the runtime's lines.
    assert out[1] == ("{'seed': 5, 'deterministic': True} ['mmrepro'] RTMDet "
                      "['EMAHook', 'PipelineSwitchHook']")
    assert out[2] == "YOLOX {'seed': 0, 'deterministic': True}"
