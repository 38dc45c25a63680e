"""mmrepro.patches.atomic_save: whole files under good names, MMEngine's saves elsewhere."""
import os

import pytest
import torch

from mmrepro.patches import atomic_save


def test_atomic_write_replaces_whole_files_and_removes_leftovers(tmp_path):
    path = str(tmp_path / 'iter_2.pth')
    leftover = tmp_path / '.iter_2.pth.12345.tmp'
    leftover.write_bytes(b'torn')
    atomic_save.atomic_write(path, lambda f: torch.save({'a': torch.ones(3)}, f))
    assert torch.load(path)['a'].tolist() == [1, 1, 1]
    assert sorted(os.listdir(tmp_path)) == ['iter_2.pth']  # the leftover went too


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / 'last_checkpoint'
    path.write_text('old')

    def fail(f):
        f.write(b'half')
        raise OSError('disk full')

    with pytest.raises(OSError, match='disk full'):
        atomic_save.atomic_write(str(path), fail)
    assert path.read_text() == 'old' and os.listdir(tmp_path) == ['last_checkpoint']


def test_saves_outside_an_enabled_runner_are_mmengines(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(atomic_save, '_original_save_checkpoint',
                        lambda *args, **kwargs: calls.append(args[1]))
    atomic_save.save_checkpoint({}, str(tmp_path / 'a.pth'))
    assert calls == [str(tmp_path / 'a.pth')]
    other = tmp_path / 'last_checkpoint'
    with atomic_save._hook_open(str(other), 'w') as f:  # the builtin: no Runner saving
        assert not isinstance(f, atomic_save._AtomicText)
        f.write('x')
    assert other.read_text() == 'x'
