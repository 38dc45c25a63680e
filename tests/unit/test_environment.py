"""The environment the tests run in, as tools/setup_env.sh makes it: pip finds nothing
broken, and one OpenCV distribution provides ``cv2``.

A requirement left unmet (torch's setuptools, albumentations' OpenCV) makes every later
``pip install`` into the environment resolve it again: offline, installing mmrepro
fails.
"""
import importlib.metadata
import os.path as osp
import subprocess
import sys

import pytest
from support.repro_utils import env_home

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
