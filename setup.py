"""Build mmrepro (its metadata is in setup.cfg) with ``mmrepro_configs.pth`` in the wheel.

That file, installed at the top of site-packages, lets MMEngine resolve ``mmrepro::``
config paths in every process of the environment, before anything imports mmrepro
(:mod:`mmrepro.configs`).
"""
import importlib.util
import os.path as osp

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = osp.dirname(osp.abspath(__file__))


def _configs_module():
    """``mmrepro/configs.py`` alone (standard library only), without importing mmrepro."""
    spec = importlib.util.spec_from_file_location(
        '_mmrepro_configs_build', osp.join(HERE, 'mmrepro', 'configs.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPy(build_py):
    """``build_py`` that also writes the ``.pth`` file next to the package."""

    def run(self) -> None:
        super().run()
        configs = _configs_module()
        with open(osp.join(self.build_lib, configs.PTH_NAME), 'w') as f:
            f.write(configs.PTH_LINE + '\n')

    def get_outputs(self, include_bytecode: bool = True) -> list:
        return [*super().get_outputs(include_bytecode),
                osp.join(self.build_lib, _configs_module().PTH_NAME)]


setup(cmdclass={'build_py': BuildPy})
