"""Digests of the code that trains, so that a run record can name a locally edited file.

Every ``.py`` file of the OpenMMLab packages (and of mmrepro), and of the modules a
config names in ``custom_imports``, is hashed by its path relative to the package's
directory. Two records of the same package versions then differ in a package's
``sha256`` only where a file was edited, and :func:`edited_files` names which.

Packages are found without being imported (:func:`importlib.util.find_spec`), so
digesting does not run their code; the parent of a dotted name is imported, as
``find_spec`` does.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import os.path as osp
import subprocess
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .fingerprint import file_sha256

#: Packages whose code trains every run (digested by :func:`package_digests`).
PACKAGES = ('mmdet', 'mmengine', 'mmcv', 'mmrepro')
#: Characters of a file's sha256 kept per file (the package's ``sha256`` uses all).
FILE_HEX = 16
#: Directories never digested: compiled bytecode, and the configs and tools MMDetection
#: ships in its package (a config is recorded key by key in the run record's ``config``).
SKIP_DIRS = ('__pycache__', '.mim')


def _py_files(root: str) -> Iterable[Tuple[str, str]]:
    """``(relpath, path)`` of every ``.py`` file under ``root``, relpaths '/'-separated."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            if name.endswith('.py'):
                path = osp.join(dirpath, name)
                yield osp.relpath(path, root).replace(os.sep, '/'), path


def _digest(files: Dict[str, str]) -> Dict[str, Any]:
    """The digest of ``{relpath: path}``: a combined ``sha256`` and one short hash per file.

    Args:
        files: Each file's path relative to what is digested, mapped to its location.

    Returns:
        ``{'sha256': hex over every (relpath, file sha256) pair in relpath order,
        'files': {relpath: first FILE_HEX hex chars of the file's sha256}}``.
    """
    total = hashlib.sha256()
    short = {}
    for relpath in sorted(files):
        sha = file_sha256(files[relpath])
        total.update(f'{relpath}\0{sha}\n'.encode())
        short[relpath] = sha[:FILE_HEX]
    return {'sha256': total.hexdigest(), 'files': short}


def _source(spec: Any) -> Optional[Tuple[str, Dict[str, str]]]:
    """``(origin, {relpath: path})`` of a found module's source, None without a file.

    A package (regular or namespace) gives every ``.py`` file under its directories
    (the first directory wins a relpath found in several); a plain module its own
    file, by basename.
    """
    locations = list(spec.submodule_search_locations or [])
    if locations:
        files: Dict[str, str] = {}
        for root in locations:
            for relpath, path in _py_files(root):
                files.setdefault(relpath, path)
        return os.pathsep.join(locations), files
    origin = spec.origin
    if origin and osp.isfile(origin):
        return origin, {osp.basename(origin): origin}
    return None  # built-in or frozen: no file to digest


def _find(name: str) -> Tuple[Any, str]:
    """``(spec, '')`` of module ``name``, or ``(None, why)``; never raises.

    ``find_spec`` of a dotted name imports its parent, which may be missing or fail.
    """
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a missing parent; a module without __spec__
        spec = None
    except Exception as exc:  # noqa: BLE001 - a parent package that fails to import
        return None, f'parent import failed: {type(exc).__name__}: {exc}'
    return spec, '' if spec is not None else 'not found'


def package_digest(name: str) -> Optional[Dict[str, Any]]:
    """Digest of every ``.py`` file of an installed package, found without importing it.

    Args:
        name: The package (or single module) name, e.g. ``'mmengine'``.

    Returns:
        ``{'sha256': ..., 'files': {relpath: short hash}}`` (relpaths relative to the
        package directory, '/'-separated, ``__pycache__`` skipped), or None where the
        package is not found or has no source file.
    """
    spec, _ = _find(name)
    source = _source(spec) if spec is not None else None
    return None if source is None else _digest(source[1])


def package_digests(names: Iterable[str] = PACKAGES) -> Dict[str, Dict[str, Any]]:
    """:func:`package_digest` of each of ``names`` that is found, keyed by name."""
    digests = {}
    for name in names:
        digest = package_digest(name)
        if digest is not None:
            digests[name] = digest
    return digests


def _imports(custom_imports: Any) -> List[str]:
    """The module names of a config's ``custom_imports`` (a dict, a list or a name)."""
    if not custom_imports:
        return []
    if isinstance(custom_imports, dict):  # ConfigDict too
        custom_imports = custom_imports.get('imports') or []
    if isinstance(custom_imports, str):
        return [custom_imports]
    return [str(name) for name in custom_imports]


def import_digests(custom_imports: Any) -> Dict[str, Dict[str, Any]]:
    """Digest of the source of each module a config's ``custom_imports`` names.

    Args:
        custom_imports: The config's ``custom_imports`` value, e.g.
            ``dict(imports=['my_pkg.neck'], allow_failed_imports=False)``, or None.

    Returns:
        ``{module: digest}`` in the shape of :func:`package_digest` plus ``'origin'``
        (the directory or file digested, for humans; not compared). A package gives
        all its ``.py`` files, a plain module its file (by basename); a module not
        found gives ``{'error': 'not found'}`` (a parent that fails to import: ``'parent
        import failed: ...'``), one without a source file
        ``{'error': 'no source file', 'origin': ...}``. ``mmrepro`` and its modules
        are skipped (:func:`package_digests` covers them).
    """
    digests: Dict[str, Dict[str, Any]] = {}
    for name in _imports(custom_imports):
        if name == 'mmrepro' or name.startswith('mmrepro.') or name in digests:
            continue
        spec, error = _find(name)
        if spec is None:
            digests[name] = {'error': error}
            continue
        source = _source(spec)
        if source is None:
            digests[name] = {'error': 'no source file', 'origin': spec.origin}
            continue
        origin, files = source
        digests[name] = dict(_digest(files), origin=origin)
    return digests


def edited_files(a: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]]) -> List[str]:
    """Relative paths whose file digests differ between two digests of one package.

    Args:
        a: A digest (:func:`package_digest` shape); None or an error entry counts as
            no files.
        b: The other digest.

    Returns:
        Sorted relpaths that are edited, added or removed.
    """
    files_a = (a or {}).get('files') or {}
    files_b = (b or {}).get('files') or {}
    return sorted(path for path in set(files_a) | set(files_b)
                  if files_a.get(path) != files_b.get(path))


def code_fingerprint(cwd: Optional[str] = None) -> Dict[str, Any]:
    """What code ran: mmrepro's, the installed packages' and the git state of the working dir.

    Returns:
        dict: ``mmrepro_sha256`` (over every ``.py`` file of the installed mmrepro),
        ``git`` (``commit``, ``dirty`` and ``diff_sha256`` of ``git diff HEAD`` for the
        tracked files of the repository containing ``cwd``; None outside a repository
        or without git) and ``packages`` (every Python file of mmdet, mmengine, mmcv and
        mmrepro as installed, by its digest: :mod:`mmrepro.record.code_digest`).
    """
    packages = package_digests()
    return dict(mmrepro_sha256=(packages.get('mmrepro') or {}).get('sha256'),
                git=_git_state(cwd or os.getcwd()), packages=packages)


def _git_state(cwd: str) -> Optional[Dict[str, Any]]:
    def git(*args: str) -> Optional[str]:
        try:
            proc = subprocess.run(['git', *args], cwd=cwd, capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.decode(errors='replace') if proc.returncode == 0 else None

    commit = git('rev-parse', 'HEAD')
    if commit is None:
        return None
    diff = git('diff', 'HEAD', '--no-ext-diff', '--no-color') or ''
    return dict(commit=commit.strip(), dirty=bool(diff),
                diff_sha256=hashlib.sha256(diff.encode()).hexdigest() if diff else None)
