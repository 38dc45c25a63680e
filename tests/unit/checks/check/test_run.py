"""mmrepro.checks.check.run: the config of each check run."""
from mmengine.config import Config

from mmrepro.checks.check.run import child_config


def test_child_config_traces_stops_and_keeps_the_users_hooks(tmp_path):
    cfg = Config(dict(custom_hooks=[dict(type='ReproducibilityHook'),
                                    dict(type='EMAHook', momentum=0.001)],
                      custom_imports=dict(imports=['mine']), randomness=dict(deterministic=True)))
    base = tmp_path / 'base.py'
    base.write_text('val_dataloader = dict(batch_size=2)\n')
    child = tmp_path / 'child.py'
    child.write_text(child_config(cfg, str(base), 6, 3))
    loaded = Config.fromfile(str(child), import_custom_modules=False)
    assert loaded.custom_hooks == [
        dict(type='ReproducibilityHook', trace_interval=1, trace_forward=True,
             trace_sketches=False),  # compared bit for bit: no envelope, no sketches
        dict(type='EMAHook', momentum=0.001),
        dict(type='CheckReproStopHook', max_iters=6)]
    assert loaded.custom_imports.imports == ['mine', 'mmrepro']  # registers both hooks
    assert loaded.randomness == dict(seed=0, warn_only=True)  # seed pinned: config has none
    assert loaded.default_hooks.checkpoint.interval == 3 and loaded.val_dataloader is None
