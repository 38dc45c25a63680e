"""What ``import mmrepro`` replaces in other packages: exactly :data:`EXPECTED`, documented.

A fresh interpreter imports the modules mmrepro patches (:data:`PRELOADED`), keeps every
attribute of every loaded module, of every class those modules define, every item of
OpenMMLab's module-level dicts and every finder in ``sys.meta_path``, then imports mmrepro
and prints what is new or another object. The test process's own imports do not matter.
"""
from __future__ import annotations

import json
import os
import os.path as osp
import re
import subprocess
import sys
from typing import List

from support.repro_utils import REPO, pythonpath

#: Everything ``import mmrepro`` replaces or adds outside mmrepro, sorted. Each entry is
#: in the table of docs/internals.md (:data:`HEADING`) with its reason.
EXPECTED = [
    "mmdet.apis.init_random_seed",
    "mmdet.apis.set_random_seed",
    "mmengine.config.utils.MODULE2PACKAGE['mmrepro']",
    "mmengine.dist.utils._init_dist_pytorch",
    "mmengine.dist.utils._init_dist_slurm",
    "mmengine.fileio.backends.backends['mmrepro_atomic_local']",
    "mmengine.runner.checkpoint.CheckpointLoader._schemes",
    "mmengine.runner.runner.Runner.__new__",
]
#: Imported before mmrepro: the modules it patches. ``mmdet.apis`` too, so that the names
#: it gains show (imported later, a finder in ``sys.meta_path`` adds them on import).
PRELOADED = (
    'mmengine.config.utils', 'mmengine.dist.utils', 'mmengine.hooks', 'mmengine.runner',
    'mmengine.runner.checkpoint', 'mmengine.runner.loops', 'mmcv.ops', 'mmdet.apis',
)
DOCS = osp.join(REPO, 'docs', 'internals.md')
#: The heading of the docs table; its rows start with the backticked entry.
HEADING = '## What `import mmrepro` replaces'
DECISION = ('a new patch is a decision: list it in docs/internals.md ("{}") with its reason '
            'and add it to EXPECTED in this test'.format(HEADING.lstrip('# ')))

#: Run with the modules of :data:`PRELOADED` as arguments; prints the sorted JSON list.
SNAPSHOT = r'''
import importlib, json, sys, types

# Where mmrepro is pip-installed, its .pth file put a finder in sys.meta_path at start:
# drop it, so that the first snapshot is the packages' own state.
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, '_mmrepro_config_scope', 0)]
for name in sys.argv[1:]:
    importlib.import_module(name)
OWN = ('__main__', '__mp_main__', 'mmrepro')
DICT_PACKAGES = ('mmengine', 'mmcv', 'mmdet')


def snapshot(modules):
    """{owner: {entry: object}}; the objects are kept, so no id is reused meanwhile."""
    finders = {f'sys.meta_path[{type(f).__module__}.{type(f).__qualname__}]': f
               for f in sys.meta_path}
    owners, dicts = {'sys.meta_path': finders}, {}
    for modname in modules:
        module = sys.modules.get(modname)
        top = modname.partition('.')[0]
        if top in OWN or not isinstance(module, types.ModuleType):
            continue
        attrs = dict(vars(module))
        owners[modname] = {f'{modname}.{k}': v for k, v in attrs.items()}
        for attr, value in attrs.items():
            name = f'{modname}.{attr}'
            if isinstance(value, type) and getattr(value, '__module__', None) == modname:
                owners[name] = {f'{name}.{k}': v for k, v in vars(value).items()}
            elif type(value) is dict and top in DICT_PACKAGES:
                dicts.setdefault(id(value), (value, []))[1].append(name)
    for value, names in dicts.values():  # one dict under several names: the first
        owner = min(names)
        owners[owner] = {f'{owner}[{k!r}]': v for k, v in list(value.items())}
    return owners


before = snapshot(list(sys.modules))
import mmrepro  # noqa: E402,F401
after = snapshot(list(before))
changed = []
for owner, entries in after.items():
    for name, value in entries.items():
        old = before.get(owner, {})
        if name in old and old[name] is value or name.endswith('.__warningregistry__'):
            continue
        if name not in old and isinstance(value, types.ModuleType) and \
                sys.modules.get(name) is value:  # a submodule imported meanwhile
            continue
        changed.append(name)
print(json.dumps(sorted(changed)))
'''


def replaced_by_import() -> List[str]:
    """What ``import mmrepro`` replaces or adds, measured in a fresh interpreter."""
    proc = subprocess.run([sys.executable, '-W', 'ignore', '-c', SNAPSHOT, *PRELOADED],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'PYTHONPATH': pythonpath(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def documented() -> List[str]:
    """The first cells of the table under :data:`HEADING` in docs/internals.md."""
    with open(DOCS) as f:
        lines = f.read().splitlines()
    assert HEADING in lines, f'docs/internals.md lost its heading {HEADING!r}'
    names = []
    for line in lines[lines.index(HEADING) + 1:]:
        if line.startswith('#'):
            break
        row = re.match(r'\| `([^`]+)` \|', line)
        if row:
            names.append(row.group(1))
    return names


def test_import_mmrepro_replaces_only_the_listed_attributes():
    found = replaced_by_import()
    new, gone = sorted(set(found) - set(EXPECTED)), sorted(set(EXPECTED) - set(found))
    assert found == EXPECTED, f'{DECISION}; new: {new}, no longer replaced: {gone}'


def test_docs_table_lists_exactly_the_expected_attributes():
    names = documented()
    assert len(names) == len(set(names)), 'an attribute is listed twice in docs/internals.md'
    assert sorted(names) == EXPECTED, (
        f'{DECISION}; only in the docs: {sorted(set(names) - set(EXPECTED))}, '
        f'only in EXPECTED: {sorted(set(EXPECTED) - set(names))}')
