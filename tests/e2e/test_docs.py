"""README and docs/: links resolve, examples are checked, they speak of the software only."""
import glob
import os.path as osp
import re
import tempfile

import pytest
from mmengine.config import Config
from support.doc_examples import blocks, check_command, check_inline, inline_commands
from support.repro_utils import REPO

PAGES = [osp.join(REPO, 'README.md'), *sorted(glob.glob(osp.join(REPO, 'docs', '*.md')))]
SCRIPTS = sorted(path for path in glob.glob(osp.join(REPO, 'tools', '**', '*'), recursive=True)
                 if osp.isfile(path))
#: Code, configs and measurements: they speak of the software only, like the pages.
SOURCES = sorted(path for pattern in ('mmrepro/**/*.py', 'configs/**/*.py', 'benchmarks/**/*',
                                      'tests/**/*.py')
                 for path in glob.glob(osp.join(REPO, pattern), recursive=True)
                 if osp.isfile(path) and not path.endswith('test_docs.py'))
LINK = re.compile(r'\]\(([^)\s]+)\)')
#: Words about how the project is developed rather than what it does.
PROCESS_WORDS = re.compile(r'\bissues? \d+|\blent\b|\.gpu/|\.\./shared|\bborrowed\b',
                           re.IGNORECASE)


def _anchors(path: str) -> set:
    with open(path) as f:
        titles = [line.lstrip('#').strip() for line in f if line.startswith('#')]
    return {re.sub(r'[^\w\- ]', '', t.lower()).replace(' ', '-') for t in titles}


@pytest.mark.parametrize('page', PAGES, ids=lambda p: osp.relpath(p, REPO))
def test_relative_links_resolve(page):
    text = open(page).read()
    for target in LINK.findall(text):
        if re.match(r'[a-z]+://', target):
            continue
        path, _, anchor = target.partition('#')
        resolved = osp.normpath(osp.join(osp.dirname(page), path)) if path else page
        assert osp.exists(resolved), f'{osp.relpath(page, REPO)}: {target} does not exist'
        if anchor:
            assert anchor in _anchors(resolved), f'{osp.relpath(page, REPO)}: #{anchor}'


def test_docs_have_pages_and_readme_is_short():
    assert len(PAGES) - 1 >= 5
    assert len(open(PAGES[0]).read().splitlines()) <= 150


@pytest.mark.parametrize('path', PAGES + SCRIPTS + SOURCES, ids=lambda p: osp.relpath(p, REPO))
def test_no_development_process_words(path):
    with open(path, errors='replace') as f:
        hits = [line.strip() for line in f if PROCESS_WORDS.search(line)]
    assert hits == []


def test_every_example_says_what_checks_it():
    unmarked = [b.where for b in blocks() if b.kind is None]
    assert unmarked == [], 'add a <!-- checked: ... --> or <!-- illustrative --> line before'


def test_config_examples_load():
    import mmrepro  # noqa: F401  (resolves mmrepro:: paths)
    for block in (b for b in blocks() if b.kind == 'config'):
        with tempfile.TemporaryDirectory() as tmp:
            path = osp.join(tmp, 'example.py')
            with open(path, 'w') as f:
                f.write('\n'.join(block.lines) + '\n')
            cfg = Config.fromfile(path)
        assert cfg.to_dict(), block.where


def test_command_examples_run_tools_with_arguments_they_accept():
    found = [b for b in blocks() if b.kind == 'commands']
    assert len(found) >= 8
    for block in found:
        for line in block.lines:
            check_command(block.where, line)


def test_inline_commands_name_tools_that_exist_with_arguments_they_accept():
    found = inline_commands()
    assert len(found) >= 15
    for where, command in found:
        check_inline(where, command)


def test_every_output_example_is_compared_by_a_test():
    names = [b.name for b in blocks() if b.kind == 'output']
    assert len(names) == len(set(names)), names
    sources = ''.join(open(path).read() for path in
                      glob.glob(osp.join(REPO, 'tests', '**', 'test_*.py'), recursive=True))
    unchecked = [n for n in names if f"assert_shows('{n}'" not in sources]
    assert unchecked == []


@pytest.mark.parametrize('line, message', [
    ('mmrepro-check CFG --itres 8', 'rejects'),                    # a renamed flag
    ('python tools/train.py configs/gone.py', 'configs/gone.py does not exist'),
    ('bash tools/gone.sh', 'tools/gone.sh does not exist'),
    ('mmrepro-frobnicate CFG', 'runs no mmrepro tool'),
])
def test_a_stale_command_example_is_caught(line, message, capsys):
    with pytest.raises(AssertionError, match=message):
        check_command('page.md:1', line)
