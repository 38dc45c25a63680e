"""README and docs/: every relative link resolves; they speak of the software only."""
import glob
import os.path as osp
import re

import pytest
from repro_utils import REPO

PAGES = [osp.join(REPO, 'README.md'), *sorted(glob.glob(osp.join(REPO, 'docs', '*.md')))]
SCRIPTS = sorted(glob.glob(osp.join(REPO, 'tools', '*')))
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
    assert len(open(PAGES[0]).read().splitlines()) <= 200


@pytest.mark.parametrize('path', PAGES + SCRIPTS, ids=lambda p: osp.relpath(p, REPO))
def test_no_development_process_words(path):
    with open(path, errors='replace') as f:
        hits = [line.strip() for line in f if PROCESS_WORDS.search(line)]
    assert hits == []
