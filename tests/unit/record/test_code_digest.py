"""mmrepro.record.code_digest: digests of the code that trains name an edited file."""
import json
import sys

from mmengine.config import ConfigDict

from mmrepro.record.code_digest import (
    PACKAGES,
    edited_files,
    import_digests,
    package_digest,
    package_digests,
)


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _tiny_package(root, name='tinypkg_cd'):
    """Two modules and a subpackage under ``root/name`` (and a stale bytecode dir)."""
    pkg = root / name
    _write(pkg / '__init__.py', '')
    _write(pkg / 'neck.py', 'A = 1\nB = 2\n')
    _write(pkg / 'head.py', 'C = 3\n')
    _write(pkg / 'sub' / '__init__.py', '')
    _write(pkg / 'sub' / 'loss.py', 'D = 4\nE = 5\n')
    _write(pkg / '__pycache__' / 'neck.py', 'not code\n')
    _write(pkg / 'notes.txt', 'not code\n')
    return pkg


def test_an_edited_line_names_its_file(tmp_path, monkeypatch):
    pkg = _tiny_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = import_digests(dict(imports=['tinypkg_cd'], allow_failed_imports=False))
    entry = before['tinypkg_cd']
    assert sorted(entry['files']) == ['__init__.py', 'head.py', 'neck.py', 'sub/__init__.py',
                                      'sub/loss.py']
    assert entry['origin'] == str(pkg)
    assert all(len(short) == 16 for short in entry['files'].values())
    assert 'tinypkg_cd' not in sys.modules  # found, not imported
    assert import_digests(dict(imports=['tinypkg_cd'])) == before  # stable

    _write(pkg / 'sub' / 'loss.py', 'D = 4\nE = 6\n')
    after = import_digests(ConfigDict(imports=['tinypkg_cd']))['tinypkg_cd']
    assert after['sha256'] != entry['sha256']
    assert edited_files(entry, after) == ['sub/loss.py']

    (pkg / 'head.py').unlink()
    _write(pkg / 'sub' / 'new.py', 'F = 7\n')
    again = import_digests(dict(imports=['tinypkg_cd']))['tinypkg_cd']
    assert edited_files(after, again) == ['head.py', 'sub/new.py']  # removed, added
    assert edited_files(None, {'error': 'not found'}) == []


def test_a_plain_module_and_a_submodule(tmp_path, monkeypatch):
    _write(tmp_path / 'plain_cd.py', 'X = 1\n')
    pkg = _tiny_package(tmp_path, 'tinypkg_cd2')
    monkeypatch.syspath_prepend(str(tmp_path))
    digests = import_digests(dict(imports=['plain_cd', 'tinypkg_cd2.neck']))
    assert digests['plain_cd']['files'].keys() == {'plain_cd.py'}
    assert digests['plain_cd']['origin'] == str(tmp_path / 'plain_cd.py')
    assert digests['tinypkg_cd2.neck']['files'].keys() == {'neck.py'}
    assert digests['tinypkg_cd2.neck']['origin'] == str(pkg / 'neck.py')
    assert 'tinypkg_cd2.neck' not in sys.modules
    assert import_digests(dict(imports='plain_cd')) == {'plain_cd': digests['plain_cd']}


def test_missing_modules_and_mmrepro_entries():
    digests = import_digests(dict(imports=['no_such_module_cd', 'no_such_pkg_cd.neck',
                                           'mmrepro', 'mmrepro.hooks']))
    assert digests == {'no_such_module_cd': {'error': 'not found'},
                       'no_such_pkg_cd.neck': {'error': 'not found'}}
    assert import_digests(None) == {}
    assert import_digests(dict(imports=[])) == {}


def test_installed_packages():
    first = package_digest('mmengine')
    assert 'runner/runner.py' in first['files']
    assert not any('__pycache__' in path for path in first['files'])
    assert package_digest('mmengine') == first
    assert package_digest('no_such_package_cd') is None
    digests = package_digests()
    assert set(digests) <= set(PACKAGES) and {'mmengine', 'mmrepro'} <= set(digests)
    assert digests['mmengine'] == first
    assert 'record/code_digest.py' in digests['mmrepro']['files']
    assert json.loads(json.dumps(digests)) == digests
