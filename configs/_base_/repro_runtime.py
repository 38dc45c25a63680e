# The lines a config adds to train reproducibly with mmrepro (or inherit this file).
# Note: a config that sets its own `custom_hooks` replaces this list; keep
# dict(type='ReproducibilityHook') in it (tools/train.py adds it if missing).
custom_imports = dict(imports=['mmrepro'], allow_failed_imports=False)
randomness = dict(seed=0, deterministic=True)
custom_hooks = [dict(type='ReproducibilityHook')]
