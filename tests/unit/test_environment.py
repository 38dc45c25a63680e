"""The environment the tests run in, as tools/setup_env.sh makes it: pip finds nothing
broken, one OpenCV distribution provides ``cv2``, and the OpenMMLab codebases and
mmrepro (linked from a checkout) import from anywhere, ``mmrepro::`` configs resolving.

A requirement left unmet (torch's setuptools, albumentations' OpenCV) makes every later
``pip install`` into the environment resolve it again: offline, installing mmrepro
fails.
"""
import importlib.metadata
import os
import os.path as osp
import subprocess
import sys

import pytest
from support.codebases import stack_codebases
from support.repro_utils import REPO, env_home

#: The distributions that install a ``cv2`` package (one build each; two in one
#: environment overwrite each other's files).
OPENCV = ('opencv-python', 'opencv-python-headless', 'opencv-contrib-python',
          'opencv-contrib-python-headless')


@pytest.fixture(scope='module', autouse=True)
def made_by_setup_env():
    envs = osp.realpath(osp.join(env_home(), 'envs'))
    if not osp.realpath(sys.prefix).startswith(envs + osp.sep):
        pytest.skip(f'this Python ({sys.prefix}) is not an environment tools/setup_env.sh '
                    f'made (those are in {envs}): its packages are its owner\'s')


def test_pip_check_finds_every_requirement_met():
    proc = subprocess.run([sys.executable, '-m', 'pip', '--disable-pip-version-check',
                           'check'], capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout) == (0, 'No broken requirements found.\n'), (
        proc.stdout + proc.stderr)


def test_cv2_is_opencv_pythons_alone():
    import cv2
    installed = [name for name in OPENCV if _version(name)]
    assert installed == ['opencv-python']
    files = {osp.realpath(f.locate()) for f in importlib.metadata.files('opencv-python')}
    assert osp.realpath(cv2.__file__) in files


def _version(name: str):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


#: Imports what the codebases' training uses, in a fresh process (run from outside the
#: checkout, without ``PYTHONPATH``): torchvision where the stack has codebases that use it
#: (their transforms; ``collect_env`` of every Runner), each codebase named on the command line,
#: and mmrepro, the linked checkout's, whose ``mmrepro::`` configs a config file inherits
#: before mmrepro is imported (the ``.pth`` line). Prints one line per codebase and
#: mmrepro's file.
CODEBASE_PROBE = """
import importlib, sys
names = {'mmpretrain': 'mmpretrain.datasets.transforms', 'mmpose': 'mmpose.datasets',
         'mmrotate': 'mmrotate.models', 'mmyolo': 'mmyolo.models'}
if set(sys.argv[1:]) & {'mmpretrain', 'mmpose', 'mmrotate'}:
    import torch, torchvision
    from torchvision.ops import box_iou
    from mmengine.utils.dl_utils import collect_env
    assert collect_env()['TorchVision'] == torchvision.__version__
    assert box_iou(torch.ones(1, 4), torch.ones(2, 4)).shape == (1, 2)
for package in sys.argv[1:]:
    importlib.import_module(names[package])
    print(package, sys.modules[package].__version__)
from mmengine.config import Config
open('cfg.py', 'w').write("_base_ = ['mmrepro::_base_/repro_runtime.py']")
assert Config.fromfile('cfg.py').randomness == dict(seed=0, deterministic=True)
import mmrepro
print(mmrepro.__file__)
"""


def test_the_codebases_and_a_linked_mmrepro_import_from_anywhere(tmp_path):
    codebases = stack_codebases()
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    proc = subprocess.run([sys.executable, '-c', CODEBASE_PROBE, *codebases],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    expected = {'mmpretrain': 'mmpretrain 1.2.0', 'mmpose': 'mmpose 1.3.2',
                'mmrotate': 'mmrotate 1.0.1', 'mmyolo': 'mmyolo 0.6.0'}
    assert lines[:-1] == [expected[c] for c in codebases]
    # the checkout that last ran tools/setup_env.sh (this one, or another sharing the env)
    assert lines[-1].endswith(osp.join('', 'mmrepro', '__init__.py'))
    installed = osp.dirname(osp.dirname(osp.realpath(lines[-1])))
    assert osp.isfile(osp.join(installed, 'tools', 'setup_env.sh')), installed


def test_the_current_stack_has_the_codebases():
    import torch
    if torch.__version__.startswith('2.13'):
        assert stack_codebases() == ('mmpretrain', 'mmpose', 'mmrotate')


def test_this_checkouts_mmrepro_comes_first():
    """The tests import their own checkout, whichever one the environment installed."""
    import mmrepro
    assert osp.dirname(osp.dirname(osp.abspath(mmrepro.__file__))) == REPO
