"""resume.atomic_write: whole files under good names, and MMEngine's backend writing so; a
full disk, a read-only file system or a denied write is one line, and replaces nothing."""
import errno
import os
import re
import subprocess

import pytest
import torch
from mmengine.fileio import get_file_backend

from mmrepro.resume import atomic_write as atomic_module


def test_atomic_write_replaces_whole_files_and_removes_leftovers(tmp_path):
    path = str(tmp_path / 'iter_2.pth')
    leftover = tmp_path / '.iter_2.pth.12345.tmp'
    leftover.write_bytes(b'torn')
    atomic_module.atomic_write(path, lambda f: torch.save({'a': torch.ones(3)}, f))
    assert torch.load(path)['a'].tolist() == [1, 1, 1]
    assert sorted(os.listdir(tmp_path)) == ['iter_2.pth']  # the leftover went too


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / 'last_checkpoint'
    path.write_text('old')

    def fail(f):
        f.write(b'half')
        raise OSError('disk full')

    with pytest.raises(OSError, match='disk full'):
        atomic_module.atomic_write(str(path), fail)
    assert path.read_text() == 'old' and os.listdir(tmp_path) == ['last_checkpoint']


def test_the_registered_backend_writes_bytes_and_text_atomically(tmp_path, monkeypatch):
    writes = []
    original = atomic_module.atomic_write
    monkeypatch.setattr(atomic_module, 'atomic_write', lambda path, write, **kw: writes.append(
        path) or original(path, write, **kw))
    backend = get_file_backend(str(tmp_path), backend_args=dict(
        backend=atomic_module.ATOMIC_BACKEND))
    assert isinstance(backend, atomic_module.AtomicLocalBackend)
    backend.put(b'\x00\x01', tmp_path / 'sub' / 'a.pth')
    backend.put_text('caf\u00e9', str(tmp_path / 'b.txt'))
    assert (tmp_path / 'sub' / 'a.pth').read_bytes() == b'\x00\x01'
    assert (tmp_path / 'b.txt').read_text(encoding='utf-8') == 'caf\u00e9'
    assert writes == [str(tmp_path / 'sub' / 'a.pth'), str(tmp_path / 'b.txt')]


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (mounting one needs root; skipped otherwise)."""
    mount = tmp_path / 'disk'
    mount.mkdir()
    proc = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', str(mount)],
                          capture_output=True, text=True)
    if proc.returncode:
        pytest.skip(f'cannot mount a 1 MiB tmpfs here ({proc.stderr.strip()}): mounting '
                    'needs root; a full disk is also tested by an injected ENOSPC '
                    '(tests/unit/runner/test_checkpoints.py)')
    yield mount
    subprocess.run(['umount', '-l', str(mount)], check=True)


def test_a_full_disk_is_one_line_and_replaces_nothing(small_disk):
    old = small_disk / 'epoch_1.pth'
    old.write_bytes(b'1' * 300_000)
    backend = atomic_module.AtomicLocalBackend()
    for name in ('epoch_2.pth', 'epoch_1.pth'):  # a new file, and one that exists
        with pytest.raises(atomic_module.SaveError) as info:
            backend.put(b'2' * 900_000, small_disk / name)
        assert info.value.errno == errno.ENOSPC and info.value.fix == 'free space'
        assert re.fullmatch(
            rf'cannot write {small_disk / name}: no space left on the device \(it needs '
            rf'878\.9 KiB, \d+\.\d KiB free in {small_disk}\); nothing was replaced and no '
            'partial file is left', str(info.value)), str(info.value)
        assert os.listdir(small_disk) == ['epoch_1.pth']
        assert old.read_bytes() == b'1' * 300_000


def test_a_read_only_file_system_and_a_denied_write_are_one_line(small_disk, tmp_path):
    subprocess.run(['mount', '-o', 'remount,ro', str(small_disk)], check=True)
    with pytest.raises(atomic_module.SaveError, match=rf'^cannot write {small_disk}/a\.pth: '
                       'the file system is read-only; nothing was replaced and no partial '
                       'file is left$'):
        atomic_module.atomic_write(str(small_disk / 'a.pth'), lambda f: f.write(b'x'))

    def denied(f):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    with pytest.raises(atomic_module.SaveError, match=r'permission denied; nothing was') as info:
        atomic_module.atomic_write(str(tmp_path / 'b.pth'), denied)
    assert info.value.fix == 'make the directory writable'
    assert not list(tmp_path.glob('.b.pth.*'))
