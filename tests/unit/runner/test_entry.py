"""runner.entry: which class ``Runner(...)``, ``Runner.from_cfg`` and ``RUNNERS.build``
construct, and the one-line error for a Runner class of one's own."""
from __future__ import annotations

import glob
import os.path as osp

import pytest
from mmengine.config import Config
from mmengine.registry import DATASETS, MODELS, RUNNERS
from mmengine.runner import Runner
from support.repro_utils import state_digest
from support.toy_runner import NoisyData, Regressor, runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, installs the entry)
from mmrepro import ReproRunner, ReproRunnerMixin
from mmrepro.run.state import enabled
from mmrepro.runner.entry import RunnerTypeError, check_runner_type

HOOK = [dict(type='ReproducibilityHook', trace_interval=0)]


class OwnRunner(Runner):
    """A team's Runner class without mmrepro's methods."""


class OwnReproRunner(ReproRunnerMixin, Runner):
    """A team's Runner class with mmrepro's methods."""


@pytest.fixture(autouse=True)
def _registered():
    for cls in (OwnRunner, OwnReproRunner):
        RUNNERS.register_module(module=cls, force=True)
    MODELS.register_module(module=Regressor, force=True)
    DATASETS.register_module(module=NoisyData, force=True)


def _config(tmp_path, hooks=None, **changes) -> Config:
    """A config of the toy run (model and data by type, as a config file has them) that
    enables mmrepro with ``custom_imports`` only, or with ``hooks=[]`` not at all."""
    kwargs = runner_kwargs(tmp_path, hooks)
    kwargs['model'] = dict(type='Regressor')
    kwargs['train_dataloader'] = dict(kwargs['train_dataloader'], dataset=dict(type='NoisyData'))
    if hooks is None:
        kwargs['custom_imports'] = dict(imports=['mmrepro'])
    return Config(dict(kwargs, **changes))


def _log(work_dir) -> str:
    return open(glob.glob(osp.join(str(work_dir), '*', '*.log'))[0]).read()


def test_a_runner_asked_for_mmrepro_is_a_reprorunner(tmp_path):
    by_hook = Runner(**runner_kwargs(tmp_path / 'hook', HOOK))
    by_import = Runner.from_cfg(_config(tmp_path / 'import'))
    by_type = RUNNERS.build(_config(tmp_path / 'type', runner_type='ReproRunner'))
    for runner in (by_hook, by_import, by_type):
        assert type(runner) is ReproRunner and enabled(runner)
    assert 'mmrepro: the Runner is ReproRunner' in _log(tmp_path / 'import')


def test_any_other_runner_is_mmengines_class(tmp_path):
    plain = Runner(**runner_kwargs(tmp_path / 'plain', []))
    own = RUNNERS.build(_config(tmp_path / 'own', [], runner_type='OwnRunner'))
    assert type(plain) is Runner and type(own) is OwnRunner
    assert not enabled(plain) and not enabled(own)


def test_a_runner_class_of_ones_own_gets_a_one_line_error(tmp_path):
    with pytest.raises(RunnerTypeError) as error:
        RUNNERS.build(_config(tmp_path, runner_type='OwnRunner'))
    assert str(error.value) == (
        "runner_type='OwnRunner': the config enables mmrepro, but OwnRunner lacks mmrepro's "
        "Runner methods; use runner_type='ReproRunner', or define it as class "
        'OwnRunner(ReproRunnerMixin, Runner) (from mmrepro import ReproRunnerMixin)')
    check_runner_type(dict(runner_type='OwnReproRunner'))  # these pass
    check_runner_type(dict(runner_type='Runner'))
    with pytest.raises(RunnerTypeError, match="runner_type='OwnRunner'"):
        check_runner_type(dict(runner_type='OwnRunner'))


def test_the_mixin_trains_as_reprorunner_does(tmp_path):
    for name, runner_type in (('mixin', 'OwnReproRunner'), ('repro', 'ReproRunner')):
        runner = RUNNERS.build(_config(tmp_path / name, runner_type=runner_type))
        assert type(runner).__name__ == runner_type and enabled(runner)
        runner.train()
    assert state_digest(str(tmp_path / 'mixin' / 'epoch_3.pth')) == \
        state_digest(str(tmp_path / 'repro' / 'epoch_3.pth'))
