"""mmrepro.cli.repro_diff on hand-made work dirs: without traces, broken files, inert keys."""
import functools
import json

from support.cli import PNG_SIGNATURE, run_main

from mmrepro.cli.repro_diff import main

_diff = functools.partial(run_main, main)


def _fake_run(root, losses, lr=0.01, trace=None, record=None):
    log_dir = root / '20260101_000000'
    (log_dir / 'vis_data').mkdir(parents=True)
    record = record if record is not None else json.dumps(dict(
        seed=0, world_size=1, versions=dict(torch='2.13.0'), config_sha256='0' * 64,
        config={'optim_wrapper.optimizer.lr': repr(lr)}))
    (log_dir / 'run_record.json').write_text(record)
    rows = [dict(lr=lr, loss=loss, loss_cls=loss / 2, iter=i + 1, step=i + 1)
            for i, loss in enumerate(losses)]
    (log_dir / 'vis_data' / 'scalars.json').write_text(
        ''.join(json.dumps(r) + '\n' for r in rows))
    if trace is not None:
        (log_dir / 'trace.jsonl').write_text(trace)
    return str(root)


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
    assert err.startswith('repro_diff: error: ')
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
                        'checkpoint or recorded weights digest)\n'), out


def _record(seed, **config):
    return json.dumps(dict(
        seed=seed, randomness=dict(seed=seed, deterministic=True), world_size=1,
        versions=dict(torch='2.13.0'), config_sha256=str(seed) * 64,
        env=dict(PYTHONHASHSEED=str(seed)),
        config={'randomness.seed': repr(seed), 'optim_wrapper.optimizer.lr': '0.01',
                **config}))


def test_a_seed_change_is_one_cause_and_inert_keys_are_listed_apart(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=_record(
        0, **{'val_dataloader.batch_size': '1', 'default_hooks.logger.interval': '1'}))
    b = _fake_run(tmp_path / 'b', [2.0, 1.25], record=_record(
        1, **{'val_dataloader.batch_size': '2', 'default_hooks.logger.interval': '5'}))
    code, out, _ = _diff(capsys, a, b)
    assert code == 1
    assert 'run records: 1 setting(s) differ (A -> B)\n  seed: 0 -> 1 (the same cause, also ' \
        'recorded as randomness.seed, config.randomness.seed, env.PYTHONHASHSEED)\n' \
        '  cannot change training, not causes: 2 key(s): val_dataloader.batch_size 1 -> 2, ' \
        'default_hooks.logger.interval 1 -> 5\n' in out, out
    assert out.endswith('verdict: the numbers differ from iteration 2\n  explained by (most '
                        'likely first): the seed or randomness settings (seed)\n  bitwise '
                        'equality expected: no, settings that change results differ\n'), out


def test_only_inert_keys_differing_is_identical(tmp_path, capsys):
    a = _fake_run(tmp_path / 'a', [2.0, 1.5], record=_record(0, **{'val_cfg.type': "'A'"}))
    b = _fake_run(tmp_path / 'b', [2.0, 1.5], record=_record(0, **{'val_cfg.type': "'B'"}))
    code, out, _ = _diff(capsys, a, b)
    assert 'run records: identical (every setting that can change training)\n  cannot ' \
        "change training, not causes: 1 key(s): val_cfg.type 'A' -> 'B'\n" in out, out
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
