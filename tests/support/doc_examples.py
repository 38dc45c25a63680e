"""The fenced examples of README.md and docs/, and the checks that keep them current.

Every fenced block is preceded by a marker line saying what checks it:

- ``<!-- checked: config -->``: Python config text, loaded with ``Config.fromfile``;
- ``<!-- checked: commands -->``: shell lines, each parsed by the real parser of the
  mmrepro tool it runs (``mmrepro-*``, ``tools/*.py``, ``python -m mmrepro.cli.*``) or
  naming a script of the checkout (``bash tools/*.sh``);
- ``<!-- checked: output NAME -->``: output, compared by the test that produces it with
  :func:`assert_shows` (``...`` lines stand for omitted output);
- ``<!-- illustrative -->``: not checked (e.g. a path on the reader's machine).
"""
from __future__ import annotations

import configparser
import glob
import importlib
import importlib.util
import os.path as osp
import re
import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional

from support.repro_utils import REPO

PAGES = [osp.join(REPO, 'README.md'), *sorted(glob.glob(osp.join(REPO, 'docs', '*.md')))]
MARKER = re.compile(r'^\s*<!-- (checked: (config|commands|output ([\w-]+))|illustrative) -->$')
FENCE = re.compile(r'^(\s*)```(\w*)\s*$')
#: Stand-ins a reader replaces with their own config or value.
PLACEHOLDERS = {'CFG', 'CONFIG', 'NPROC', 'configs/my_config.py'}


@dataclass
class Block:
    """One fenced block: where it is, its marker and its text (indent removed)."""

    where: str
    kind: Optional[str]  # config, commands, output, illustrative or None (no marker)
    name: Optional[str]  # the output's name
    lines: List[str]


def blocks() -> List[Block]:
    """Every fenced block of README.md and docs/*.md, in page order."""
    found = []
    for page in PAGES:
        lines = open(page).read().splitlines()
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if not fence:
                i += 1
                continue
            indent = len(fence.group(1))
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == '```')
            marker = MARKER.match(lines[i - 1]) if i else None
            kind = name = None
            if marker:
                kind = 'illustrative' if marker.group(1) == 'illustrative' else (
                    'output' if marker.group(3) else marker.group(2))
                name = marker.group(3)
            found.append(Block(f'{osp.relpath(page, REPO)}:{i + 1}', kind, name,
                               [line[indent:] for line in lines[i + 1:end]]))
            i = end + 1
    return found


def output_block(name: str) -> List[str]:
    """The lines of the block marked ``<!-- checked: output NAME -->``."""
    matches = [b for b in blocks() if b.kind == 'output' and b.name == name]
    assert len(matches) == 1, f'{len(matches)} output blocks named {name!r}'
    return matches[0].lines


def assert_shows(name: str, actual: str, counts_vary: bool = False) -> None:
    """The output block ``name`` is ``actual``'s lines, ``...`` standing for any lines.

    Each stretch of documented lines between ``...`` lines must be consecutive lines
    of ``actual`` (trailing spaces ignored), the stretches in the documented order.

    Args:
        name: the block's name in its ``<!-- checked: output NAME -->`` marker.
        actual: the real output.
        counts_vary: the output counts things that differ from run to run by nature
            (``129 of 236 ...`` of a deliberately noisy layer): any ``<n> of`` matches.
    """
    def norm(line: str) -> str:
        line = line.rstrip()
        return re.sub(r'\b\d+ of ', '<n> of ', line) if counts_vary else line

    have = [norm(line) for line in actual.splitlines()]
    stretches, current = [], []
    for line in output_block(name):
        if line.strip() == '...':
            stretches.append(current)
            current = []
        else:
            current.append(norm(line))
    stretches.append(current)
    start = 0
    for stretch in filter(None, stretches):
        at = next((i for i in range(start, len(have) - len(stretch) + 1)
                   if have[i:i + len(stretch)] == stretch), None)
        assert at is not None, (f'the documented output {name!r} is stale: these lines are '
                                f'not in the real output:\n' + '\n'.join(stretch)
                                + '\n--- real output ---\n' + actual)
        start = at + len(stretch)


#: An inline code span that runs an mmrepro tool or a checkout script.
INLINE_COMMAND = re.compile(
    r'`((?:mmrepro-[a-z]+|python3? (?:tools/|-m mmrepro)|bash tools/)[^`*]*)`')


def inline_commands() -> List[tuple]:
    """(where, command) of every inline code span of the pages that runs a tool."""
    found = []
    for page in PAGES:
        for number, line in enumerate(open(page), 1):
            found += [(f'{osp.relpath(page, REPO)}:{number}', m.group(1))
                      for m in INLINE_COMMAND.finditer(line)
                      if not m.group(1).endswith('.X')]
    return found


def check_inline(where: str, command: str) -> None:
    """A tool named without arguments exists; one with arguments accepts them."""
    words = command.split()
    if len(words) == 1 or words[:2] == ['python', '-m'] and len(words) == 3:
        tool = words[-1]
        assert tool in console_scripts() or importlib.util.find_spec(tool), (
            f'{where}: {tool} does not exist')
    else:
        check_command(where, command)


def console_scripts() -> Dict[str, str]:
    """``setup.cfg``'s console scripts: name -> module."""
    parser = configparser.ConfigParser()
    parser.read(osp.join(REPO, 'setup.cfg'))
    entries = parser['options.entry_points']['console_scripts'].strip().splitlines()
    return {name.strip(): target.split(':')[0].strip()
            for name, target in (entry.split('=') for entry in entries)}


def _check_paths(where: str, args: List[str]) -> None:
    for arg in args:
        if (arg.endswith(('.py', '.pth')) and arg not in PLACEHOLDERS
                and not arg.startswith('work_dirs/')):
            assert osp.exists(osp.join(REPO, arg)), f'{where}: {arg} does not exist'


def _parse(where: str, module: str, args: List[str]) -> None:
    assert module.startswith('mmrepro.cli.'), f'{where}: {module} is not an mmrepro tool'
    _check_paths(where, args)
    try:
        importlib.import_module(module).parse_args(args)
    except SystemExit as exit:
        raise AssertionError(f'{where}: {module} rejects {args} (exit {exit.code})') from None


def check_command(where: str, line: str) -> None:
    """``line`` runs an mmrepro tool with arguments its parser accepts, or a checkout script.

    Bracketed text (``[tools/train.py args]``) is a placeholder and left out.
    """
    words = shlex.split(re.sub(r'\[[^\]]*\]', '', line), comments=True)
    if not words:
        return
    scripts = console_scripts()
    if words[0] in scripts:
        _parse(where, scripts[words[0]], words[1:])
    elif osp.basename(words[0]) in ('python', 'python3') and words[1] == '-m':
        _parse(where, words[2], words[3:])
    elif osp.basename(words[0]) in ('python', 'python3'):
        module = 'mmrepro.cli.' + osp.splitext(osp.basename(words[1]))[0]
        script = osp.join(REPO, words[1])
        assert osp.isfile(script), f'{where}: {words[1]} does not exist'
        assert f'from {module} import' in open(script).read(), f'{where}: {words[1]}'
        _parse(where, module, words[2:])
    elif words[0] == 'bash':
        assert osp.isfile(osp.join(REPO, words[1])), f'{where}: {words[1]} does not exist'
        if words[1] == 'tools/dist_train.sh':  # CONFIG NPROC, then tools/train.py's args
            _parse(where, 'mmrepro.cli.train', words[2:3] + words[4:])
        if words[1] == 'tools/dist_test.sh':  # CONFIG CHECKPOINT NPROC, then test.py's args
            _parse(where, 'mmrepro.cli.test', words[2:4] + words[5:])
    else:
        raise AssertionError(f'{where}: {line!r} runs no mmrepro tool or script; mark the '
                             'block <!-- illustrative --> or check it otherwise')
