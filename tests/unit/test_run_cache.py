"""The session's run cache: one (model, tag), one set of options, or a loud error."""
import os
import os.path as osp
import re
from typing import Any, List, Mapping, Sequence, Tuple

import pytest
from support.run_cache import RunCache, run_key, run_options


class FakeTrainingCache(RunCache):
    """A RunCache whose training only makes the work dir and notes the call."""

    def __init__(self, root: str, trained: List[Tuple[str, str]]) -> None:
        super().__init__(root, data_root=osp.join(root, 'no-data'))
        self.trained = trained

    def _train(self, work_dir: str, model: str, tag: str, args: Sequence[str],
               config_kw: Mapping[str, Any]) -> None:
        os.makedirs(work_dir)
        self.trained.append((model, tag))


@pytest.fixture
def trained() -> List[Tuple[str, str]]:
    """The (model, tag) of every fake training, across all caches of a test."""
    return []


@pytest.fixture
def cache(tmp_path, trained) -> FakeTrainingCache:
    return FakeTrainingCache(str(tmp_path), trained)


def test_a_run_is_trained_once_in_its_model_tag_work_dir(cache, trained, tmp_path):
    first = cache.get('retinanet', 'nw0', '--seed', '7', num_workers=0, persistent=False)
    again = cache.get('retinanet', 'nw0', '--seed', '7', persistent=False, num_workers=0)
    assert first == again == str(tmp_path / 'retinanet-nw0')
    assert trained == [('retinanet', 'nw0')]
    assert osp.isfile(str(tmp_path / 'retinanet-nw0.options.json'))
    assert not os.listdir(first)  # the record lies beside the run, not in it


def test_other_tags_and_models_are_other_runs(cache, trained):
    runs = {cache.get('retinanet'), cache.get('retinanet', 'nw0', num_workers=0),
            cache.get('faster_rcnn', 'nw0', num_workers=0)}
    assert len(runs) == 3
    assert trained == [('retinanet', 'base'), ('retinanet', 'nw0'), ('faster_rcnn', 'nw0')]


def test_the_key_holds_everything_that_changes_the_run():
    key = run_key('retinanet', 'x', run_options(['--seed', '7'], {'b': True, 'a': 'l\n'}))
    assert key == ('retinanet', 'x', ('--seed', '7'), (('a', "'l\\n'"), ('b', 'True')))
    assert run_options((), {'num_workers': 0}) != run_options((), {'num_workers': False})
    assert run_options(('-a', '-b'), {}) != run_options(('-b', '-a'), {})


ASKED_AGAIN = [
    # (options of the first call, options of the second), and the error's two halves
    ((('--seed', '7'), {}), ((), {}), "('--seed', '7')", '()'),
    (((), {'num_workers': 0}), ((), {'num_workers': 2}), '(num_workers=0)', '(num_workers=2)'),
    (((), {'validate': True}), ((), {}), '(validate=True)', '()'),
    ((('--seed', '7'), {'extra': 'a = 1\n'}), (('--seed', '7'), {'extra': 'a = 2\n'}),
     "('--seed', '7', extra='a = 1\\n')", "('--seed', '7', extra='a = 2\\n')"),
]


@pytest.mark.parametrize('first, second, trained_as, asked_as', ASKED_AGAIN)
@pytest.mark.parametrize('same_process', [True, False], ids=['same-cache', 'other-worker'])
def test_a_tag_asked_again_with_other_options_fails_loudly(
        cache, trained, first, second, trained_as, asked_as, same_process):
    work_dir = cache.get('retinanet', 'x', *first[0], **first[1])
    # another xdist worker (or a later fixture) sees only what is on disk
    other = cache if same_process else FakeTrainingCache(cache.root, trained)
    message = (f"RunCache: run ('retinanet', 'x') was trained with {trained_as}; asked again "
               f'with {asked_as}: give the other run its own tag')
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        other.get('retinanet', 'x', *second[0], **second[1])
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        other.digest('retinanet', 'x', *second[0], **second[1])
    assert other.get('retinanet', 'x', *first[0], **first[1]) == work_dir
    assert trained == [('retinanet', 'x')]


def test_a_work_dir_made_without_the_cache_is_not_taken_for_a_run(cache, trained):
    open(cache.work_dir('retinanet', 'x') + '.done', 'w').close()
    with pytest.raises(ValueError, match=r'was made without a record of its options'):
        cache.get('retinanet', 'x')
    assert trained == []
