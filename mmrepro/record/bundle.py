"""A baseline bundle: what a team shares instead of a work dir, in one file.

``mmrepro-bundle WORK_DIR OUT.tar.gz`` packs, from every log dir of the work dir (a
run stopped and resumed has several; given one log dir, from that one): the run record
(which holds the data fingerprint, the weights digest of every checkpoint and the
metrics and predictions digest of every validation), the per-image predictions digests
(``predictions.jsonl``), the trace, the logged losses (``vis_data/scalars.json``) and
the config dump; plus ``bundle.json``, listing each checkpoint of the work dir with its
iteration and weights digest. The last checkpoint (the one ``last_checkpoint`` names)
goes in only with ``weights=True``. A checkpoint whose weights do not match the digest
saved with them, or a packed one that does not match any digest saved in it
(:mod:`mmrepro.resume.verification`), is refused: nothing is written. ``mmrepro-diff``
takes a bundle wherever it takes a work dir.

Unpacking refuses any member outside the bundle's own directory, links and devices.
"""
from __future__ import annotations

import glob
import io
import json
import os
import os.path as osp
import tarfile
from typing import Any, Dict, List, Tuple

from ..resume.verification import IntegrityError, check_intact
from ..trace import TRACE_NAME
from .evaluation import PREDICTIONS_NAME
from .run_record import RECORD_NAME
from .weights_index import WeightsReadError, checkpoint_weights

#: ``format`` of ``bundle.json``.
BUNDLE_FORMAT = 'mmrepro-bundle'
BUNDLE_VERSION = 1
MANIFEST = 'bundle.json'
#: Files taken from each log dir (besides ``trace_rank*.jsonl``).
LOG_FILES = (RECORD_NAME, TRACE_NAME, osp.join('vis_data', 'scalars.json'),
             osp.join('vis_data', 'config.py'), PREDICTIONS_NAME)


class BundleError(ValueError):
    """A work dir cannot be bundled, or a file is not a readable bundle."""


def is_bundle(path: str) -> bool:
    """Whether ``path`` names a bundle file (``.tar.gz``/``.tgz``)."""
    return path.endswith(('.tar.gz', '.tgz'))


def run_dirs(path: str) -> Tuple[str, List[str]]:
    """``(work dir, its log dirs to pack)`` of a work dir, or of one of its log dirs.

    A work dir gives every log dir under it holding a run record (a run stopped and
    resumed has several); a log dir (it holds ``run_record.json`` itself) gives itself,
    in its work dir, as ``mmrepro-diff`` reads it.

    Raises:
        BundleError: ``path`` is not a directory, or holds no run record.
    """
    if not osp.isdir(path):
        what = 'no such directory' if not osp.exists(path) else 'not a directory'
        raise BundleError(f'{path}: {what}; expected the work dir (or a log dir) of a run '
                          'trained with mmrepro')
    if osp.isfile(osp.join(path, RECORD_NAME)):
        return osp.dirname(osp.abspath(path)), [osp.abspath(path)]
    log_dirs = sorted(osp.dirname(p) for p in glob.glob(
        osp.join(glob.escape(path), '*', RECORD_NAME)))
    if not log_dirs:
        raise BundleError(f'{path}: no {RECORD_NAME} in it or in a log dir under it; give '
                          'the work dir of a run trained with mmrepro')
    return path, log_dirs


def _members(work_dir: str, log_dirs: List[str]) -> List[str]:
    """Paths, relative to ``work_dir``, of what the bundle holds from it."""
    found = []
    for log_dir in log_dirs:
        names = [*LOG_FILES, *(osp.basename(p) for p in sorted(glob.glob(
            osp.join(glob.escape(log_dir), 'trace_rank*.jsonl'))))]
        found += [osp.relpath(osp.join(log_dir, n), work_dir) for n in names
                  if osp.isfile(osp.join(log_dir, n))]
    return found + sorted(osp.basename(p) for p in glob.glob(
        osp.join(glob.escape(work_dir), '*.py')))


def check_out(out: str) -> None:
    """Check that the bundle can be written at ``out``, before anything is read.

    Raises:
        BundleError: Not a ``.tar.gz`` name, it exists, or its directory does not.
    """
    if not is_bundle(out):
        raise BundleError(f'{out}: a bundle is a .tar.gz file; name it e.g. baseline.tar.gz')
    if osp.exists(out):
        raise BundleError(f'{out} exists; nothing was written (remove it or choose another '
                          'name)')
    directory = osp.dirname(osp.abspath(out))
    if not osp.isdir(directory):
        raise BundleError(f'{out}: its directory {osp.dirname(out) or "."} does not exist; '
                          'nothing was written (make it first, or choose another path)')


def _last_checkpoint(work_dir: str) -> str:
    """The name of the checkpoint ``last_checkpoint`` names (in ``work_dir``)."""
    try:
        with open(osp.join(work_dir, 'last_checkpoint'), encoding='utf-8') as f:
            path = f.read().strip()
    except OSError:
        path = ''
    name = osp.basename(path)
    if not name or not osp.isfile(osp.join(work_dir, name)):
        raise BundleError(f'{work_dir}: no last_checkpoint naming a checkpoint in it, so '
                          'there are no weights to pack; leave out --weights')
    return name


def pack(work_dir: str, out: str, weights: bool = False) -> Dict[str, Any]:
    """Write the bundle of ``work_dir`` to ``out``; return its manifest.

    Args:
        work_dir: The run's work dir.
        out: The ``.tar.gz`` to write; an existing file is never overwritten.
        weights: Also pack the last checkpoint file.

    Raises:
        BundleError: Nothing to bundle, ``out`` exists, or a checkpoint is unreadable.
    """
    check_out(out)
    work_dir, log_dirs = run_dirs(work_dir)
    members = _members(work_dir, log_dirs)
    packed = _last_checkpoint(work_dir) if weights else None
    if packed is not None:
        members.append(packed)
    checkpoints = {}
    for path in sorted(glob.glob(osp.join(glob.escape(work_dir), '*.pth'))):
        try:
            found = checkpoint_weights(path)
            if osp.basename(path) == packed or found.recorded not in (None, found.digest):
                check_intact(path, osp.basename(path) == packed, f'cannot bundle {path}: it',
                             'nothing was written (copy it again from where it was saved, or '
                             'move it out of the work dir)')
        except (WeightsReadError, IntegrityError) as err:
            raise BundleError(str(err) if isinstance(err, IntegrityError) else
                              f'cannot bundle {path}: {err}') from None
        checkpoints[osp.basename(path)] = dict(iter=found.iteration, sha256=found.digest,
                                               covers=found.covers)
    manifest = dict(format=BUNDLE_FORMAT, version=BUNDLE_VERSION,
                    work_dir=osp.basename(osp.normpath(work_dir)), weights=weights,
                    checkpoints=checkpoints, files=members)
    partial = f'{out}.partial'
    try:
        with tarfile.open(partial, 'w:gz') as tar:
            data = json.dumps(manifest, indent=2).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for name in members:
                tar.add(osp.join(work_dir, name), arcname=name, recursive=False)
        os.replace(partial, out)
    except OSError as err:
        if osp.exists(partial):
            os.remove(partial)
        raise BundleError(f'{out}: cannot be written ({err.strerror or err}); nothing was '
                          'written (check the disk and the permissions)') from None
    return manifest


def unpack(path: str, into: str) -> Dict[str, Any]:
    """Extract a bundle into the directory ``into``; return its manifest.

    Raises:
        BundleError: Not a bundle, or a member that would land outside ``into``.
    """
    if not osp.isfile(path):
        raise BundleError(f'{path}: no such file; expected a bundle (.tar.gz) written by '
                          'mmrepro-bundle')
    try:
        with tarfile.open(path, 'r:gz') as tar:
            for member in tar.getmembers():
                target = osp.realpath(osp.join(into, member.name))
                if not (member.isfile() or member.isdir()) or not target.startswith(
                        osp.realpath(into) + os.sep):
                    raise BundleError(f'{path}: member {member.name!r} is not a plain file '
                                      'inside the bundle; refused, nothing used')
            if hasattr(tarfile, 'data_filter'):  # Python 3.11.4+: no links, no devices
                tar.extractall(into, filter='data')
            else:
                tar.extractall(into)
        with open(osp.join(into, MANIFEST), encoding='utf-8') as f:
            manifest = json.load(f)
    except (tarfile.TarError, OSError, EOFError, json.JSONDecodeError) as err:
        raise BundleError(f'{path}: not a readable mmrepro bundle ({err})') from None
    if not isinstance(manifest, dict) or manifest.get('format') != BUNDLE_FORMAT:
        raise BundleError(f'{path}: {MANIFEST} is not an mmrepro bundle manifest')
    return manifest


def manifest_digests(manifest: Dict[str, Any]) -> Dict[int, str]:
    """Iteration -> weights digest of the checkpoints a manifest lists."""
    out: Dict[int, str] = {}
    for entry in (manifest.get('checkpoints') or {}).values():
        if isinstance(entry, dict) and isinstance(entry.get('iter'), int) and \
                isinstance(entry.get('sha256'), str):
            out[entry['iter']] = entry['sha256']
    return out
