"""mmrepro.cli.repro_diff on hand-made work dirs: without traces, broken files, inert keys,
every exit status."""
import functools
import json

from support.cli import PNG_SIGNATURE, run_main
from support.fake_runs import fake_run, record

from mmrepro.cli.repro_diff import DIFFERENT, IDENTICAL, SETTINGS_DIFFER, main

_diff = functools.partial(run_main, main)


def _fake_run(root, losses, trace=None, record=None):
    return fake_run(root, losses, record, trace)


def test_without_traces_the_scalars_logs_give_the_divergence(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5, 1.25, 1.0])
    b = _fake_run(tmp_path / 'b', [2.0, 1.5, 1.5, 1.0])
    code, out, _ = _diff(capsys, a, b, '--plot', str(tmp_path / 'p.png'))
    assert code == 1
    assert 'run records: identical' in out
    assert 'scalars logs: first logged iteration whose losses differ: 3, equal at ' \
        'iteration 2' in out
    assert 'loss 1.25 vs 1.5' in out
    assert (tmp_path / 'p.png').read_bytes()[:8] == PNG_SIGNATURE


def test_corrupted_record_is_exit_2_naming_the_file(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [1.0])
    b = _fake_run(tmp_path / 'b', [1.0], record='{"seed": 0, "world_size": 1, "vers')
    code, _, err = _diff(capsys, a, b)
    assert code == 2
    assert err.startswith('mmrepro-diff: error: ')
    assert 'b/20260101_000000/run_record.json: not valid JSON' in err


def test_missing_record_is_exit_2(tmp_path, capsys):
    (tmp_path / 'empty').mkdir()
    code, _, err = _diff(capsys, _fake_run(tmp_path / 'a', [1.0]), str(tmp_path / 'empty'))
    assert code == 2 and 'empty: no run_record.json in it' in err
    code, _, err = _diff(capsys, str(tmp_path / 'nope'), str(tmp_path / 'empty'))
    assert code == 2 and 'nope: no such file or directory' in err


def test_nothing_in_common_is_inconclusive(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5])
    b = _fake_run(tmp_path / 'b', [])
    code, out, _ = _diff(capsys, a, b)
    assert code == 3
    assert 'scalars logs: no training rows in vis_data/scalars.json of B' in out
    assert out.endswith('compared: nothing\nverdict: inconclusive: the runs hold nothing in '
                        'common to compare (no common logged or traced iteration, no common '
                        'checkpoint or recorded weights digest)\n  next: compare runs that '
                        'share an iteration: keep the trace (ReproducibilityHook '
                        'trace_interval > 0), the scalars log or a checkpoint of the same '
                        'iteration in both\n'), out


def _record(seed, **config):
    return json.dumps(record(seed, **config))


def test_a_seed_change_is_one_cause_and_inert_keys_are_listed_apart(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=_record(
        0, **{'val_dataloader.batch_size': '1', 'default_hooks.logger.interval': '1'}))
    b = _fake_run(tmp_path / 'b', [2.0, 1.25], record=_record(
        1, **{'val_dataloader.batch_size': '2', 'default_hooks.logger.interval': '5'}))
    code, out, _ = _diff(capsys, a, b)
    assert code == 1
    assert 'run records: 1 setting(s) differ (A -> B)\n  seed: 0 -> 1 (the same cause, also ' \
        'recorded as randomness.seed, config.randomness.seed, env.PYTHONHASHSEED)\n' \
        '  cannot change training (information, not causes): 2 key(s): ' \
        'val_dataloader.batch_size 1 -> 2, default_hooks.logger.interval 1 -> 5\n' in out, out
    assert out.endswith('verdict: the numbers differ from iteration 2\n  explained by (most '
                        'likely first): the seed or randomness settings (seed)\n  bitwise '
                        'equality expected: no, settings that change results differ\n'
                        '  next: the seed or randomness settings: train B with A\'s values: '
                        '--cfg-options randomness.seed=0\n'), out


def test_only_inert_keys_differing_is_identical(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=_record(0, **{'val_cfg.type': "'A'"}))
    b = _fake_run(tmp_path / 'b', [2.0, 1.5], record=_record(0, **{'val_cfg.type': "'B'"}))
    code, out, _ = _diff(capsys, a, b)
    assert 'run records: identical (every setting that can change training)\n  cannot ' \
        "change training (information, not causes): 1 key(s): val_cfg.type 'A' -> 'B'\n" \
        in out, out
    assert out.endswith('compared: 2 logged iterations\nverdict: identical through iteration '
                        '2 (the final weights were not compared: none recorded or at hand in '
                        'A and B), as expected (no setting that changes results differs)\n')
    assert code == 0


def test_corrupted_trace_is_exit_2_naming_the_line(tmp_path, capsys):
    header = json.dumps(dict(format='mmrepro-trace', version=1, modules={})) + '\n'
    a = _fake_run(tmp_path / 'a', [1.0], trace=header)
    b = _fake_run(tmp_path / 'b', [1.0], trace=header + '{"iter": 1, "los\n{}\n')
    code, _, err = _diff(capsys, a, b)
    assert code == 2 and 'trace.jsonl: line 2 is not valid JSON' in err


#: A check's child config against its baseline: the loader's workers, the trace interval
#: and the hook that stops the run differ, as do validation and logging.
BASELINE = {'train_dataloader.num_workers': '2', 'train_dataloader.persistent_workers': 'True',
            'custom_hooks.0.type': "'ReproducibilityHook'", 'default_hooks.logger.interval':
            '50', 'val_cfg.type': "'ValLoop'"}
CHILD = {'train_dataloader.num_workers': '0', 'train_dataloader.persistent_workers': 'False',
         'custom_hooks.0.type': "'ReproducibilityHook'", 'custom_hooks.0.trace_interval': '1',
         'custom_hooks.1.type': "'CheckReproStopHook'", 'custom_hooks.1.max_iters': '2',
         'default_hooks.logger.interval': '1', 'val_cfg': 'None'}


def test_identical_weights_with_settings_that_cannot_matter_exit_0(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=json.dumps(record(0, 2, **BASELINE)))
    b = _fake_run(tmp_path / 'b', [2.0, 1.5], record=json.dumps(record(0, 2, **CHILD)))
    code, out, _ = _diff(capsys, a, b)
    assert code == IDENTICAL == 0
    assert 'run records: identical (every setting that can change training)\n  cannot ' \
        'change training (information, not causes): 8 key(s): ' \
        'train_dataloader.num_workers 2 -> 0, train_dataloader.persistent_workers True -> ' \
        "False, default_hooks.logger.interval 50 -> 1, val_cfg.type 'ValLoop' -> " \
        '(missing); and custom_hooks.0.trace_interval, custom_hooks.1.type, ' \
        'custom_hooks.1.max_iters, val_cfg\n' in out, out
    assert out.endswith('weights: identical at iteration 2 (the final weights)\ncompared: 2 '
                        'logged iterations, final weights\nverdict: bit-identical, as '
                        'expected (no setting that changes results differs)\n'), out


def test_identical_outcomes_although_a_setting_that_can_matter_differs_exit_4(tmp_path,
                                                                             capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=json.dumps(record(
        0, 2, **{'train_dataloader.pin_memory': 'True'})))
    b = _fake_run(tmp_path / 'b', [2.0, 1.5], record=json.dumps(record(
        0, 2, **{'train_dataloader.pin_memory': 'False'})))
    code, out, _ = _diff(capsys, a, b)
    assert code == SETTINGS_DIFFER == 4
    assert out.endswith(
        'compared: 2 logged iterations, final weights\nverdict: bit-identical, although '
        'settings that can change training differ: the data loader or pipeline config '
        '(config.train_dataloader.pin_memory)\n  next: the data loader or pipeline config: '
        "train B with A's values: --cfg-options train_dataloader.pin_memory=True\n"), out


def test_other_log_windows_leave_the_logged_losses_out(tmp_path, capsys):
    """MMEngine logs a mean over its window: other windows log other values."""
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=json.dumps(record(
        0, 2, **{'log_processor.window_size': '10'})))
    b = _fake_run(tmp_path / 'b', [2.0, 1.75], record=json.dumps(record(
        0, 2, **{'log_processor.window_size': '1'})))
    code, out, _ = _diff(capsys, a, b)
    assert code == IDENTICAL
    assert '\nscalars logs: not compared: the runs log with other log_processor settings ' \
        '(listed above), so their logged losses average other windows\n' in out, out
    assert out.endswith('compared: final weights\nverdict: bit-identical, as expected (no '
                        'setting that changes results differs)\n'), out


def test_final_weights_that_differ_exit_1_whatever_the_losses(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=json.dumps(record(0, 2, 'a' * 64)))
    b = _fake_run(tmp_path / 'b', [2.0, 1.5], record=json.dumps(record(0, 2, 'b' * 64)))
    code, out, _ = _diff(capsys, a, b)
    assert code == DIFFERENT == 1
    assert '\nweights: differ at iteration 2 (the final weights): A aaaaaaaaaaaa vs B ' \
        'bbbbbbbbbbbb\n' in out, out
    assert out.endswith('verdict: the numbers differ from iteration 2\n  bitwise equality '
                        'expected: yes: nothing recorded that changes results differs, so an '
                        'operation is nondeterministic or a setting is not recorded\n  next: '
                        "mmrepro-check CONFIG --iters 2, on the run's config: it trains it "
                        'twice and names the first module whose output, gradient or weight '
                        'differs, and the nondeterministic operations met\n'), out


def test_plot_of_a_run_without_losses_is_refused_before_anything_is_printed(tmp_path,
                                                                            capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5])
    b = _fake_run(tmp_path / 'b', [])
    out_png = tmp_path / 'p.png'
    code, out, err = _diff(capsys, a, b, '--plot', str(out_png))
    assert code == 2 and out == '' and not out_png.exists()
    assert err == (f'mmrepro-diff: error: --plot {out_png}: {b} holds no loss values (no trace '
                   'and no vis_data/scalars.json); plot runs that log or trace their losses, '
                   'or leave --plot out\n')
