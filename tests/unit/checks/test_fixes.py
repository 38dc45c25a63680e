"""mmrepro.checks.fixes: the setting or command that gives a run a baseline's value of each
run record key."""
from __future__ import annotations

import pytest

from mmrepro.checks.fixes import key_fix, layout_fix
from mmrepro.checks.machine_fixes import option
from mmrepro.record.run_record import MISSING
from mmrepro.run.layout import Layout


@pytest.mark.parametrize('key, value, fix', [
    ('devices.torch_threads', 2,
     "pin the baseline's thread count: --cfg-options randomness.threads=2 (or export "
     'OMP_NUM_THREADS=2 before the check and the training)'),
    ('env.OMP_NUM_THREADS', '4',
     "pin the baseline's thread count: --cfg-options randomness.threads=4 (or export "
     'OMP_NUM_THREADS=4 before the check and the training)'),
    ('seed', 5, "set the baseline's value: --cfg-options randomness.seed=5, or check against "
     "the baseline's own config (leave out CONFIG)"),
    ('config.model.backbone.depth', '18',
     "set the baseline's value: --cfg-options model.backbone.depth=18, or check against the "
     "baseline's own config (leave out CONFIG)"),
    ('config.train_pipeline.1.scale', '(160, 128)',
     "set the baseline's value: --cfg-options \"train_pipeline.1.scale=(160, 128)\", or check "
     "against the baseline's own config (leave out CONFIG)"),
    ('config.optim_wrapper.clip_grad', MISSING,
     'remove optim_wrapper.clip_grad from the config (the baseline does not set it)'),
    ('versions.mmcv', '2.1.0', "pip install mmcv==2.1.0 (the baseline's version)"),
    ('versions.albumentations', None,
     'pip uninstall albumentations (the baseline trained without it)'),
    ('versions.python', '3.11.9', "python 3.11.9 (the baseline's version)"),
    ('torch_flags.deterministic_algorithms', True,
     "set the baseline's value: --cfg-options randomness.deterministic=True"),
    ('torch_flags.allow_tf32', False,
     "set PyTorch's allow_tf32 to False before training, as the baseline had it"),
    ('numerics.cpu.capability', 'AVX512',
     "pin one kernel set both CPUs run: randomness.cpu_isa='avx2' in the shared config, and "
     'train the baseline again with it'),
    ('numerics.gpu.name', 'NVIDIA H100',
     "train on the baseline's GPU model and driver (numerics.gpu.name: 'NVIDIA H100'): no "
     'setting makes another GPU round alike'),
    ('env.CUBLAS_WORKSPACE_CONFIG', ':4096:8', 'export CUBLAS_WORKSPACE_CONFIG=:4096:8'),
    ('env.TF_ENABLE_ONEDNN_OPTS', None, 'unset TF_ENABLE_ONEDNN_OPTS'),
    ('compile.enabled', MISSING, 'train eagerly, as the baseline did: --cfg-options compile=False'),
    ('compile.enabled', True, "compile as the baseline did: its config's compile setting "
     '(config.compile in its run record)'),
    ('config.compile.backend', "'aot_eager'", "set the baseline's value: --cfg-options "
     "compile.backend=aot_eager, or check against the baseline's own config (leave out "
     'CONFIG)'),
    ('compile.mode', 'max-autotune', "set the baseline's value: --cfg-options "
     "compile.mode=max-autotune, or check against the baseline's own config (leave out "
     'CONFIG)'),
    ('compile.inductor.triton.cudagraphs', False,
     'set torch._inductor.config.triton.cudagraphs=False before training, as the baseline '
     'had it'),
    ('compile.dynamo.recompile_limit', 8,
     'set torch._dynamo.config.recompile_limit=8 before training, as the baseline had it'),
    ('data.ann_files.annotations/train.json', 'abc',
     "train on the baseline's data files (those named above differ): copy them from the "
     "baseline's machine, or point the config at the same files"),
])
def test_key_fix_gives_the_baseline_s_value(key, value, fix):
    assert key_fix(key, value) == fix


def test_option_quotes_only_what_a_shell_would_split():
    assert option('a.b', "'plain'") == '--cfg-options a.b=plain'
    assert option('a.b', "'two words'") == '--cfg-options "a.b=\'two words\'"'
    assert option('a.b', 3) == '--cfg-options a.b=3'


def test_layout_fix_names_the_launch_and_the_batch():
    assert layout_fix(Layout(2, 0, 4, 1)) == (
        "train on the baseline's layout, with --launcher pytorch --nproc 4 and --cfg-options "
        'train_dataloader.batch_size=2 optim_wrapper.accumulative_counts=1')
    assert layout_fix(None) == ('train on the layout the baseline was trained on (its run '
                                'record has none)')
