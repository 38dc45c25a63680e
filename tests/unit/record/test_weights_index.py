"""mmrepro.record.weights_index: a run's weights by iteration, from its checkpoints at hand
(hashed again) and the digests its records list."""
import pytest
import torch

from mmrepro.record.weights_index import (
    WeightsIndex,
    WeightsReadError,
    checkpoint_weights,
    compare_weights,
)
from mmrepro.resume.digests import META_KEY, weights_digest


def _save(path, value, iteration, recorded=None):
    checkpoint = {'state_dict': {'w': torch.tensor([value])}, 'meta': {'iter': iteration}}
    if recorded is not None:
        checkpoint['meta'][META_KEY] = recorded
    torch.save(checkpoint, path)
    return weights_digest(checkpoint)


def test_a_checkpoint_is_hashed_with_its_iteration_and_recorded_digest(tmp_path):
    digest = _save(tmp_path / 'iter_4.pth', 1.0, 4, recorded='r' * 64)
    weights = checkpoint_weights(str(tmp_path / 'iter_4.pth'))
    assert (weights.digest, weights.recorded, weights.iteration) == (digest, 'r' * 64, 4)
    with pytest.raises(WeightsReadError, match='no such file'):
        checkpoint_weights(str(tmp_path / 'missing.pth'))


def test_a_work_dir_indexes_its_checkpoints_and_notes_a_changed_file(tmp_path):
    recorded = _save(tmp_path / 'iter_2.pth', 1.0, 2)
    _save(tmp_path / 'iter_2.pth', 2.0, 2)  # changed after the record was written
    (tmp_path / 'broken.pth').write_bytes(b'not a checkpoint')
    index = WeightsIndex()
    index.add_records([{'weights': {'checkpoints': {'2': recorded},
                                    'final': {'iter': 6, 'sha256': 'f' * 64}}}])
    index.add_work_dir(str(tmp_path))
    assert index.iterations() == [2, 6] and index.final == 6
    assert index.digest(2) != recorded and index.digest(6) == 'f' * 64
    assert any(note.startswith('skipped: ') for note in index.notes)
    assert any('do not match the digest recorded' in note for note in index.notes)


def test_compare_weights_stops_at_the_first_difference():
    a = WeightsIndex(recorded={1: 'a', 2: 'b', 3: 'c'})
    b = WeightsIndex(recorded={2: 'b', 3: 'x', 4: 'd'})
    assert compare_weights(a, b) == ([2, 3], (3, 'c', 'x'))
    assert compare_weights(a, WeightsIndex(recorded={1: 'a'})) == ([1], None)
