"""mmrepro.checks.diff.verdict: a data or a numeric difference, its causes ranked, each
with what removes it."""
from mmrepro.checks.diff.verdict import settings_verdict, verdict_lines
from mmrepro.record.run_record import MISSING

EXPECTED_NO = '  bitwise equality expected: no, settings that change results differ'


def test_numeric_causes_are_ranked_most_likely_first_each_with_its_fix():
    diffs = [('env.CUBLAS_WORKSPACE_CONFIG', None, ':4096:8'),
             ('versions.torch', '2.1.2', '2.13.0'),
             ('numerics.cpu.capability', 'AVX512', 'AVX2'),
             ('config.model.neck.out_channels', '32', '64'),
             ('devices.host', 'a', 'b')]  # a place: explains nothing
    assert verdict_lines(diffs, True, 4, None, True) == [
        'verdict: the same samples in every traced iteration; the numbers differ from '
        'iteration 4',
        '  explained by (most likely first): the config (config.model.neck.out_channels); '
        'library versions (versions.torch); the CPU kernel set (numerics.cpu.capability); '
        'environment variables (env.CUBLAS_WORKSPACE_CONFIG)', EXPECTED_NO,
        "  next: the config: train B with A's values: --cfg-options "
        'model.neck.out_channels=32',
        "  next: library versions: install A's versions (its run record lists them): pip "
        'install torch==2.1.2',
        '  next: the CPU kernel set: pin one kernel set both CPUs run, in both configs: '
        'randomness.cpu_isa=avx2 (mmrepro-train sets its variables and restarts itself)',
        '  next: environment variables: set the variables as A had them: unset '
        'CUBLAS_WORKSPACE_CONFIG']


def test_compiled_vs_eager_is_one_cause_named_first_with_its_fix():
    """An eager run's record has no compile section; the config's hash only restates the
    compile keys, and the numbers are not expected to be bitwise."""
    diffs = [('config.compile.backend', MISSING, "'inductor'"),
             ('config_sha256', 'aa', 'bb'),
             ('compile.enabled', MISSING, True), ('compile.backend', MISSING, 'inductor'),
             ('compile.inductor.fallback_random', MISSING, True),
             ('env.OMP_NUM_THREADS', '1', '2')]
    lines = verdict_lines(diffs, True, 1, None, True)
    assert lines[1] == (
        '  explained by (most likely first): compiled vs eager (config.compile.backend, '
        'config_sha256, compile.enabled and 2 more); environment variables '
        '(env.OMP_NUM_THREADS)')
    assert lines[3] == (
        "  next: compiled vs eager: train B eagerly, as A: remove compile from B's config (or "
        '--cfg-options compile=False) (compiled kernels fuse and round differently from '
        "eager ones, and from another backend's or mode's: bitwise equality is not expected "
        'across them)')
    # A compiled, B eager: A's setting
    flipped = [(key, b, a) for key, a, b in diffs[:4]]
    assert verdict_lines(flipped, True, 1, None, True)[3].startswith(
        "  next: compiled vs eager: train B with A's values: --cfg-options "
        'compile.backend=inductor (compiled kernels')


def test_another_backend_or_mode_and_a_config_change_are_two_causes():
    diffs = [('config.compile.mode', "'default'", "'max-autotune'"),
             ('config.optim_wrapper.optimizer.lr', '0.01', '0.02'), ('config_sha256', 'a', 'b'),
             ('compile.mode', 'default', 'max-autotune')]
    assert verdict_lines(diffs, True, 1, None, True)[1] == (
        '  explained by (most likely first): another compile backend or mode '
        '(config.compile.mode, compile.mode); the config (config.optim_wrapper.optimizer.lr, '
        'config_sha256)')
    settings = [('compile.inductor.fallback_random', True, False)]
    assert verdict_lines(settings, True, 1, None, True)[3] == (
        '  next: another compile backend or mode: set inductor\'s and dynamo\'s settings as A '
        'had them: torch._inductor.config.fallback_random=True (compiled kernels fuse and '
        "round differently from eager ones, and from another backend's or mode's: bitwise "
        'equality is not expected across them)')


def test_the_thread_count_fix_pins_it():
    diffs = [('devices.torch_threads', 2, 1), ('env.OMP_NUM_THREADS', '2', '1')]
    assert verdict_lines(diffs, True, 1, None, True)[1:] == [
        '  explained by (most likely first): the intra-op thread count '
        '(devices.torch_threads, env.OMP_NUM_THREADS)', EXPECTED_NO,
        '  next: the intra-op thread count: pin the count in both configs: '
        "randomness.threads=2 (A's count), or set OMP_NUM_THREADS=2 before training"]


def test_every_cause_names_the_setting_or_command_that_removes_it():
    def fix(diffs):
        (line,) = [text for text in verdict_lines(diffs, True, 1, None, True)
                   if text.startswith('  next: ')]
        return line.split(': ', 2)[2]

    assert fix([('seed', 0, 1), ('randomness.sample_seeding', True, False)]) == (
        "train B with A's values: --cfg-options randomness.seed=0 "
        'randomness.sample_seeding=True')
    assert fix([('config.train_pipeline.2.scale', '(1333, 800)', '(800, 600)'),
                ('config.train_pipeline.3.type', "'RandomFlip'", MISSING)]) == (
        "train B with A's values: --cfg-options \"train_pipeline.2.scale=(1333, 800)\" "
        'train_pipeline.3.type=RandomFlip')
    assert fix([('config.model.neck.type', MISSING, "'PAFPN'")]) == (
        "remove from B's config what A does not set: model.neck.type")
    assert fix([('world_size', 1, 2), ('config.train_dataloader.batch_size', '4', '2')]) == (
        "train on A's layout (ranks 1, batch_size 4); another layout with the same global "
        'batch trains on the same samples, but only 2 ranks x B and 1 process x B x '
        'accumulate 2 end bitwise equal')
    assert fix([('torch_flags.cudnn_benchmark', False, True),
                ('torch_flags.matmul_allow_tf32', False, True)]) == (
        "train B with A's values: --cfg-options env_cfg.cudnn_benchmark=False; set "
        "PyTorch's flags as A had them (matmul_allow_tf32=False) before training "
        '(torch.backends)')
    assert fix([('code.git.commit', 'abc123', 'def456')]) == "run A's code: git checkout abc123"
    assert fix([('numerics.amp.dtype', 'float16', 'bfloat16')]) == (
        "train with A's AMP setting in optim_wrapper (dtype float16)")
    assert fix([('numerics.gpu.devices', '[a]', '[b]')]) == (
        "train on A's GPU model and driver; other GPU models round otherwise, so they end "
        'float-close at best')
    assert fix([('versions.python', '3.11.9', '3.10.1'), ('versions.numpy', '1.26.4', '2.0'),
                ('numerics.libraries.mkl', '2023.1', '2024.2')]) == (
        "install A's versions (its run record lists them): pip install numpy==1.26.4; "
        'python 3.11.9; MKL 2023.1 (it comes with the torch build)')
    assert fix([('numerics.cpu.capability', 'AVX2', 'AVX512')]) == (
        'pin one kernel set both CPUs run, in both configs: randomness.cpu_isa=avx2 '
        '(mmrepro-train sets its variables and restarts itself)')
    assert fix([('env.NCCL_ALGO', 'Ring', None)]) == (
        'set the variables as A had them: export NCCL_ALGO=Ring')
    assert fix([('versions.albumentations', '1.4.24', '2.0.5')]) == (
        'pip install albumentations==1.4.24')


def test_data_difference_names_its_causes_and_fixes():
    diffs = [('world_size', 1, 2), ('config.train_dataloader.sampler.shuffle', 'True',
                                    'False')]
    assert verdict_lines(diffs, True, 1, 1, True) == [
        'verdict: the data differ from iteration 1',
        '  why: the process layout (ranks, per-rank batch, accumulation) (world_size); the '
        'data loader or pipeline config (config.train_dataloader.sampler.shuffle)',
        '  next: the process layout (ranks, per-rank batch, accumulation): train on A\'s '
        'layout (ranks 1); another layout with the same global batch trains on the same '
        'samples, but only 2 ranks x B and 1 process x B x accumulate 2 end bitwise equal',
        '  next: the data loader or pipeline config: train B with A\'s values: --cfg-options '
        'train_dataloader.sampler.shuffle=True']
    # without traced samples, a different fingerprint is the evidence
    assert verdict_lines([('data.annotations_sha256', 'a', 'b')], True, 2, None, False) == [
        'verdict: the data differ', '  why: the data files (fingerprint) '
        '(data.annotations_sha256)',
        '  next: the data files (fingerprint): train both on the same data files: those '
        "listed under data: above differ (each run record holds every file's sha256)"]


def test_same_data_on_another_layout_blames_the_layout_first():
    diffs = [('env.OMP_NUM_THREADS', None, '1'), ('world_size', 1, 2),
             ('config.train_dataloader.batch_size', '4', '2'), ('config.launcher', 'none',
                                                              'pytorch')]
    # The thread count itself is recorded equal: the variable explains nothing more.
    assert verdict_lines(diffs, True, 1, None, True)[1] == (
        '  explained by (most likely first): the process layout (ranks, per-rank batch, '
        'accumulation) (world_size, config.train_dataloader.batch_size, config.launcher); '
        'environment variables (env.OMP_NUM_THREADS)')


def test_data_difference_with_nothing_recorded_says_how_to_find_it():
    assert verdict_lines([], True, 3, 3, True) == [
        'verdict: the data differ from iteration 3',
        '  why: nothing recorded: the same files and settings, so the data order or '
        'augmentation is not reproducible',
        "  next: mmrepro-check CONFIG --workers-check 2 --resume-check, on the run's config: "
        'it names the first iteration whose samples differ on a rerun, with other '
        'num_workers or after resuming']


def test_unexplained_divergence_was_expected_to_be_bitwise():
    assert verdict_lines([('devices.host', 'a', 'b')], True, 2, None, True)[1:] == [
        '  bitwise equality expected: yes: nothing recorded that changes results differs, '
        'so an operation is nondeterministic or a setting is not recorded',
        "  next: mmrepro-check CONFIG --iters 2, on the run's config: it trains it twice and "
        'names the first module whose output, gradient or weight differs, and the '
        'nondeterministic operations met']


def test_equal_runs():
    assert verdict_lines([], False, None, None, False) == [
        'verdict: bit-identical, as expected (no setting that changes results differs)']
    assert verdict_lines([('torch_flags.cudnn_benchmark', False, True)], False, None, None,
                         True) == [
        'verdict: the same samples in every traced iteration; bit-identical, although '
        'settings that can change training differ: PyTorch numerics flags '
        '(torch_flags.cudnn_benchmark)',
        "  next: PyTorch numerics flags: train B with A's values: --cfg-options "
        'env_cfg.cudnn_benchmark=False']


def test_settings_alone_differ_when_no_outcome_compares():
    assert settings_verdict([('data.annotations_sha256', 'a', 'b'),
                             ('versions.torch', '2.1.2', '2.13.0')]) == [
        'verdict: settings that change training differ: the data files (fingerprint) '
        '(data.annotations_sha256); library versions (versions.torch)',
        '  no outcome was compared: the runs hold no common logged or traced iteration and '
        'no common weights',
        '  next: the data files (fingerprint): train both on the same data files: those '
        "listed under data: above differ (each run record holds every file's sha256)",
        "  next: library versions: install A's versions (its run record lists them): pip "
        'install torch==2.1.2']


def test_runs_from_other_weights_are_told_so_never_numerics():
    """A difference there before the first step is the verdict, whatever else differs."""
    source = 'model.backbone.init_cfg r18.pth, sha256 aaaaaaaaaaaa vs bbbbbbbbbbbb'
    diffs = [('initial.files.model.backbone.init_cfg.sha256', 'a' * 64, 'b' * 64),
             ('initial.model_sha256', 'c' * 64, 'd' * 64),
             ('versions.torch', '2.1.2', '2.13.0')]
    assert verdict_lines(diffs, True, 1, None, True, initial=[source]) == [
        f'verdict: initial weights differ (before the first step): {source}',
        '  why: the runs start from other weights, so every step after differs (not a '
        'nondeterministic operation)',
        '  other recorded differences: library versions (versions.torch)',
        "  next: the initial weights: start from A's files: compare each file's sha256 "
        "(sha256sum FILE) with A's run record (initial.files) and copy the file A used "
        'instead of downloading it again',
        "  next: library versions: install A's versions (its run record lists them): pip "
        'install torch==2.1.2']
    # equal outcomes: the initial weights are a setting that can change training
    assert verdict_lines(diffs[:1], False, None, None, True, initial=[source])[0] == (
        'verdict: the same samples in every traced iteration; bit-identical, although '
        'settings that can change training differ: the initial weights '
        '(initial.files.model.backbone.init_cfg.sha256)')


def test_edited_sources_and_decoders_are_named_with_their_fix():
    diffs = [('code.packages.mmdet.files.models/necks/fpn.py', '0f76', '6a8b'),
             ('code.imports.my_pkg.neck.files.neck.py', 'd5d0', '12ac'),
             ('decoding.versions.opencv', '4.11.0', '5.0.0'),
             ('decoding.versions.opencv_codecs.JPEG', 'libjpeg-turbo (ver 2.1)', 'libjpeg')]
    assert verdict_lines(diffs, True, 1, None, True)[1:] == [
        '  explained by (most likely first): the code (code.packages.mmdet.files.models/necks/'
        'fpn.py, code.imports.my_pkg.neck.files.neck.py); the image decoders '
        '(decoding.versions.opencv, decoding.versions.opencv_codecs.JPEG)', EXPECTED_NO,
        "  next: the code: run A's code: the sources A ran of mmdet: models/necks/fpn.py; "
        'my_pkg.neck: neck.py (reinstall the package or revert the edited files; the run '
        "record holds each file's sha256)",
        "  next: the image decoders: decode with A's libraries: pip install "
        "opencv-python==4.11.0; an OpenCV build with A's codecs (JPEG libjpeg-turbo (ver "
        '2.1))']
    canary = [('decoding.canary.sha256', 'a' * 64, 'b' * 64)]
    assert verdict_lines(canary, True, None, 3, True)[:2] == [
        'verdict: the data differ from iteration 3',
        '  why: the decoded images (decode canary) (decoding.canary.sha256)']


def test_a_canary_difference_ranks_right_after_the_initial_weights():
    diffs = [('devices.torch_threads', 2, 1), ('decoding.canary.sha256', 'a', 'b'),
             ('decoding.versions.mmcv_imread_backend', 'cv2', 'pillow')]
    lines = verdict_lines(diffs, True, 1, None, False)
    assert lines[1] == ('  explained by (most likely first): the decoded images (decode '
                        'canary) (decoding.canary.sha256); the image decoders '
                        '(decoding.versions.mmcv_imread_backend); the intra-op thread count '
                        '(devices.torch_threads)')
    assert ("  next: the image decoders: decode with A's libraries: A's decode backend: "
            "mmcv.use_backend('cv2')") in lines
