"""mmrepro.resume.digests: the weights digest, and a digest per part a resume restores."""
from collections import Counter

import numpy as np
import pytest
import torch

from mmrepro.resume.checkpoint_io import safe_load
from mmrepro.resume.digests import (
    META_KEY,
    PARTS,
    PARTS_KEY,
    PartCheck,
    WeightsError,
    check_parts,
    first_difference,
    part_digests,
    seal,
    section_names,
    tree_part,
    weights_digest,
)
from mmrepro.rng.host_state import ProcessRNGs


def _state():
    return {'conv.weight': torch.arange(6, dtype=torch.float32).reshape(2, 3),
            'bn.num_batches_tracked': torch.tensor(7), 'half': torch.ones(2, dtype=torch.bfloat16),
            'empty': torch.zeros(0)}


def test_digest_ignores_metadata_and_order_but_not_any_byte():
    state = _state()
    reordered = dict(reversed(list(state.items())))
    digest = weights_digest({'state_dict': state, 'meta': {'time': 1}})
    assert weights_digest({'state_dict': reordered, 'meta': {'time': 2}, 'optimizer': {}}) \
        == digest
    assert weights_digest(state) == digest  # a bare state dict: the same weights
    nudged = dict(state, **{'conv.weight': state['conv.weight'].clone()})
    nudged['conv.weight'][1, 2] = torch.nextafter(torch.tensor(5.0), torch.tensor(6.0))
    assert weights_digest(nudged) != digest
    assert weights_digest(dict(state, half=torch.ones(2, dtype=torch.float16))) != digest
    assert weights_digest(dict(state, empty=torch.zeros(0, 1))) != digest  # shape counts
    assert len(digest) == 64 and int(digest, 16) >= 0


def test_ema_state_is_part_of_the_digest():
    state = _state()
    plain = {'state_dict': state}
    with_ema = {'state_dict': state, 'ema_state_dict': {'module.conv.weight': torch.ones(1)}}
    assert weights_digest(with_ema) != weights_digest(plain)
    assert section_names(with_ema) == 'state_dict + ema_state_dict'
    assert section_names(plain) == 'state_dict' and section_names(state) == 'state dict'


@pytest.mark.parametrize('obj, match', [
    ([1, 2], 'holds a list, not a checkpoint or a state dict'),
    ({'meta': {}, 'epoch': 3}, r'has no state_dict \(keys: meta, epoch\)'),
    ({}, r'has no state_dict \(keys: none\)'),
])
def test_what_holds_no_weights_is_refused(obj, match):
    with pytest.raises(WeightsError, match=match):
        weights_digest(obj)




def _resumable():
    """What a checkpoint a resume restores holds: weights, an EMA copy, SGD momentum,
    a scheduler, and an mmrepro section with every RNG state of this process."""
    torch.manual_seed(3)
    weight = torch.randn(4, 3)
    return dict(
        meta=dict(epoch=1, iter=8),
        state_dict={'fc.weight': weight, 'bn.num_batches_tracked': torch.tensor(8)},
        ema_state_dict={'steps': torch.tensor(8), 'module.fc.weight': weight * 0.5},
        optimizer=dict(state={0: dict(momentum_buffer=torch.randn(4, 3))},
                       param_groups=[dict(lr=0.02, momentum=0.9, params=[0])]),
        param_schedulers=[dict(milestones=Counter({8: 1}), gamma=0.1, last_step=8,
                               base_values=[0.02])],
        mmrepro=dict(format=2, seed=7, position=dict(epoch=1, global_batches=4,
                                                     global_batch=2),
                     rng=[ProcessRNGs().state_dict()], preprocessor={'size': (64, 64)}))


def test_a_sealed_checkpoint_matches_after_a_round_trip_and_keeps_its_weights_digest(
        tmp_path):
    checkpoint = _resumable()
    digest = seal(checkpoint)
    meta = checkpoint['meta']
    assert digest == meta[META_KEY] == weights_digest(checkpoint)  # what it always meant
    record = meta[PARTS_KEY]
    assert record['format'] == 1 and list(record['parts']) == list(PARTS)
    assert list(record['parts']['weights']['entries']) == [
        "state_dict['bn.num_batches_tracked']", "state_dict['fc.weight']",
        "ema_state_dict['module.fc.weight']", "ema_state_dict['steps']"]
    assert "mmrepro['rng'][0]['python'][1]" in record['parts']['mmrepro']['entries']
    path = str(tmp_path / 'iter_8.pth')
    torch.save(checkpoint, path)
    loaded = safe_load(path)
    loaded['mmrepro']['rng'][0]['python'] = list(loaded['mmrepro']['rng'][0]['python'])
    checks = check_parts(loaded, PARTS)
    assert [(c.part, c.differs) for c in checks] == [(part, False) for part in PARTS]
    assert all(c.found == c.expected for c in checks)


@pytest.mark.parametrize('part, change, first', [
    ('weights', lambda c: c['state_dict']['fc.weight'].view(torch.int32)[1, 2].add_(1),
     "state_dict['fc.weight']"),
    ('weights', lambda c: c['ema_state_dict']['module.fc.weight'].view(torch.int32)[0, 0]
     .bitwise_xor_(1 << 30), "ema_state_dict['module.fc.weight']"),
    ('optimizer', lambda c: c['optimizer']['state'][0]['momentum_buffer'].view(torch.int32)
     [3, 1].bitwise_xor_(1), "optimizer['state'][0]['momentum_buffer']"),
    ('param_schedulers', lambda c: c['param_schedulers'][0].update(last_step=9),
     "param_schedulers[0]['last_step']"),
    ('mmrepro', lambda c: c['mmrepro']['rng'][0]['torch'][100:101].bitwise_xor_(4),
     "mmrepro['rng'][0]['torch']"),
    ('mmrepro', lambda c: c['mmrepro']['position'].update(global_batches=5),
     "mmrepro['position']['global_batches']"),
    ('meta', lambda c: c['meta'].update(iter=9), "meta['iter']"),
])
def test_one_changed_value_is_found_in_its_part_and_named(part, change, first):
    checkpoint = _resumable()
    seal(checkpoint)
    change(checkpoint)
    checks = {c.part: c for c in check_parts(checkpoint, PARTS)}
    assert [p for p, c in checks.items() if c.differs] == [part]
    assert checks[part].first_difference == first
    assert checks[part].found == part_digests(checkpoint, [part])[part].sha256


def test_meta_counts_where_training_continues_not_where_or_when_it_was_saved():
    checkpoint = _resumable()
    seal(checkpoint)
    checkpoint['meta'].update(time='20260101_000000', cfg='model = dict()')
    assert not any(check.differs for check in check_parts(checkpoint, PARTS))
    checkpoint['meta']['seed'] = 1
    assert [c.part for c in check_parts(checkpoint, PARTS) if c.differs] == ['meta']


def test_what_was_not_digested_is_reported_and_not_hashed(monkeypatch):
    checkpoint = _resumable()
    seal(checkpoint)
    del checkpoint['optimizer']  # digested, then lost
    checkpoint['meta'][PARTS_KEY]['parts'].pop('param_schedulers')  # never digested
    checks = {c.part: c for c in check_parts(checkpoint, PARTS)}
    assert checks['optimizer'] == PartCheck('optimizer', checks['optimizer'].expected, None)
    assert checks['optimizer'].differs
    assert checks['param_schedulers'] == PartCheck('param_schedulers', None, None)
    assert not checks['param_schedulers'].differs
    # An earlier mmrepro saved the weights digest alone; MMEngine none.
    checkpoint['meta'].pop(PARTS_KEY)
    assert [(c.part, c.expected is None) for c in check_parts(checkpoint, PARTS)] == [
        ('weights', False), ('param_schedulers', True), ('mmrepro', True), ('meta', True)]
    checkpoint['meta'].pop(META_KEY)
    assert all(c.expected is None and c.found is None for c in check_parts(checkpoint, PARTS))


def test_values_are_hashed_by_what_they_are_not_how_python_shows_them():
    class Thing:
        def __repr__(self):
            return f'<Thing at {hex(id(self))}>'

    assert tree_part('p', dict(a=Thing())) == tree_part('p', dict(a=Thing()))  # no address
    assert tree_part('p', dict(a=(1, 2.5))) == tree_part('p', dict(a=[1, 2.5]))
    assert tree_part('p', [np.float64(0.5)]) != tree_part('p', [0.5])  # dtype and bytes
    assert tree_part('p', {}) != tree_part('p', []) != tree_part('p', None)
    assert tree_part('p', np.arange(3)) != tree_part('p', np.arange(3).astype(np.int32))


def test_first_difference_names_a_missing_entry_then_an_added_one():
    assert first_difference({'a': 1, 'b': 2}, {'a': 1, 'b': 2}) is None
    assert first_difference({'a': 1, 'b': 2}, {'a': 1}) == 'b'
    assert first_difference({'a': 1}, {'a': 1, 'c': 3}) == 'c'
    assert first_difference({'a': 1, 'b': 2}, {'a': 0, 'b': 3}) == 'a'
