"""runner.distributed: only a ReproRunner's set-up gets the per-attempt store."""
from __future__ import annotations

from mmengine.runner import Runner
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.run.scopes import RUNNER_SETUP


def test_only_a_reprorunners_set_up_is_marked(tmp_path, monkeypatch):
    seen = []
    original = Runner.setup_env

    def spy(self, env_cfg):
        seen.append((type(self).__name__, RUNNER_SETUP.get()))
        return original(self, env_cfg)

    monkeypatch.setattr(Runner, 'setup_env', spy)
    Runner(**runner_kwargs(tmp_path / 'plain', []))
    Runner(**runner_kwargs(tmp_path / 'on', [dict(type='ReproducibilityHook')]))
    assert seen == [('Runner', False), ('ReproRunner', True)]
    assert RUNNER_SETUP.get() is False
