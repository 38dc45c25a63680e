"""mmrepro.run.state: one RunState per Runner, created on first use, read by every part."""
from __future__ import annotations

import logging

from mmengine.runner import Runner
from support.toy_runner import fake_runner, runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.run.layout import Layout
from mmrepro.run.settings import RunSettings
from mmrepro.run.state import (
    STATE_ATTR,
    RunState,
    enabled,
    find_state,
    log_pending,
    run_state,
    settings_of,
)


def test_run_state_is_created_once_in_the_instance_dict():
    runner = fake_runner()
    assert find_state(runner) is None and not enabled(runner) and settings_of(runner) is None
    state = run_state(runner)
    assert isinstance(state, RunState) and runner.__dict__[STATE_ATTR] is state
    assert run_state(runner) is state and find_state(runner) is state
    assert find_state(None) is None and find_state(3) is None  # no __dict__


def test_settings_enable_it():
    runner = fake_runner(RunSettings(seed=1, deterministic=False))
    assert enabled(runner) and run_state(runner).enabled
    assert settings_of(runner) == RunSettings(seed=1, deterministic=False)
    run_state(runner).settings = None
    assert not enabled(runner) and settings_of(runner) is None


def test_keyed_accumulation_counts_only_where_the_global_stream_keys_the_batches():
    state = RunState()
    assert state.keyed_accumulation == 0  # no layout yet
    state.layout = Layout(2, 0, 1, 4)
    assert state.keyed_accumulation == 0  # the stream is off
    state.global_stream = True
    assert state.keyed_accumulation == 4


def test_lines_are_kept_until_the_runners_own_logger_exists(tmp_path):
    early = fake_runner()
    run_state(early).note(logging.INFO, 'mmrepro: kept')
    log_pending(early)  # no logger: nothing logged, nothing lost
    assert run_state(early).messages == [(logging.INFO, 'mmrepro: kept')]
    log_pending(fake_runner(logger=logging.getLogger('x')))  # no state: nothing to do
    runner = Runner(**runner_kwargs(tmp_path, []))
    state = run_state(runner)
    state.note(logging.WARNING, 'mmrepro: a kept warning')
    state.note(logging.INFO, 'mmrepro: a kept line')
    log_pending(runner)
    assert state.messages == []
    log = open(runner.logger.log_file).read()
    assert log.index(' - WARNING - mmrepro: a kept warning') < log.index(
        ' - INFO - mmrepro: a kept line')
    log_pending(runner)  # once
    assert open(runner.logger.log_file).read().count('mmrepro: a kept line') == 1


def test_a_runner_fills_its_state_as_it_sets_up(tmp_path):
    plain = Runner(**runner_kwargs(tmp_path / 'plain', []))
    assert find_state(plain) is None and not enabled(plain)  # mmrepro never touched it
    hooks = [dict(type='ReproducibilityHook', trace_interval=0)]
    runner = Runner(**runner_kwargs(tmp_path / 'on', hooks))
    state = find_state(runner)
    assert state.init_args['custom_hooks'] == hooks
    assert enabled(runner) and state.settings.seed == 3
    assert state.settings.deterministic is True and state.settings.global_stream is True
    assert state.layout is None  # the train loader is not built yet
    runner.train()
    assert state.layout == Layout(4, 0, 1, 1) and state.global_stream
    assert state.keyed_accumulation == 1
