# What a config adds to train reproducibly with mmrepro: inherit this file
# (`_base_ = [..., 'mmrepro::_base_/repro_runtime.py']`) or copy its two lines. It also
# names mmrepro's Runner, which the two lines alone get too (docs/internals.md).
# ReproducibilityHook is added to custom_hooks when a config lacks it, so this file
# sets no custom_hooks and can sit beside bases that set their own (YOLOX, RTMDet).
custom_imports = dict(imports=['mmrepro'], allow_failed_imports=False)
randomness = dict(seed=0, deterministic=True)
runner_type = 'ReproRunner'
