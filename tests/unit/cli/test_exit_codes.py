"""Every tool's exit codes: docs/tools.md's table, the list in mmrepro.cli.exit_codes, each
tool's ``--help`` and what ``repro_diff`` returns agree."""
import json
import os.path as osp
import re
import runpy
import sys

import pytest
from support.cli import run_main
from support.fake_runs import fake_run, record
from support.repro_utils import REPO

from mmrepro.cli import repro_diff
from mmrepro.cli.exit_codes import EXIT_CODES, epilog

HEADER = '| tool | 0 | 1 | 2 | 3 | 4 |'


def documented():
    """``{tool: {status: meaning}}`` as docs/tools.md's exit-code table gives it."""
    with open(osp.join(REPO, 'docs', 'tools.md')) as f:
        lines = f.read().splitlines()
    assert lines.count(HEADER) == 1, 'docs/tools.md holds one exit-code table'
    rows = lines[lines.index(HEADER) + 2:]
    table = {}
    for row in rows[:next(i for i, line in enumerate(rows) if not line.startswith('|'))]:
        tool, *cells = [cell.strip() for cell in row.strip('|').split(' | ')]
        table[tool] = {status: cell for status, cell in enumerate(cells) if cell != '-'}
    return table


def test_the_documented_table_is_the_list_in_the_code():
    assert documented() == EXIT_CODES
    assert list(documented()) == list(EXIT_CODES)


def _help(tool, monkeypatch, capsys):
    path = osp.join(REPO, 'tools', f'{tool}.py')
    monkeypatch.setattr(sys, 'argv', [path, '--help'])
    with pytest.raises(SystemExit):
        runpy.run_path(path, run_name='__main__')
    return ' '.join(capsys.readouterr().out.split())


@pytest.mark.parametrize('tool', list(EXIT_CODES))
def test_every_tools_help_names_the_documented_statuses(tool, monkeypatch, capsys):
    words = _help(tool, monkeypatch, capsys)
    listed = words[words.index('exit status: '):]
    statuses = [int(s) for s in re.findall(r'(?:exit status: |; )(\d) ', listed)]
    assert sorted(statuses) == sorted(EXIT_CODES[tool]), listed


def test_repro_diffs_help_is_the_table_row(monkeypatch, capsys):
    assert _help('repro_diff', monkeypatch, capsys).endswith(
        ' '.join(epilog('repro_diff').split()))
    assert epilog('repro_diff').startswith(
        'exit status: 0 identical in everything compared (logged losses, traces, weights) and '
        'no setting that can change training differs, or, without --bitwise, traces that '
        'differ only within the rounding envelope measured here; settings that cannot '
        '(num_workers, ')


def test_repro_diffs_named_statuses_are_the_table_row():
    named = {repro_diff.IDENTICAL, repro_diff.DIFFERENT, repro_diff.BAD_INPUT,
             repro_diff.INCONCLUSIVE, repro_diff.SETTINGS_DIFFER}
    assert sorted(named) == sorted(EXIT_CODES['repro_diff']) == [0, 1, 2, 3, 4]


def _pair(tmp_path, case):
    """Two hand-made runs that give ``case``'s status."""
    a = dict(losses=[2.0, 1.5], run_record=record(0, 2))
    b = dict(a)
    if case == 'workers':
        a['run_record'] = record(0, 2, **{'train_dataloader.num_workers': '2'})
        b['run_record'] = record(0, 2, **{'train_dataloader.num_workers': '0'})
    elif case == 'losses':
        b['losses'] = [2.0, 1.25]
    elif case == 'corrupted':
        b['run_record'] = '{"seed": 0'
    elif case == 'nothing':
        a['run_record'], b = record(0), dict(losses=[], run_record=record(0))
    elif case == 'max_iters':
        a['run_record'] = record(0, 2, **{'train_cfg.max_iters': '2'})
        b['run_record'] = record(0, 2, **{'train_cfg.max_iters': '4'})
    return [fake_run(tmp_path / name, **run) for name, run in (('a', a), ('b', b))]


#: The last line each status ends with (stderr for 2).
LAST_LINE = {
    0: 'verdict: bit-identical, as expected (no setting that changes results differs)',
    1: "  next: mmrepro-check CONFIG --iters 2, on the run's config: it trains it twice and "
       'names the first module whose output, gradient or weight differs, and the '
       'nondeterministic operations met',
    2: 'mmrepro-diff: error: {b}: not valid JSON',
    3: '  next: compare runs that share an iteration: keep the trace (ReproducibilityHook '
       'trace_interval > 0), the scalars log or a checkpoint of the same iteration in both',
    4: "  next: the config: train B with A's values: --cfg-options train_cfg.max_iters=2",
}


@pytest.mark.parametrize('case, status', [
    ('workers', 0), ('losses', 1), ('corrupted', 2), ('nothing', 3), ('max_iters', 4)])
def test_repro_diff_exits_with_each_documented_status(case, status, tmp_path, capsys):
    code, out, err = run_main(repro_diff.main, capsys, *_pair(tmp_path, case))
    assert code == status and status in documented()['repro_diff']
    record_b = tmp_path / 'b' / '20260101_000000' / 'run_record.json'
    last = (err if status == 2 else out).splitlines()[-1]
    assert last.startswith(LAST_LINE[status].format(b=record_b)), out + err


def test_fake_runs_write_what_a_run_writes(tmp_path):
    run = fake_run(tmp_path / 'a', [2.0], record(0, 1))
    with open(osp.join(run, '20260101_000000', 'run_record.json')) as f:
        assert json.load(f)['weights'] == dict(final=dict(iter=1, sha256='a' * 64),
                                               checkpoints={'1': 'a' * 64})

