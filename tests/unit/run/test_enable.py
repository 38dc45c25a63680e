"""mmrepro.run.enable: which Runners mmrepro acts for (their config enables it)."""
import pytest
from mmengine.config import Config
from mmengine.hooks import EMAHook

from mmrepro.run.enable import enable_in_config, enabled_by_config, is_reproducibility_hook


@pytest.mark.parametrize('cfg, expected', [
    (dict(custom_imports=dict(imports=['mmrepro'])), True),
    (dict(custom_imports=dict(imports=['mmdet', 'mmrepro.ops'])), True),
    (dict(custom_imports=dict(imports='mmrepro')), True),
    (dict(custom_hooks=[dict(type='ReproducibilityHook', trace_interval=2)]), True),
    (dict(custom_hooks=[dict(type='mmrepro.ReproducibilityHook')]), True),
    (dict(custom_imports=dict(imports=['mmrepro_other']),
          custom_hooks=[dict(type='EMAHook')]), False),
    (dict(), False),
])
def test_enabled_by_config(cfg, expected):
    assert enabled_by_config(Config(cfg)) is expected


def test_the_hook_is_recognised_as_a_dict_a_class_or_an_instance():
    from mmrepro.hooks import ReproducibilityHook
    assert is_reproducibility_hook(dict(type='ReproducibilityHook'))
    assert is_reproducibility_hook(dict(type='mmrepro.ReproducibilityHook'))
    assert is_reproducibility_hook(dict(type=ReproducibilityHook))
    assert is_reproducibility_hook(ReproducibilityHook(trace_interval=0))
    assert not is_reproducibility_hook(dict(type='EMAHook'))
    assert not is_reproducibility_hook(EMAHook())
    assert enabled_by_config(None) is False


def test_enable_in_config_adds_the_import_and_the_hook_once():
    imports = Config(dict(custom_imports=dict(imports='mine'))).custom_imports
    hooks = [dict(type='EMAHook')]
    new_imports, new_hooks, added = enable_in_config(imports, hooks, trace_interval=1)
    assert new_imports == dict(imports=['mine', 'mmrepro'], allow_failed_imports=False)
    assert new_hooks == [dict(type='EMAHook'),
                         dict(type='ReproducibilityHook', trace_interval=1)] and added
    assert imports.imports == 'mine' and hooks == [dict(type='EMAHook')]  # not modified
    again = enable_in_config(new_imports, new_hooks, trace_interval=5)
    assert again == (new_imports, new_hooks, False)  # already there: nothing added
    assert enable_in_config(None, None) == (
        dict(imports=['mmrepro'], allow_failed_imports=False),
        [dict(type='ReproducibilityHook')], True)
    kept = enable_in_config(dict(imports=['mmrepro'], allow_failed_imports=True), [])[0]
    assert kept == dict(imports=['mmrepro'], allow_failed_imports=True)
