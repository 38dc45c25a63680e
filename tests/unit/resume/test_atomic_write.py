"""resume.atomic_write: whole files under good names, and MMEngine's backend writing so."""
import os

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
    monkeypatch.setattr(atomic_module, 'atomic_write',
                        lambda path, write: writes.append(path) or original(path, write))
    backend = get_file_backend(str(tmp_path), backend_args=dict(
        backend=atomic_module.ATOMIC_BACKEND))
    assert isinstance(backend, atomic_module.AtomicLocalBackend)
    backend.put(b'\x00\x01', tmp_path / 'sub' / 'a.pth')
    backend.put_text('caf\u00e9', str(tmp_path / 'b.txt'))
    assert (tmp_path / 'sub' / 'a.pth').read_bytes() == b'\x00\x01'
    assert (tmp_path / 'b.txt').read_text(encoding='utf-8') == 'caf\u00e9'
    assert writes == [str(tmp_path / 'sub' / 'a.pth'), str(tmp_path / 'b.txt')]
